//! A scan of a `RateLimitRequest` in the protobuf wire format that counts its descriptors, and
//! each descriptor's entries, without decoding anything: a pass over the bytes, no allocation.
//! It runs before prost builds the message, so that a megabyte of empty descriptors (half a
//! million of them, each a `Vec` and a struct once decoded) is refused at the 65th, for the cost
//! of reading its bytes. A message the scan cannot follow is left to prost, which reports it.

use ratelimitd_core::limiter::{Limits, OverCap};

/// `RateLimitRequest.descriptors`.
const DESCRIPTORS: u64 = 2;
/// `RateLimitDescriptor.entries`.
const ENTRIES: u64 = 1;

/// Checks the descriptor and entry counts of the encoded `RateLimitRequest` `msg` against `caps`.
pub(super) fn check_counts(msg: &[u8], caps: &Limits) -> Result<(), OverCap> {
    let mut descriptors = 0;
    each_field(msg, |field, payload| {
        let (DESCRIPTORS, Some(descriptor)) = (field, payload) else {
            return Ok(());
        };
        caps.descriptors(descriptors + 1)?;
        let mut entries = 0;
        each_field(descriptor, |field, _| {
            if field == ENTRIES {
                entries += 1;
                caps.entries(descriptors, entries)?;
            }
            Ok(())
        })?;
        descriptors += 1;
        Ok(())
    })
}

/// Calls `f` with the number of each field of the message `buf`, and the payload of the
/// length-delimited ones; stops quietly where the encoding is broken.
fn each_field(
    mut buf: &[u8],
    mut f: impl FnMut(u64, Option<&[u8]>) -> Result<(), OverCap>,
) -> Result<(), OverCap> {
    while let Some((field, value, rest)) = next_field(buf) {
        let payload = match value {
            Value::Len(b) => Some(b),
            Value::Varint(_) | Value::Fixed => None,
        };
        f(field, payload)?;
        buf = rest;
    }
    Ok(())
}

/// A field's payload on the wire.
#[derive(Debug, Clone, Copy)]
pub(super) enum Value<'a> {
    Varint(u64),
    /// A 64- or 32-bit value, which no field of these messages uses.
    Fixed,
    Len(&'a [u8]),
}

/// The first field of the message `buf` (its number, its payload) and what follows it; `None` at
/// the end or where the encoding is broken (groups, which are deprecated, and invalid wire types
/// included: prost refuses them).
#[inline]
pub(super) fn next_field(buf: &[u8]) -> Option<(u64, Value<'_>, &[u8])> {
    let (key, rest) = varint(buf)?;
    let (value, rest) = match key & 7 {
        0 => varint(rest).map(|(v, r)| (Value::Varint(v), r))?,
        1 => (Value::Fixed, rest.get(8..)?),
        5 => (Value::Fixed, rest.get(4..)?),
        2 => {
            let (len, r) = varint(rest)?;
            let len = usize::try_from(len).ok()?;
            (Value::Len(r.get(..len)?), r.get(len..)?)
        }
        _ => return None,
    };
    Some((key >> 3, value, rest))
}

/// A base-128 varint at the start of `buf` and what follows it, under protobuf's rule (prost's):
/// at most ten bytes, the tenth holding only the 64th bit.
#[inline]
fn varint(buf: &[u8]) -> Option<(u64, &[u8])> {
    // One byte: every field key of these messages, and every length but of the longest values.
    if let [b, rest @ ..] = buf
        && b & 0x80 == 0
    {
        return Some((u64::from(*b), rest));
    }
    let mut v = 0u64;
    for (i, &b) in buf.iter().take(10).enumerate() {
        if i == 9 && b > 1 {
            return None;
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, &buf[i + 1..]));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::grpc::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use crate::grpc::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
    use crate::grpc::pb::envoy::service::ratelimit::v3::RateLimitRequest;

    fn encoded(descriptors: usize, entries: usize) -> Vec<u8> {
        let entry = Entry {
            key: "k".into(),
            value: "v".into(),
        };
        RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![
                RateLimitDescriptor {
                    entries: vec![entry; entries],
                    hits_addend: Some(3),
                    ..Default::default()
                };
                descriptors
            ],
            hits_addend: 7,
        }
        .encode_to_vec()
    }

    #[test]
    fn counts_match_what_prost_decodes() {
        let caps = Limits {
            max_descriptors: 3,
            max_entries: 2,
            ..Limits::default()
        };
        assert_eq!(check_counts(&encoded(3, 2), &caps), Ok(()));
        assert_eq!(
            check_counts(&encoded(4, 0), &caps),
            Err(OverCap::Descriptors { max: 3 })
        );
        assert_eq!(
            check_counts(&encoded(1, 3), &caps),
            Err(OverCap::Entries {
                descriptor: 0,
                max: 2
            })
        );
        // Half a million empty descriptors: refused at the fourth.
        let mut many = encoded(0, 0);
        for _ in 0..500_000 {
            many.extend_from_slice(&[0x12, 0x00]);
        }
        assert_eq!(
            check_counts(&many, &caps),
            Err(OverCap::Descriptors { max: 3 })
        );
    }

    #[test]
    fn broken_encodings_are_left_to_prost() {
        let caps = Limits::default();
        for broken in [&[0x12, 0x05, 0x0a][..], &[0xff; 12], &[0x13], &[0x12]] {
            assert_eq!(check_counts(broken, &caps), Ok(()));
        }
    }
}
