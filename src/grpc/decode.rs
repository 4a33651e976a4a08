//! A `RateLimitRequest` read from its protobuf encoding straight into the limiter's [`Request`].
//! prost would build the generated message first (each field through its generic merge loop,
//! each nested message merged into a default one), which is then taken apart into the limiter's
//! types; on the direct path that pair cost about as much as the descriptor's whole decision
//! outside the store. Here each field is read once into where it ends up.
//!
//! Only the encodings a client normally sends are read this way: every field known, with its
//! declared wire type, and each singular message (an override, a `hits_addend`) at most once.
//! For anything else (an unknown or misplaced field, a singular message sent twice, which
//! protobuf merges, text that is not UTF-8, a varint or a length that runs past the end) the
//! answer is `None` and the caller decodes with prost as before, so such a message decodes, or
//! fails, exactly as it did.

use super::unit::from_proto_number;
use super::wire::{Value, next_field};
use ratelimitd_core::limiter::{Descriptor, Entry, Override, Request};

/// The request encoded in `msg` (a whole message, without its gRPC prefix), or `None` where
/// prost must decide (see the module's header).
pub(super) fn request(msg: &[u8]) -> Option<Request> {
    let mut req = Request::default();
    fields(msg, |field, value| {
        match (field, value) {
            (1, Value::Len(b)) => req.domain = text(b)?,
            (2, Value::Len(b)) => req.descriptors.push(descriptor(b)?),
            // uint32: protobuf keeps the low 32 bits of a longer varint.
            (3, Value::Varint(v)) => req.hits_addend = u64::from(v as u32),
            _ => return None,
        }
        Some(())
    })?;
    Some(req)
}

/// `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`, its holder entry split out as
/// the prost path's conversion does.
fn descriptor(msg: &[u8]) -> Option<Descriptor> {
    let mut d = Descriptor::default();
    fields(msg, |field, value| {
        match (field, value) {
            (1, Value::Len(b)) => d.entries.push(entry(b)?),
            (2, Value::Len(b)) if d.limit.is_none() => d.limit = Some(limit(b)?),
            // google.protobuf.UInt64Value: its one field, 0 when absent.
            (3, Value::Len(b)) if d.hits_addend.is_none() => {
                let mut n = 0;
                fields(b, |field, value| match (field, value) {
                    (1, Value::Varint(v)) => {
                        n = v;
                        Some(())
                    }
                    _ => None,
                })?;
                d.hits_addend = Some(n);
            }
            (4, Value::Varint(v)) => d.refund = v != 0,
            _ => return None,
        }
        Some(())
    })?;
    d.split_holder();
    d.split_report();
    Some(d)
}

/// `RateLimitDescriptor.Entry`.
fn entry(msg: &[u8]) -> Option<Entry> {
    let (mut key, mut value) = (String::new(), String::new());
    fields(msg, |field, v| {
        match (field, v) {
            (1, Value::Len(b)) => key = text(b)?,
            (2, Value::Len(b)) => value = text(b)?,
            _ => return None,
        }
        Some(())
    })?;
    Some(Entry { key, value })
}

/// `RateLimitDescriptor.RateLimitOverride`; its unit number is read raw, as the prost path's
/// conversion reads it.
fn limit(msg: &[u8]) -> Option<Override> {
    let (mut requests_per_unit, mut unit) = (0, 0);
    fields(msg, |field, value| {
        match (field, value) {
            (1, Value::Varint(v)) => requests_per_unit = v as u32,
            // An enum is an int32 on the wire: the low 32 bits, as prost reads it.
            (2, Value::Varint(v)) => unit = v as i32,
            _ => return None,
        }
        Some(())
    })?;
    Some(Override {
        requests_per_unit,
        unit: from_proto_number(unit),
    })
}

/// Calls `f` with each field of the message `buf` in order; `None` as soon as `f` says so or the
/// encoding is broken, read to the end.
fn fields<'a>(mut buf: &'a [u8], mut f: impl FnMut(u64, Value<'a>) -> Option<()>) -> Option<()> {
    while !buf.is_empty() {
        let (field, value, rest) = next_field(buf)?;
        f(field, value)?;
        buf = rest;
    }
    Some(())
}

