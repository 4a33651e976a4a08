//! A decision written straight from the limiter's [`Response`] into the bytes of a framed
//! `RateLimitResponse`, the bytes prost writes for the message [`super::convert`] builds from it:
//! fields in number order, proto3's zero values left out, every nested message preceded by its
//! length. Building that message only to encode it cost a list, a copy of every string and two
//! passes over the result; here the answer is measured once and written once.
//!
//! A response carrying dynamic metadata (a protobuf `Struct` of arbitrary JSON) is left to prost
//! (`None`): it is rare, and prost's encoding of it is the reference.

use axum::body::Bytes;

use super::unit::to_proto_number;
use super::{MESSAGE_PREFIX, convert};
use ratelimitd_core::limiter::{Code, CurrentLimit, DescriptorStatus, Response};

/// Protobuf's wire types used here.
const VARINT: u64 = 0;
const LEN: u64 = 2;

/// `r` as one uncompressed gRPC message, prefix included; `None` for a response with dynamic
/// metadata.
pub(super) fn framed(r: &Response) -> Option<Bytes> {
    if r.dynamic_metadata.is_some() {
        return None;
    }
    let len = response_len(r);
    let mut out = Vec::with_capacity(MESSAGE_PREFIX + len);
    out.push(0);
    // A message longer than 4 GiB cannot be framed; the caller's caps keep far below it.
    out.extend_from_slice(&u32::try_from(len).ok()?.to_be_bytes());
    uint(&mut out, 1, code(r.overall_code));
    for s in &r.statuses {
        message(&mut out, 2, status_len(s));
        status(&mut out, s);
    }
    for (key, value) in &r.response_headers {
        message(&mut out, 3, text_len(1, key) + text_len(2, value));
        text(&mut out, 1, key);
        text(&mut out, 2, value);
    }
    debug_assert_eq!(out.len(), MESSAGE_PREFIX + len);
    Some(Bytes::from(out))
}

fn response_len(r: &Response) -> usize {
    let statuses: usize = r
        .statuses
        .iter()
        .map(|s| message_len(2, status_len(s)))
        .sum();
    let headers: usize = r
        .response_headers
        .iter()
        .map(|(k, v)| message_len(3, text_len(1, k) + text_len(2, v)))
        .sum();
    uint_len(1, code(r.overall_code)) + statuses + headers
}

/// `RateLimitResponse.DescriptorStatus`.
fn status(out: &mut Vec<u8>, s: &DescriptorStatus) {
    uint(out, 1, code(s.code));
    if let Some(l) = &s.current_limit {
        message(out, 2, limit_len(l));
        uint(out, 1, u64::from(l.requests_per_unit));
        uint(out, 2, unit(l));
        text(out, 3, &l.name);
    }
    uint(out, 3, u64::from(s.limit_remaining));
    if let Some(d) = s.duration_until_reset {
        let (secs, nanos) = duration(d);
        message(out, 4, uint_len(1, secs) + uint_len(2, nanos));
        uint(out, 1, secs);
        uint(out, 2, nanos);
    }
}

fn status_len(s: &DescriptorStatus) -> usize {
    let limit = s
        .current_limit
        .as_ref()
        .map_or(0, |l| message_len(2, limit_len(l)));
    let reset = s.duration_until_reset.map_or(0, |d| {
        let (secs, nanos) = duration(d);
        message_len(4, uint_len(1, secs) + uint_len(2, nanos))
    });
    uint_len(1, code(s.code)) + limit + uint_len(3, u64::from(s.limit_remaining)) + reset
}

/// `RateLimitResponse.RateLimit`.
fn limit_len(l: &CurrentLimit) -> usize {
    uint_len(1, u64::from(l.requests_per_unit)) + uint_len(2, unit(l)) + text_len(3, &l.name)
}

/// The varint of `c`'s enum number.
fn code(c: Code) -> u64 {
    u64::from(convert::code(c).unsigned_abs())
}

fn unit(l: &CurrentLimit) -> u64 {
    u64::from(to_proto_number(l.unit).unsigned_abs())
}

/// The varints of a `google.protobuf.Duration`'s seconds and nanos, converted as the prost path
/// converts them (both are never negative: seconds saturate, nanos are under a billion).
fn duration(d: std::time::Duration) -> (u64, u64) {
    let d = convert::duration(d);
    (d.seconds.unsigned_abs(), u64::from(d.nanos.unsigned_abs()))
}

/// A varint field; proto3 leaves out a zero.
fn uint(out: &mut Vec<u8>, field: u64, v: u64) {
    if v != 0 {
        varint(out, field << 3 | VARINT);
        varint(out, v);
    }
}

