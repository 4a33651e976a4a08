//! A paced run over HTTP/2 written by hand (`--client raw`). A paced run measures a server's
//! latency only as well as the generator keeps its schedule, and the `h2` client (`grpc.rs`)
//! costs about as much per call as the server spends answering it: on a small machine, at half
//! of a server's saturation, the generator's own core is the one that is full, and its lateness
//! is what the percentiles show. Here a call costs two frames appended to a buffer and a scan of
//! the frames that come back, on non-blocking sockets polled by the one busy loop that keeps the
//! schedule; there is no task, no waker and no header map.
//!
//! What the server receives is what tonic's client sends, header for header: the first request
//! on a connection adds its headers to HPACK's dynamic table, later ones name them by index, as
//! a long-lived client's encoder does; the message is the same prost-encoded `RateLimitRequest`.
//! What is read back: the frame headers, the answer's message (for its `overall_code`) and the
//! end of each stream. The server's header blocks are not decoded, so a call counts as answered
//! when its message arrived before its stream ended, and as failed when the stream ended without
//! one (a trailers-only error) or was reset. The `h2` client checks the status headers too;
//! `the_raw_client_is_answered_like_the_h2_one` in the integration tests holds the two together.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use prost::Message;
use prost::bytes::BytesMut;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use ratelimitd_core::clock::Stopwatch;

use super::grpc::{PATH, USER_AGENT, frame, unframe};
use super::paced::Tally;
use super::pacer::Pacer;
use super::{Args, Outcome, micros, next_value, request, set_value};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// Frame types and flags (RFC 9113, section 6).
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;

/// The largest flow-control window HTTP/2 allows.
const MAX_WINDOW: u32 = (1 << 31) - 1;
/// The frames the server may send us: `SETTINGS_MAX_FRAME_SIZE` is left at its default.
const MAX_FRAME: usize = 16 * 1024;
/// The window every connection starts with, before any `WINDOW_UPDATE`.
const INITIAL_WINDOW: i64 = 65_535;
/// How long the connections may take to exchange their settings, and the calls still in flight
/// at the end of the run to be answered.
const GRACE: Duration = Duration::from_secs(5);

/// The header block of a connection's first request: `:method POST` and `:scheme http` from
/// HPACK's static table, then the path, authority and the three headers tonic's client sends,
/// each added to the dynamic table (literals with incremental indexing, names from the static
/// table where it has them: `:path` 4, `:authority` 1, `content-type` 31, `user-agent` 58).
fn first_block(authority: &str) -> Vec<u8> {
    let mut b = vec![0x80 | 3, 0x80 | 6];
    indexed_literal(&mut b, Some(4), ":path", PATH);
    indexed_literal(&mut b, Some(1), ":authority", authority);
    indexed_literal(&mut b, None, "te", "trailers");
    indexed_literal(&mut b, Some(31), "content-type", "application/grpc");
    indexed_literal(&mut b, Some(58), "user-agent", USER_AGENT);
    b
}

/// The header block of every later request: the same headers, all by index. The dynamic table
/// numbers its newest entry 62, so the user agent (added last) is 62 and the path 66.
const NEXT_BLOCK: [u8; 7] = [
    0x80 | 3,
    0x80 | 6,
    0x80 | 66,
    0x80 | 65,
    0x80 | 64,
    0x80 | 63,
    0x80 | 62,
];

/// The dynamic table space the first block's five entries take (each its name, its value and 32
/// octets: RFC 7541, section 4.1).
fn table_need(authority: &str) -> u32 {
    let entries = [
        (":path", PATH),
        (":authority", authority),
        ("te", "trailers"),
        ("content-type", "application/grpc"),
        ("user-agent", USER_AGENT),
    ];
    entries
        .iter()
        .map(|(n, v)| (n.len() + v.len() + 32) as u32)
        .sum()
}