/// A string field's text (protobuf requires UTF-8).
fn text(b: &[u8]) -> Option<String> {
    std::str::from_utf8(b).ok().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use prost::Message;

    use super::*;
    use crate::grpc::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
    use crate::grpc::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
        Entry as PbEntry, RateLimitOverride,
    };
    use crate::grpc::pb::envoy::service::ratelimit::v3::RateLimitRequest;
    use ratelimitd_core::limiter::request::HOLDER_ENTRY_KEY;

    /// What the prost path makes of `msg`: `None` where prost refuses it.
    fn by_prost(msg: &[u8]) -> Option<Request> {
        RateLimitRequest::decode(msg).ok().map(Request::from)
    }

    fn pb_entry() -> impl Strategy<Value = PbEntry> {
        let key = prop_oneof![
            Just(HOLDER_ENTRY_KEY.to_string()),
            Just(String::new()),
            "[a-z_]{1,8}",
            "\\PC{0,6}",
        ];
        (key, "\\PC{0,10}").prop_map(|(key, value)| PbEntry { key, value })
    }

    fn pb_descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
        let limit = proptest::option::of((any::<u32>(), -2i32..10).prop_map(
            |(requests_per_unit, unit)| RateLimitOverride {
                requests_per_unit,
                unit,
            },
        ));
        (
            proptest::collection::vec(pb_entry(), 0..4),
            limit,
            proptest::option::of(any::<u64>()),
            any::<bool>(),
        )
            .prop_map(|(entries, limit, hits_addend, is_negative_hits)| {
                RateLimitDescriptor {
                    entries,
                    limit,
                    hits_addend,
                    is_negative_hits,
                }
            })
    }

    fn pb_request() -> impl Strategy<Value = RateLimitRequest> {
        (
            "\\PC{0,12}",
            proptest::collection::vec(pb_descriptor(), 0..4),
            any::<u32>(),
        )
            .prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
                domain,
                descriptors,
                hits_addend,
            })
    }

    proptest! {
        /// Every message a client encodes decodes here, to what the prost path makes of it.
        #[test]
        fn what_clients_encode_decodes_as_prost_decodes_it(m in pb_request()) {
            let bytes = m.encode_to_vec();
            let ours = request(&bytes);
            prop_assert!(ours.is_some(), "not taken: {m:?}");
            prop_assert_eq!(ours, by_prost(&bytes));
        }

        /// Any bytes at all: either left to prost, or decoded to exactly what prost decodes
        /// (never a request where prost refuses the message).
        #[test]
        fn arbitrary_bytes_are_decoded_as_prost_would_or_left_to_it(
            bytes in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            if let Some(ours) = request(&bytes) {
                prop_assert_eq!(Some(ours), by_prost(&bytes));
            }
        }

        /// The same from a valid message with one byte changed, which keeps most of its shape.
        #[test]
        fn a_corrupted_message_is_decoded_as_prost_would_or_left_to_it(
            m in pb_request(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            let mut bytes = m.encode_to_vec();
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = byte;
            }
            if let Some(ours) = request(&bytes) {
                prop_assert_eq!(Some(ours), by_prost(&bytes));
            }
        }
    }

    #[test]
    fn what_protobuf_merges_or_skips_is_left_to_prost() {
        let d = RateLimitDescriptor {
            limit: Some(RateLimitOverride {
                requests_per_unit: 5,
                unit: 1,
            }),
            hits_addend: Some(2),
            ..Default::default()
        };
        let one = RateLimitRequest {
            domain: "d".into(),
            descriptors: vec![d],
            hits_addend: 0,
        }
        .encode_to_vec();
        assert!(request(&one).is_some());
        // The descriptor's override sent twice (its count, then its unit): prost merges them.
        let descriptor = [0x12, 0x02, 0x08, 0x05, 0x12, 0x02, 0x10, 0x01];
        let mut msg = vec![0x0a, 0x01, b'd', 0x12, 0x08];
        msg.extend_from_slice(&descriptor);
        let merged = by_prost(&msg).unwrap();
        assert_eq!(
            merged.descriptors[0]
                .limit
                .as_ref()
                .map(|o| o.requests_per_unit),
            Some(5)
        );
        assert_eq!(request(&msg), None);
        // An unknown field (9, varint): prost skips it.
        let mut unknown = one.clone();
        unknown.extend_from_slice(&[0x48, 0x01]);
        assert!(by_prost(&unknown).is_some());
        assert_eq!(request(&unknown), None);
        // Text that is not UTF-8: prost refuses it, and so it is left to prost.
        let bad = [0x0a, 0x02, 0xc3, 0x28];
        assert_eq!(by_prost(&bad), None);
        assert_eq!(request(&bad), None);
        // An eleven-byte varint, and a tenth byte past the 64th bit: prost refuses both.
        let mut long = vec![0x18];
        long.extend_from_slice(&[0xff; 9]);
        long.push(0x02);
        assert_eq!(by_prost(&long), None);
        assert_eq!(request(&long), None);
    }
}
