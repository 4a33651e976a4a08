//! The memcached text protocol over one TCP connection, and the small pool of idle connections
//! kept per server (`MEMCACHE_MAX_IDLE_CONNS`). Only what fixed windows need: `incr`, `decr`,
//! `add` and `version`. Every reply line is read with a bound, so a misbehaving server cannot
//! make a request buffer without limit; callers bound the time with `MEMCACHE_TIMEOUT`.

use std::io;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The longest reply line read (a number, `NOT_FOUND`, or an error with its message).
const MAX_LINE: u64 = 1024;

/// What `incr`/`decr` answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Counted {
    /// The value after the command.
    Value(u64),
    /// The key does not exist.
    NotFound,
    /// memcached refused the command for this key's data (`CLIENT_ERROR`, e.g. a value that is
    /// not a number); the connection stays usable and the server is fine.
    Refused,
}

/// One open connection to a memcached server.
#[derive(Debug)]
pub(super) struct Conn {
    stream: BufReader<TcpStream>,
}

/// A reply memcached should not have sent: the connection is not reused after it.
fn bad_reply(line: &[u8]) -> io::Error {
    let shown: String = String::from_utf8_lossy(line).chars().take(120).collect();
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected memcached reply {:?}", shown.trim_end()),
    )
}

impl Conn {
    async fn connect(addr: &str) -> io::Result<Conn> {
        let tcp = TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        Ok(Conn {
            stream: BufReader::new(tcp),
        })
    }

    /// One reply line without its `\r\n`, at most [`MAX_LINE`] bytes.
    async fn line(&mut self) -> io::Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(32);
        (&mut self.stream)
            .take(MAX_LINE)
            .read_until(b'\n', &mut buf)
            .await?;
        if !buf.ends_with(b"\r\n") {
            return Err(if buf.len() as u64 >= MAX_LINE {
                bad_reply(&buf)
            } else {
                io::ErrorKind::UnexpectedEof.into()
            });
        }
        buf.truncate(buf.len() - 2);
        Ok(buf)
    }

    /// Sends `incr` (or `decr`) of `by` for every key in one write, then reads the replies in
    /// order: one round trip for a request's keys on this server.
    pub(super) async fn count(
        &mut self,
        cmd: &str,
        keys: &[(&str, u64)],
    ) -> io::Result<Vec<Counted>> {
        let mut out = Vec::with_capacity(keys.iter().map(|(k, _)| k.len() + 32).sum());
        for (key, by) in keys {
            out.extend_from_slice(format!("{cmd} {key} {by}\r\n").as_bytes());
        }
        self.stream.get_mut().write_all(&out).await?;
        let mut replies = Vec::with_capacity(keys.len());
        for _ in keys {
            let line = self.line().await?;
            replies.push(match line.as_slice() {
                b"NOT_FOUND" => Counted::NotFound,
                l if l.starts_with(b"CLIENT_ERROR ") => Counted::Refused,
                digits => std::str::from_utf8(digits)
                    .ok()
                    .and_then(|s| s.trim().parse().ok())
                    .map(Counted::Value)
                    .ok_or_else(|| bad_reply(digits))?,
            });
        }
        Ok(replies)
    }

    /// `add key 0 exptime` with `value` as its data: true when stored, false when the key
    /// already exists (another instance created it first).
    pub(super) async fn add(&mut self, key: &str, value: u64, exptime: u64) -> io::Result<bool> {
        let data = value.to_string();
        let cmd = format!("add {key} 0 {exptime} {}\r\n{data}\r\n", data.len());
        self.stream.get_mut().write_all(cmd.as_bytes()).await?;
        match self.line().await?.as_slice() {
            b"STORED" => Ok(true),
            b"NOT_STORED" => Ok(false),
            other => Err(bad_reply(other)),
        }
    }

    /// `delete` of every key in one write, then the replies in order: how many existed.
    pub(super) async fn delete(&mut self, keys: &[&str]) -> io::Result<u64> {
        let mut out = Vec::with_capacity(keys.iter().map(|k| k.len() + 10).sum());
        for key in keys {
            out.extend_from_slice(format!("delete {key}\r\n").as_bytes());
        }
        self.stream.get_mut().write_all(&out).await?;
        let mut deleted = 0;
        for _ in keys {
            match self.line().await?.as_slice() {
                b"DELETED" => deleted += 1,
                b"NOT_FOUND" => {}
                other => return Err(bad_reply(other)),
            }
        }
        Ok(deleted)
    }

    /// `stats`: the general statistics, as `(name, value)` until `END` (at most 200 lines).
    pub(super) async fn stats(&mut self) -> io::Result<Vec<(String, String)>> {
        self.stream.get_mut().write_all(b"stats\r\n").await?;
        let mut out = Vec::new();
        for _ in 0..200 {
            let line = self.line().await?;
            if line == b"END" {
                return Ok(out);
            }
            let text = String::from_utf8_lossy(&line);
            match text.strip_prefix("STAT ").and_then(|s| s.split_once(' ')) {
                Some((name, value)) => out.push((name.to_string(), value.to_string())),
                None => return Err(bad_reply(&line)),
            }
        }
        Err(bad_reply(b"stats: more than 200 lines"))
    }

    /// `version`: the server answers commands.
    pub(super) async fn version(&mut self) -> io::Result<()> {
        self.stream.get_mut().write_all(b"version\r\n").await?;
        match self.line().await? {
            l if l.starts_with(b"VERSION ") => Ok(()),
            other => Err(bad_reply(&other)),
        }
    }
}

/// One server's address and its idle connections.
#[derive(Debug)]
pub(super) struct Pool {
    /// `host:port`, as configured; also the server's name in breakers and answers.
    pub(super) addr: &'static str,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
}

impl Pool {
    /// A pool keeping at most `max_idle` idle connections to `addr`.
    pub(super) fn new(addr: &'static str, max_idle: usize) -> Pool {
        Pool {
            addr,
            idle: Mutex::new(Vec::new()),
            max_idle,
        }
    }

    /// An idle connection, or a new one (connecting within `timeout`).
    pub(super) async fn take(&self, timeout: Duration) -> io::Result<Conn> {
        if let Some(c) = self.idle.lock().pop() {
            return Ok(c);
        }
        match tokio::time::timeout(timeout, Conn::connect(self.addr)).await {
            Ok(c) => c,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("connect to {} timed out after {timeout:?}", self.addr),
            )),
        }
    }

    /// Returns a connection whose last exchange completed; beyond `max_idle` it is closed.
    pub(super) fn give_back(&self, c: Conn) {
        let mut idle = self.idle.lock();
        if idle.len() < self.max_idle {
            idle.push(c);
        }
    }
}