/// An HPACK integer with an `n`-bit prefix, the prefix's other bits set to `first`.
fn hpack_int(out: &mut Vec<u8>, bits: u8, first: u8, mut value: usize) {
    let max = (1usize << bits) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// A string literal, not Huffman-coded.
fn hpack_string(out: &mut Vec<u8>, s: &str) {
    hpack_int(out, 7, 0, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// A literal header field with incremental indexing, its name by static index or spelled out.
fn indexed_literal(out: &mut Vec<u8>, name_index: Option<usize>, name: &str, value: &str) {
    match name_index {
        Some(i) => hpack_int(out, 6, 0x40, i),
        None => {
            out.push(0x40);
            hpack_string(out, name);
        }
    }
    hpack_string(out, value);
}

/// A frame's 9-byte header.
fn frame_header(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// A call in flight: when it was due and when it left, and the answer's bytes so far.
struct Call {
    due: Duration,
    sent: Duration,
    body: Vec<u8>,
}

/// A finished call: its latency and lateness in microseconds and the answer's `overall_code`
/// (`None`: it failed), as [`Tally::add`] takes it.
type Done = (u32, u32, Option<i32>);

/// One HTTP/2 connection, its socket non-blocking.
struct Connection {
    socket: TcpStream,
    /// Bytes to write; `written` of them are gone.
    out: Vec<u8>,
    written: usize,
    /// Bytes read and not yet parsed (at most a frame's worth left over), and the buffer reads
    /// land in (allocated once: a busy loop reads every connection each turn).
    input: Vec<u8>,
    scratch: Vec<u8>,
    first_block: Vec<u8>,
    table_need: u32,
    sent_first: bool,
    next_stream: u32,
    calls: HashMap<u32, Call>,
    /// The server's SETTINGS arrived (requests wait until they have).
    settled: bool,
    max_streams: usize,
    /// What the server's connection window still takes of our DATA, and what each new
    /// stream's window starts at.
    send_window: i64,
    stream_window: i64,
    /// DATA octets received since the last `WINDOW_UPDATE` we sent for the connection.
    received: u64,
    /// Why the connection is unusable, once it is.
    failed: Option<String>,
}

impl Connection {
    /// Connects to `target` with `TCP_NODELAY` and queues the preface, our SETTINGS (no push,
    /// the largest stream window) and the largest connection window.
    fn open(target: &str) -> io::Result<Connection> {
        let socket = TcpStream::connect(target)?;
        socket.set_nodelay(true)?;
        socket.set_nonblocking(true)?;
        let mut out = PREFACE.to_vec();
        frame_header(&mut out, 12, SETTINGS, 0, 0);
        // SETTINGS_ENABLE_PUSH (2) = 0, SETTINGS_INITIAL_WINDOW_SIZE (4) = the largest.
        out.extend_from_slice(&[0, 2, 0, 0, 0, 0, 0, 4]);
        out.extend_from_slice(&MAX_WINDOW.to_be_bytes());
        frame_header(&mut out, 4, WINDOW_UPDATE, 0, 0);
        out.extend_from_slice(&(MAX_WINDOW - INITIAL_WINDOW as u32).to_be_bytes());
        Ok(Connection {
            socket,
            out,
            written: 0,
            input: Vec::with_capacity(64 * 1024),
            scratch: vec![0; 64 * 1024],
            first_block: first_block(target),
            table_need: table_need(target),
            sent_first: false,
            next_stream: 1,
            calls: HashMap::new(),
            settled: false,
            max_streams: usize::MAX,
            send_window: INITIAL_WINDOW,
            stream_window: INITIAL_WINDOW,
            received: 0,
            failed: None,
        })
    }

    /// Whether a request whose gRPC frame is `len` bytes can leave now.
    fn can_send(&self, len: usize) -> bool {
        self.settled
            && self.failed.is_none()
            && self.calls.len() < self.max_streams
            && self.send_window >= len as i64
            && self.stream_window >= len as i64
            && self.next_stream < MAX_WINDOW
    }

    /// Queues one request: its HEADERS frame and its DATA frame holding `grpc`.
    fn send(&mut self, grpc: &[u8], due: Duration, now: Duration) {
        let id = self.next_stream;
        self.next_stream += 2;
        let block: &[u8] = if self.sent_first {
            &NEXT_BLOCK
        } else {
            &self.first_block
        };
        frame_header(&mut self.out, block.len(), HEADERS, END_HEADERS, id);
        self.out.extend_from_slice(block);
        self.sent_first = true;
        frame_header(&mut self.out, grpc.len(), DATA, END_STREAM, id);
        self.out.extend_from_slice(grpc);
        self.send_window -= grpc.len() as i64;
        self.calls.insert(
            id,
            Call {
                due,
                sent: now,
                body: Vec::new(),
            },
        );
    }

    /// Writes what the socket takes now.
    fn flush(&mut self, done: &mut Vec<Done>, now: Duration) {
        while self.failed.is_none() && self.written < self.out.len() {
            match self.socket.write(&self.out[self.written..]) {
                Ok(0) => self.fail("the server closed the connection".into(), done, now),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => self.fail(format!("writing: {e}"), done, now),
            }
        }
        self.out.clear();
        self.written = 0;
    }

    /// Reads what arrived and handles every whole frame in it; finished calls go to `done`.
    fn read(&mut self, done: &mut Vec<Done>, now: &dyn Fn() -> Duration) {
        loop {
            if self.failed.is_some() {
                return;
            }
            match self.socket.read(&mut self.scratch) {
                Ok(0) => return self.fail("the server closed the connection".into(), done, now()),
                Ok(n) => {
                    self.input.extend_from_slice(&self.scratch[..n]);
                    if n < self.scratch.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(format!("reading: {e}"), done, now()),
            }
        }
        if self.input.len() < 9 {
            return;
        }
        let at = now();
        let input = std::mem::take(&mut self.input);
        let mut rest = &input[..];
        while rest.len() >= 9 && self.failed.is_none() {
            let len = u32::from_be_bytes([0, rest[0], rest[1], rest[2]]) as usize;
            if len > MAX_FRAME {
                self.fail(
                    format!("a frame of {len} bytes (at most {MAX_FRAME})"),
                    done,
                    at,
                );
                break;
            }
            if rest.len() < 9 + len {
                break;
            }
            let (kind, flags) = (rest[3], rest[4]);
            let stream = u32::from_be_bytes([rest[5], rest[6], rest[7], rest[8]]) & MAX_WINDOW;
            self.frame(kind, flags, stream, &rest[9..9 + len], done, at);
            rest = &rest[9 + len..];
        }
        let left = rest.len();
        let mut input = input;
        input.drain(..input.len() - left);
        self.input = input;
    }

    /// Handles one frame from the server.
    fn frame(
        &mut self,
        kind: u8,
        flags: u8,
        stream: u32,
        payload: &[u8],
        done: &mut Vec<Done>,
        now: Duration,
    ) {
        match kind {
            DATA => self.data(flags, stream, payload, done, now),
            HEADERS if flags & END_STREAM != 0 => self.end(stream, true, done, now),
            RST_STREAM => self.end(stream, false, done, now),
            SETTINGS if flags & ACK == 0 => self.settings(payload, done, now),
            PING if flags & ACK == 0 => {
                frame_header(&mut self.out, payload.len(), PING, ACK, 0);
                self.out.extend_from_slice(payload);
            }
            GOAWAY => {
                let code = payload
                    .get(4..8)
                    .map_or(0, |c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
                self.fail(
                    format!("the server sent GOAWAY (error code {code})"),
                    done,
                    now,
                );
            }
            WINDOW_UPDATE if stream == 0 && payload.len() == 4 => {
                let add = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                self.send_window += i64::from(add & MAX_WINDOW);
            }
            _ => {}
        }
    }

    /// A DATA frame: a call's response body, and the connection's window topped up.
    fn data(
        &mut self,
        flags: u8,
        stream: u32,
        payload: &[u8],
        done: &mut Vec<Done>,
        now: Duration,
    ) {
        self.received += payload.len() as u64;
        let data = if flags & PADDED != 0 {
            let pad = usize::from(payload.first().copied().unwrap_or(0));
            payload
                .get(1..payload.len().saturating_sub(pad))
                .unwrap_or(&[])
        } else {
            payload
        };
        if let Some(call) = self.calls.get_mut(&stream) {
            call.body.extend_from_slice(data);
        }
        if flags & END_STREAM != 0 {
            // gRPC ends a call with trailers (its status): a stream that ends on data
            // carries no status.
            self.end(stream, false, done, now);
        }
        // Our stream windows are the largest there is; the connection's is topped up
        // before it runs low.
        if self.received >= u64::from(MAX_WINDOW / 2) {
            frame_header(&mut self.out, 4, WINDOW_UPDATE, 0, 0);
            self.out
                .extend_from_slice(&(self.received as u32).to_be_bytes());
            self.received = 0;
        }
    }

    /// The server's SETTINGS (its HPACK table, concurrent streams and stream window),
    /// acknowledged; a table too small for the prepared headers fails the connection.
    fn settings(&mut self, payload: &[u8], done: &mut Vec<Done>, now: Duration) {
        for s in payload.chunks_exact(6) {
            let value = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
            match u16::from_be_bytes([s[0], s[1]]) {
                1 if value < self.table_need => {
                    let need = self.table_need;
                    return self.fail(
                        format!("the server's HPACK table of {value} octets holds less than the {need} the headers need"),
                        done,
                        now,
                    );
                }
                3 => self.max_streams = value as usize,
                4 => {
                    self.stream_window = i64::from(value);
                }
                _ => {}
            }
        }
        frame_header(&mut self.out, 0, SETTINGS, ACK, 0);
        self.settled = true;
    }

    /// Stream `stream` ended, with trailers (`trailers`) or not.
    fn end(&mut self, stream: u32, trailers: bool, done: &mut Vec<Done>, now: Duration) {
        let Some(call) = self.calls.remove(&stream) else {
            return;
        };
        let code = unframe(&call.body)
            .ok()
            .filter(|_| trailers)
            .and_then(|message| RateLimitResponse::decode(message).ok())
            .map(|r| r.overall_code);
        done.push((
            micros(now.saturating_sub(call.due)),
            micros(call.sent.saturating_sub(call.due)),
            code,
        ));
    }

    /// The connection is unusable: says why once, and fails every call in flight.
    fn fail(&mut self, why: String, done: &mut Vec<Done>, now: Duration) {
        if self.failed.is_none() {
            eprintln!("connection to the server failed: {why}");
            self.failed = Some(why);
        }
        for (_, call) in self.calls.drain() {
            done.push((
                micros(now.saturating_sub(call.due)),
                micros(call.sent.saturating_sub(call.due)),
                None,
            ));
        }
    }
}

/// One pass over `connections`: writes what is queued, reads what came and tallies the calls that
/// ended (`done` is scratch space); returns how many ended.
fn turn(
    connections: &mut [Connection],
    done: &mut Vec<Done>,
    now: &dyn Fn() -> Duration,
    tally: &mut Tally,
) -> usize {
    for c in connections.iter_mut() {
        c.flush(done, now());
        c.read(done, now);
    }
    let ended = done.len();
    for d in done.drain(..) {
        tally.add(d);
    }
    ended
}

/// Runs `rate` requests per second for `run_for` (at most `--max-requests`) over
/// `--connections` connections, at most `--concurrency` in flight, and prints how late they
/// left. A request goes to connection `i % connections`; one that cannot take it yet (its
/// settings or window) holds the requests behind it, as a full `--concurrency` does.
pub(crate) fn run(a: &Args, rate: u64, run_for: Duration) -> Outcome {
    let mut connections: Vec<Connection> = (0..a.connections.max(1))
        .map(|_| Connection::open(&a.target))
        .collect::<io::Result<_>>()
        .unwrap_or_else(|e| panic!("ratelimitd is listening on --target {}: {e}", a.target));
    let mut done = Vec::new();
    let setup = Stopwatch::start();
    while connections.iter().any(|c| !c.settled && c.failed.is_none()) {
        assert!(
            setup.elapsed() < GRACE,
            "the server at {} sent no HTTP/2 SETTINGS within {GRACE:?}",
            a.target
        );
        for c in &mut connections {
            c.flush(&mut done, setup.elapsed());
            c.read(&mut done, &|| setup.elapsed());
        }
    }
    if let Some(why) = connections.iter().find_map(|c| c.failed.as_ref()) {
        panic!("connecting to {}: {why}", a.target);
    }

    let watch = Stopwatch::start();
    let now = || watch.elapsed();
    let mut pacer = Pacer::new(rate, a.max_requests);
    let limit = a.concurrency.max(1);
    let mut waiting: VecDeque<u64> = VecDeque::new();
    let mut in_flight = 0usize;
    let mut tally = Tally::default();
    let mut message = request(&a.domain, &a.key, 0);
    let mut buf = BytesMut::new();
    loop {
        let at = now();
        if at >= run_for {
            break;
        }
        waiting.extend(pacer.release(at));
        while in_flight < limit
            && let Some(&i) = waiting.front()
        {
            set_value(&mut message, (next_value(i) >> 33) % a.keys);
            let grpc = frame(&message, &mut buf);
            let n = connections.len();
            let c = &mut connections[i as usize % n];
            if c.failed.is_some() {
                tally.add((micros(at.saturating_sub(pacer.due(i))), 0, None));
            } else if c.can_send(grpc.len()) {
                c.send(&grpc, pacer.due(i), now());
                in_flight += 1;
            } else {
                break;
            }
            waiting.pop_front();
        }
        in_flight -= turn(&mut connections, &mut done, &now, &mut tally);
        if waiting.is_empty() && pacer.next_due().is_none_or(|at| at >= run_for) {
            break;
        }
    }
    // The calls still in flight get `GRACE` to be answered; any left then count as failed.
    let unsent = waiting.len() as u64;
    let end = now() + GRACE;
    while in_flight > 0 && now() < end {
        in_flight -= turn(&mut connections, &mut done, &now, &mut tally);
    }
    for c in connections.iter_mut().filter(|c| !c.calls.is_empty()) {
        c.fail(
            format!("no answer within {GRACE:?} of the run's end"),
            &mut done,
            now(),
        );
    }
    for d in done.drain(..) {
        tally.add(d);
    }
    tally.finish(rate, unsent, limit)
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    #[test]
    fn integers_take_their_prefix_then_seven_bits_a_byte() {
        // RFC 7541, C.1: 10 and 1337 with a 5-bit prefix, 42 with an 8-bit one.
        let mut out = Vec::new();
        hpack_int(&mut out, 5, 0, 10);
        hpack_int(&mut out, 5, 0xe0, 1337);
        hpack_int(&mut out, 8, 0, 42);
        assert_eq!(out, [10, 0xe0 | 31, 154, 10, 42]);
        // A 62-byte path is one byte too long for a 6-bit prefix: continued.
        let mut out = Vec::new();
        hpack_int(&mut out, 6, 0x40, 63);
        assert_eq!(out, [0x7f, 0]);
    }

    #[test]
    fn the_first_block_fills_the_table_the_next_ones_read() {
        let block = first_block("127.0.0.1:8081");
        // :method POST, :scheme http, then `:path` added under the static name 4 with its value
        // spelled out (no Huffman coding).
        assert_eq!(block[..3], [0x83, 0x86, 0x44]);
        assert_eq!(usize::from(block[3]), PATH.len());
        assert_eq!(&block[4..4 + PATH.len()], PATH.as_bytes());
        // The new name `te` is spelled out; the block ends on the user agent's value.
        let te = [0x40, 2, b't', b'e', 8];
        assert!(block.windows(te.len()).any(|w| w == te));
        assert!(block.ends_with(USER_AGENT.as_bytes()));
        // Five entries of 32 octets each, plus their names and values.
        assert_eq!(
            table_need("127.0.0.1:8081"),
            (5 * 32 + 5 + PATH.len() + 10 + 14 + 2 + 8 + 12 + 16 + 10 + USER_AGENT.len()) as u32
        );
    }

    /// A connection to a listener this test plays the server on, settled by the server's SETTINGS
    /// (at most `streams` in flight), and the server's end.
    fn pair(streams: u32) -> (Connection, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Connection::open(&listener.local_addr().unwrap().to_string()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        // A test whose client never writes what it waits for fails instead of hanging.
        server.set_read_timeout(Some(GRACE)).unwrap();
        let mut settings = Vec::new();
        frame_header(&mut settings, 12, SETTINGS, 0, 0);
        settings.extend_from_slice(&[0, 1, 0, 0, 0x10, 0, 0, 3]);
        settings.extend_from_slice(&streams.to_be_bytes());
        server.write_all(&settings).unwrap();
        let mut done = Vec::new();
        turn_until(&mut c, &mut done, |c| c.settled);
        // The ACK of the server's SETTINGS leaves with the next flush.
        c.flush(&mut done, Duration::ZERO);
        (c, server)
    }

    /// Writes and reads on `c` until `ready` holds (at most a few seconds).
    fn turn_until(c: &mut Connection, done: &mut Vec<Done>, ready: impl Fn(&Connection) -> bool) {
        let watch = Stopwatch::start();
        while !ready(c) {
            assert!(watch.elapsed() < GRACE, "the connection did not get there");
            c.flush(done, watch.elapsed());
            c.read(done, &|| watch.elapsed());
        }
    }

    /// Reads from the test's server end until `n` bytes came.
    fn receive(server: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut got = vec![0; n];
        server.read_exact(&mut got).unwrap();
        got
    }

    #[test]
    fn a_call_ends_with_its_answer_and_trailers_even_split_across_reads() {
        let (mut c, mut server) = pair(1);
        // The preface, our SETTINGS and window, then the ACK of the server's SETTINGS.
        let hello = receive(&mut server, PREFACE.len() + 9 + 12 + 9 + 4 + 9);
        assert!(hello.starts_with(PREFACE));
        assert_eq!(
            hello[hello.len() - 9..],
            [0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]
        );
        assert!(c.can_send(30), "settled, with room for one call");
        let grpc = [0, 0, 0, 0, 2, 0x0a, 0];
        c.send(&grpc, Duration::ZERO, Duration::ZERO);
        assert!(!c.can_send(30), "the server's one stream is taken");
        let mut done = Vec::new();
        c.flush(&mut done, Duration::ZERO);
        let headers = receive(&mut server, 9 + c.first_block.len());
        assert_eq!(headers[3..9], [HEADERS, END_HEADERS, 0, 0, 0, 1]);
        let data = receive(&mut server, 9 + grpc.len());
        assert_eq!(data[3..9], [DATA, END_STREAM, 0, 0, 0, 1]);
        assert_eq!(data[9..], grpc);

        // The answer: headers, OVER_LIMIT (overall_code 2) in one message, trailers; sent with
        // a PING in between and cut mid-frame.
        let answer = RateLimitResponse {
            overall_code: 2,
            ..RateLimitResponse::default()
        }
        .encode_to_vec();
        let mut bytes = Vec::new();
        frame_header(&mut bytes, 1, HEADERS, END_HEADERS, 1);
        bytes.push(0x88);
        frame_header(&mut bytes, 8, PING, 0, 0);
        bytes.extend_from_slice(b"12345678");
        frame_header(&mut bytes, 5 + answer.len(), DATA, 0, 1);
        bytes.extend_from_slice(&[0, 0, 0, 0, answer.len() as u8]);
        bytes.extend_from_slice(&answer);
        frame_header(&mut bytes, 1, HEADERS, END_HEADERS | END_STREAM, 1);
        bytes.push(0x40);
        let (first, second) = bytes.split_at(9 + 1 + 9 + 4);
        server.write_all(first).unwrap();
        // The response headers are handled; the PING's header and half its payload wait.
        turn_until(&mut c, &mut done, |c| c.input.len() == 9 + 4);
        assert!(done.is_empty());
        server.write_all(second).unwrap();
        turn_until(&mut c, &mut done, |c| c.calls.is_empty());
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].2, Some(2), "the answer's overall_code");
        // The PING is answered with its own payload, on the next flush.
        c.flush(&mut done, Duration::ZERO);
        let mut pong = Vec::new();
        frame_header(&mut pong, 8, PING, ACK, 0);
        pong.extend_from_slice(b"12345678");
        assert_eq!(receive(&mut server, pong.len()), pong);
    }

    #[test]
    fn a_stream_reset_or_ended_without_an_answer_is_a_failed_call() {
        let (mut c, mut server) = pair(100);
        for _ in 0..3 {
            c.send(&[0, 0, 0, 0, 0], Duration::ZERO, Duration::ZERO);
        }
        let mut bytes = Vec::new();
        // Stream 1: trailers only (a gRPC error); stream 3: reset; stream 5: data, no trailers.
        frame_header(&mut bytes, 1, HEADERS, END_HEADERS | END_STREAM, 1);
        bytes.push(0x88);
        frame_header(&mut bytes, 4, RST_STREAM, 0, 3);
        bytes.extend_from_slice(&2u32.to_be_bytes());
        frame_header(&mut bytes, 5, DATA, END_STREAM, 5);
        bytes.extend_from_slice(&[0, 0, 0, 0, 0]);
        server.write_all(&bytes).unwrap();
        let mut done = Vec::new();
        turn_until(&mut c, &mut done, |c| c.calls.is_empty());
        assert_eq!(done.iter().map(|d| d.2).collect::<Vec<_>>(), [None; 3]);
    }

    #[test]
    fn goaway_fails_the_connection_and_its_calls_and_says_why() {
        let (mut c, mut server) = pair(100);
        c.send(&[0, 0, 0, 0, 0], Duration::ZERO, Duration::ZERO);
        let mut bytes = Vec::new();
        frame_header(&mut bytes, 8, GOAWAY, 0, 0);
        bytes.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 11]);
        server.write_all(&bytes).unwrap();
        let mut done = Vec::new();
        turn_until(&mut c, &mut done, |c| c.failed.is_some());
        assert_eq!(
            c.failed.as_deref(),
            Some("the server sent GOAWAY (error code 11)")
        );
        assert_eq!(done.len(), 1);
        assert!(!c.can_send(5));
    }

    #[test]
    fn a_table_too_small_for_the_headers_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Connection::open(&listener.local_addr().unwrap().to_string()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut settings = Vec::new();
        frame_header(&mut settings, 6, SETTINGS, 0, 0);
        settings.extend_from_slice(&[0, 1, 0, 0, 0, 64]);
        server.write_all(&settings).unwrap();
        let mut done = Vec::new();
        turn_until(&mut c, &mut done, |c| c.failed.is_some());
        let why = c.failed.unwrap();
        assert!(why.contains("HPACK table of 64 octets"), "{why}");
    }
}
