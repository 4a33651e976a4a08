//! gRPC `ShouldRateLimit`: protobuf bytes (encoded requests with fields at their edges, then
//! byte-level mutations) decoded by prost as tonic decodes them, converted into the limiter's
//! request, and decided on the embedded store. A decodable request is answered with one status
//! per descriptor or refused as `INVALID_ARGUMENT`, never UNAVAILABLE (the store is healthy); an
//! answer survives its own encoding; and whatever a caller sends, every limit admits a single
//! hit again once its longest window has passed (no input locks a key for longer).

use std::time::Duration;

use proptest::prelude::*;
use prost::Message;
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor,
};
use ratelimitd::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use ratelimitd::testing::status_of;
use ratelimitd_core::limiter::{Code, Request};

use crate::fuzz::harness::{InProcess, KEYS, LONGEST_WINDOW, runtime};
use crate::fuzz::inputs::{edge_u64, edits, mutate, nasty_string};

fn entry() -> impl Strategy<Value = rate_limit_descriptor::Entry> {
    let key = prop_oneof![
        4 => prop::sample::select(KEYS.to_vec()).prop_map(str::to_string),
        1 => nasty_string(),
    ];
    let value = prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "ab", "u1"]).prop_map(str::to_string),
        1 => nasty_string(),
    ];
    (key, value).prop_map(|(key, value)| rate_limit_descriptor::Entry { key, value })
}

fn descriptor() -> impl Strategy<Value = RateLimitDescriptor> {
    let limit = (any::<u32>(), -1i32..10).prop_map(|(requests_per_unit, unit)| {
        rate_limit_descriptor::RateLimitOverride {
            requests_per_unit,
            unit,
        }
    });
    (
        // Now and then just past MAX_ENTRIES_PER_DESCRIPTOR (32).
        prop_oneof![12 => prop::collection::vec(entry(), 0..4), 1 => prop::collection::vec(entry(), 31..34)],
        prop::option::weighted(0.15, limit),
        prop::option::weighted(0.6, edge_u64()),
        prop::bool::weighted(0.15),
    )
        .prop_map(
            |(entries, limit, hits_addend, is_negative_hits)| RateLimitDescriptor {
                entries,
                limit,
                hits_addend,
                is_negative_hits,
            },
        )
}

fn request() -> impl Strategy<Value = RateLimitRequest> {
    let domain =
        prop_oneof![8 => Just("d".to_string()), 1 => Just(String::new()), 1 => nasty_string()];
    let hits = prop_oneof![3 => 0u32..4, 1 => any::<u32>()];
    // Now and then around MAX_DESCRIPTORS_PER_REQUEST (64).
    let descriptors = prop_oneof![
        12 => prop::collection::vec(descriptor(), 0..6),
        1 => prop::collection::vec(descriptor(), 63..66),
    ];
    (domain, descriptors, hits).prop_map(|(domain, descriptors, hits_addend)| RateLimitRequest {
        domain,
        descriptors,
        hits_addend,
    })
}

/// Wire bytes: an encoded request, usually mutated, sometimes raw random bytes.
fn wire() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => request().prop_map(|r| r.encode_to_vec()),
        5 => (request(), edits(3)).prop_map(|(r, e)| mutate(r.encode_to_vec(), &e)),
        1 => prop::collection::vec(any::<u8>(), 0..256),
    ]
}

/// Decides `req` and checks what any caller may rely on; the limiter's answer when decided.
async fn decide(app: &InProcess, req: RateLimitRequest) -> Result<Option<Code>, TestCaseError> {
    let request = Request::from(req);
    match app.service.should_rate_limit(&request).await {
        Ok(resp) => {
            prop_assert_eq!(resp.statuses.len(), request.descriptors.len());
            let overall = resp.overall_code;
            let proto = RateLimitResponse::from(resp);
            let again = RateLimitResponse::decode(proto.encode_to_vec().as_slice())
                .map_err(|e| TestCaseError::fail(format!("answer does not decode: {e}")))?;
            prop_assert_eq!(again, proto);
            Ok(Some(overall))
        }
        Err(e) => {
            let status = status_of(&e);
            prop_assert_eq!(status.code(), tonic::Code::InvalidArgument, "{}", status);
            prop_assert!(!status.message().is_empty());
            Ok(None)
        }
    }
}

proptest! {
    #![proptest_config(crate::fuzz::cases(128))]

    #[test]
    fn decoded_requests_are_decided_or_refused_as_invalid(bytes in wire()) {
        let rt = runtime();
        let app = InProcess::start();
        if let Ok(req) = RateLimitRequest::decode(bytes.as_slice()) {
            rt.block_on(decide(&app, req))?;
        }
    }

    #[test]
    fn no_request_locks_a_key_past_its_longest_window(calls in prop::collection::vec(request(), 1..6)) {
        let rt = runtime();
        let app = InProcess::start();
        rt.block_on(async {
            for req in calls {
                decide(&app, req).await?;
            }
            app.clock.advance(LONGEST_WINDOW * 2 + Duration::from_secs(1));
            for key in KEYS.iter().filter(|k| !["zero", "endpoint"].contains(k)) {
                for value in ["a", "b", "ab", "u1"] {
                    let one = RateLimitRequest {
                        domain: "d".into(),
                        descriptors: vec![RateLimitDescriptor {
                            entries: vec![rate_limit_descriptor::Entry { key: key.to_string(), value: value.into() }],
                            ..Default::default()
                        }],
                        hits_addend: 1,
                    };
                    let code = decide(&app, one).await?;
                    prop_assert_eq!(code, Some(Code::Ok), "{}={} is still denied two days later", key, value);
                }
            }
            Ok(())
        })?;
    }
}