fn uint_len(field: u64, v: u64) -> usize {
    if v == 0 {
        0
    } else {
        varint_len(field << 3 | VARINT) + varint_len(v)
    }
}

/// A string field; proto3 leaves out an empty one.
fn text(out: &mut Vec<u8>, field: u64, s: &str) {
    if !s.is_empty() {
        message(out, field, s.len());
        out.extend_from_slice(s.as_bytes());
    }
}

fn text_len(field: u64, s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        message_len(field, s.len())
    }
}

/// The key and length of a length-delimited field of `len` bytes (its payload follows).
fn message(out: &mut Vec<u8>, field: u64, len: usize) {
    varint(out, field << 3 | LEN);
    varint(out, len as u64);
}

/// A length-delimited field of `len` bytes, key and length included.
fn message_len(field: u64, len: usize) -> usize {
    varint_len(field << 3 | LEN) + varint_len(len as u64) + len
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(v: u64) -> usize {
    // One byte per started group of seven bits, and one for zero.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;
    use prost::Message;

    use super::*;
    use crate::grpc::pb::envoy::service::ratelimit::v3::RateLimitResponse;
    use ratelimitd_core::algorithm::Window;
    use ratelimitd_core::clock::Timestamp;
    use ratelimitd_core::config::Unit;

    /// What the prost path sends for `r`: the converted message, encoded and framed.
    fn by_prost(r: &Response) -> Vec<u8> {
        let m = RateLimitResponse::from(r.clone());
        let mut out = vec![0];
        out.extend_from_slice(&u32::try_from(m.encoded_len()).unwrap().to_be_bytes());
        m.encode(&mut out).unwrap();
        out
    }

    fn code() -> impl Strategy<Value = Code> {
        prop_oneof![Just(Code::Ok), Just(Code::OverLimit)]
    }

    fn unit() -> impl Strategy<Value = Unit> {
        prop_oneof![
            Just(Unit::Second),
            Just(Unit::Minute),
            Just(Unit::Hour),
            Just(Unit::Day),
            Just(Unit::Week),
            Just(Unit::Month),
            Just(Unit::Year),
        ]
    }

    fn status() -> impl Strategy<Value = DescriptorStatus> {
        let limit = proptest::option::of(("\\PC{0,20}", any::<u32>(), unit()).prop_map(
            |(name, requests_per_unit, unit)| CurrentLimit {
                name,
                requests_per_unit,
                unit,
                window: Window::SECOND,
                concurrency: false,
            },
        ));
        let secs = prop_oneof![Just(0u64), 0u64..100_000, Just(u64::MAX), any::<u64>()];
        let nanos = prop_oneof![Just(0u32), 0u32..1_000_000_000];
        let reset = proptest::option::of((secs, nanos).prop_map(|(s, n)| Duration::new(s, n)));
        let remaining = prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()];
        (code(), limit, remaining, reset).prop_map(
            |(code, current_limit, limit_remaining, duration_until_reset)| DescriptorStatus {
                code,
                current_limit,
                limit_remaining,
                duration_until_reset,
                wait: Duration::ZERO,
                debt: 0,
            },
        )
    }

    fn response() -> impl Strategy<Value = Response> {
        let header = ("\\PC{0,12}", "\\PC{0,200}");
        (
            code(),
            proptest::collection::vec(status(), 0..5),
            proptest::collection::vec(header, 0..4),
        )
            .prop_map(|(overall_code, statuses, response_headers)| Response {
                overall_code,
                statuses,
                response_headers,
                dynamic_metadata: None,
                decided_at: Timestamp::from_secs(1),
                holds_slots: false,
                other_limits: Vec::new(),
                soft_breach: false,
            })
    }

    proptest! {
        /// Byte for byte what prost writes for the converted message.
        #[test]
        fn writes_what_prost_writes(r in response()) {
            prop_assert_eq!(framed(&r).map(|b| b.to_vec()), Some(by_prost(&r)));
        }
    }

    #[test]
    fn a_response_with_dynamic_metadata_is_left_to_prost() {
        let mut metadata = serde_json::Map::new();
        metadata.insert("k".into(), serde_json::json!("v"));
        let r = Response {
            overall_code: Code::Ok,
            statuses: vec![DescriptorStatus::unlimited()],
            response_headers: Vec::new(),
            dynamic_metadata: Some(metadata),
            decided_at: Timestamp::from_secs(1),
            holds_slots: false,
            other_limits: Vec::new(),
            soft_breach: false,
        };
        assert_eq!(framed(&r), None);
    }

    #[test]
    fn varint_lengths_match_the_encoding() {
        for v in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut out = Vec::new();
            varint(&mut out, v);
            assert_eq!(varint_len(v), out.len(), "{v}");
        }
    }
}
