//! Conversions between the generated protos and the limiter's types. Values are carried as sent:
//! the limiter gives `hits_addend` its meaning (request 0 means 1, per-descriptor 0 checks only);
//! override unit numbers are read raw, so 7 means WEEK as in the Go service.

use prost_types::value::Kind;
use serde_json::{Map, Value};

use super::unit::{from_proto_number, to_proto_number};
use crate::grpc::pb::envoy::config::core::v3::HeaderValue;
use crate::grpc::pb::envoy::extensions::common::ratelimit::v3 as common;
use crate::grpc::pb::envoy::service::ratelimit::v3 as rls;
use ratelimitd_core::limiter::headers::RateLimitHeaders;
use ratelimitd_core::limiter::{Code, Descriptor, Entry, Override, Request, Response};

impl From<rls::RateLimitRequest> for Request {
    fn from(p: rls::RateLimitRequest) -> Request {
        Request {
            domain: p.domain,
            descriptors: p.descriptors.into_iter().map(Descriptor::from).collect(),
            hits_addend: u64::from(p.hits_addend),
            max_wait: std::time::Duration::ZERO,
        }
    }
}

impl From<common::RateLimitDescriptor> for Descriptor {
    fn from(p: common::RateLimitDescriptor) -> Descriptor {
        let mut d = Descriptor {
            entries: p
                .entries
                .into_iter()
                .map(|e| Entry {
                    key: e.key,
                    value: e.value,
                })
                .collect(),
            limit: p.limit.map(|o| Override {
                requests_per_unit: o.requests_per_unit,
                unit: from_proto_number(o.unit),
            }),
            hits_addend: p.hits_addend,
            refund: p.is_negative_hits,
            report: false,
            holder: None,
            priority: None,
        };
        // The holder of a concurrency slot travels as a descriptor entry (Envoy can only send
        // entries); it is taken out here so it never reaches matching or a cache key. So is
        // the usage report's marker.
        d.split_holder();
        d.split_report();
        d
    }
}

/// Appends the standard headers ([`RateLimitHeaders::standard`]) to the headers Envoy adds.
pub(crate) fn add_standard_headers(r: &mut Response) {
    let headers = RateLimitHeaders::from_response(r).standard();
    r.response_headers
        .extend(headers.into_iter().map(|(k, v)| (k.to_string(), v)));
}

/// `c`'s number in `RateLimitResponse.Code`.
pub(super) fn code(c: Code) -> i32 {
    match c {
        Code::Ok => rls::rate_limit_response::Code::Ok as i32,
        Code::OverLimit => rls::rate_limit_response::Code::OverLimit as i32,
    }
}

impl From<Response> for rls::RateLimitResponse {
    fn from(r: Response) -> rls::RateLimitResponse {
        use rls::rate_limit_response::{DescriptorStatus, RateLimit};
        rls::RateLimitResponse {
            overall_code: code(r.overall_code),
            statuses: r
                .statuses
                .into_iter()
                .map(|s| DescriptorStatus {
                    code: code(s.code),
                    current_limit: s.current_limit.map(|l| RateLimit {
                        name: l.name,
                        requests_per_unit: l.requests_per_unit,
                        unit: to_proto_number(l.unit),
                    }),
                    limit_remaining: s.limit_remaining,
                    duration_until_reset: s.duration_until_reset.map(duration),
                    quota: None,
                })
                .collect(),
            response_headers_to_add: r
                .response_headers
                .into_iter()
                .map(|(key, value)| HeaderValue {
                    key,
                    value,
                    raw_value: Vec::new(),
                })
                .collect(),
            dynamic_metadata: r.dynamic_metadata.map(to_struct),
            ..Default::default()
        }
    }
}

/// `d` as a `google.protobuf.Duration` (seconds past `i64::MAX` saturate).
pub(super) fn duration(d: std::time::Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: d.subsec_nanos() as i32,
    }
}

/// A JSON object as a protobuf `Struct`.
pub(crate) fn to_struct(m: Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: m.into_iter().map(|(k, v)| (k, to_value(v))).collect(),
    }
}

fn to_value(v: Value) -> prost_types::Value {
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => Kind::StringValue(s),
        Value::Array(a) => Kind::ListValue(prost_types::ListValue {
            values: a.into_iter().map(to_value).collect(),
        }),
        Value::Object(m) => Kind::StructValue(to_struct(m)),
    };
    prost_types::Value { kind: Some(kind) }
}
