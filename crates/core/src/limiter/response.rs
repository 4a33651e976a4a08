//! The limiter's response types: codes, per-descriptor statuses, headers and metadata.

use std::time::Duration;

use crate::algorithm::Window;
use crate::clock::Timestamp;
use crate::config::Unit;

/// A decision code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Allowed.
    Ok,
    /// Over the limit.
    OverLimit,
}

impl Code {
    /// The code's name in the protocol (`OK`, `OVER_LIMIT`), as JSON and the metadata write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::OverLimit => "OVER_LIMIT",
        }
    }
}

/// The limit reported back for a descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentLimit {
    /// `rate_limit.name` (empty for overrides and unnamed limits).
    pub name: String,
    /// Requests per unit.
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
    /// The window: the unit times `unit_multiplier` (for the draft `RateLimit-Policy` header);
    /// a concurrency limit's lease timeout.
    pub window: Window,
    /// True for a concurrency limit: `requests_per_unit` is a number of slots held at once, not a
    /// rate, and `window` is no window (the draft header then says `qu="concurrent-requests"`).
    pub concurrency: bool,
}

/// The result for one descriptor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DescriptorStatus {
    /// OK or `OVER_LIMIT` (after per-rule shadow mode).
    pub code: Code,
    /// The applied limit; `None` for no limit, unlimited, and replaced limits.
    pub current_limit: Option<CurrentLimit>,
    /// Hits left; `u32::MAX` for unlimited.
    pub limit_remaining: u32,
    /// Set whenever `current_limit` is.
    pub duration_until_reset: Option<Duration>,
    /// Time until this descriptor's hits conform, from its reported limit (buckets; zero for
    /// windows). When OK: the shaping delay of a leaky bucket slot reserved ahead (a `/check`
    /// with `max_wait_ms`), else zero. When over the limit: the time until the same hits would
    /// fit, which for a cost above 1 can be later than `duration_until_reset` (one hit). Not
    /// part of the gRPC answer.
    pub wait: Duration,
    /// How far the reported limit's usage is past the limit (reported usage counted after the
    /// fact, `usage: report`): the debt a window algorithm (`fixed_window`, `sliding_window`,
    /// `sliding_log`) must let pass before a check passes again; 0 when within the limit, and
    /// for the buckets, whose debt `duration_until_reset` shows as time. `limit_remaining` is
    /// unsigned and stays 0 in debt. Not part of the gRPC answer.
    pub debt: u64,
}

impl DescriptorStatus {
    /// The status of a descriptor no limit applies to.
    pub fn no_limit() -> DescriptorStatus {
        DescriptorStatus {
            code: Code::Ok,
            current_limit: None,
            limit_remaining: 0,
            duration_until_reset: None,
            wait: Duration::ZERO,
            debt: 0,
        }
    }

    /// The status of a descriptor whose limit is `unlimited: true`.
    pub fn unlimited() -> DescriptorStatus {
        DescriptorStatus {
            limit_remaining: u32::MAX,
            ..DescriptorStatus::no_limit()
        }
    }
}

/// A limit of a descriptor with several (`rate_limits`) besides the one its status reports: every
/// request counts against all of them, so an edge that lists the applied limits lists these too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtherLimit {
    /// The descriptor's index in [`Response::statuses`].
    pub descriptor: usize,
    /// The limit's position in its descriptor's `rate_limits` list (0: the first).
    pub position: usize,
    /// The limit.
    pub limit: CurrentLimit,
    /// True when it is over (after its rule's shadow mode).
    pub over_limit: bool,
    /// Hits left (0 when over).
    pub remaining: u32,
    /// Time until it resets (windows) or one more hit fits (buckets).
    pub reset_after: Duration,
    /// When over, the time until the request's hits fit it; when admitted, its shaping delay.
    pub wait: Duration,
}

/// The answer to a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// Overall decision (after quota mode and global shadow mode).
    pub overall_code: Code,
    /// One status per request descriptor, in order.
    pub statuses: Vec<DescriptorStatus>,
    /// Headers for Envoy to add to the downstream response (`LIMIT_RESPONSE_HEADERS_ENABLED`).
    pub response_headers: Vec<(String, String)>,
    /// Dynamic metadata (`RESPONSE_DYNAMIC_METADATA`), a JSON object.
    pub dynamic_metadata: Option<serde_json::Map<String, serde_json::Value>>,
    /// The instant the decision was made at; every `duration_until_reset` counts from it, so an
    /// edge can turn them into reset instants ([`super::headers`]).
    pub decided_at: Timestamp,
    /// True when a concurrency limit applied to the request: it took, checked or gave back a slot
    /// under the request's holder id, which an edge then names in its answer.
    pub holds_slots: bool,
    /// The enforced limits of descriptors with several that their statuses do not report, in
    /// descriptor then list order (empty when every descriptor has one limit).
    pub other_limits: Vec<OtherLimit>,
    /// True when a descriptor reached its limit's soft-breach ratio (`soft.breach_ratio`,
    /// `SOFT_BREACH_RATIO`): the edges then add [`super::SOFT_BREACH_HEADER`].
    pub soft_breach: bool,
}
