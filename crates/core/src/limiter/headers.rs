//! The standard rate limit headers, built once from a [`Response`] and rendered by each edge
//! (`POST /check`, the HTTP 429 of `/json`, and gRPC's `response_headers_to_add` when
//! `LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED` is on): the de-facto `X-RateLimit-Limit`,
//! `X-RateLimit-Remaining` and `X-RateLimit-Reset` (Unix seconds), `Retry-After` on a denial,
//! and the IETF draft-10 `RateLimit-Policy` / `RateLimit` lists, one item per applied limit.
//!
//! Times are whole seconds rounded up, so no header ever tells a client to come back early; a
//! denial's `Retry-After` waits until the request's own hits fit (for a bucket and a cost above 1,
//! later than one hit's reset). An allowed request also carries its shaping [`delay`]. The
//!
//! [`delay`]: RateLimitHeaders::delay
//! Go service's own `LIMIT_RESPONSE_HEADERS_ENABLED` headers are built in `finish` and
//! are not touched here.

use std::time::Duration;

use super::response::{Code, CurrentLimit, Response};
use crate::algorithm::Window;

/// One limit that applied to the request: the limit each descriptor reported, and the other
/// limits of a descriptor with several (`rate_limits`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedLimit {
    /// The policy name: the limit's `name`, or `limit-<descriptor index>` for unnamed limits.
    pub name: String,
    /// Requests per window.
    pub quota: u32,
    /// The window (a concurrency limit's: its lease timeout).
    pub window: Window,
    /// True for a concurrency limit: `quota` slots held at once, no window.
    pub concurrency: bool,
    /// Hits left (0 when over).
    pub remaining: u32,
    /// Whole seconds until the limit resets, rounded up.
    pub reset_after: u64,
    /// Whole seconds, rounded up, until the request's hits would fit this limit: at least
    /// `reset_after`, and for buckets the time until all `cost` hits fit, not just one.
    pub retry_after: u64,
    /// When allowed, how long the caller must wait before proceeding (a leaky bucket slot reserved
    /// ahead for a `/check` with `max_wait_ms`); zero otherwise.
    pub delay: Duration,
    /// True when this limit denied the request.
    pub over_limit: bool,
    /// How far its usage is past the limit ([`super::DescriptorStatus::debt`]); 0 for the
    /// limits of a descriptor with several that its status does not report.
    pub debt: u64,
}

/// The standard headers of one response, as typed values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// Every applied limit, in descriptor order.
    pub limits: Vec<AppliedLimit>,
    /// Index in `limits` of the most constrained limit: when denied, the over-limit one that
    /// resets last; otherwise the one with the least remaining. `None` when no limit applied.
    pub reported: Option<usize>,
    /// Unix seconds (rounded up) at which the reported limit resets.
    pub reset_at: Option<u64>,
    /// Whole seconds (≥ 1) to wait before retrying; `Some` only when the request was denied.
    pub retry_after: Option<u64>,
    /// When allowed, the longest delay of the applied limits: the caller proceeds after it, in
    /// its reserved slot. Zero when no limit shaped, and when denied.
    pub delay: Duration,
    /// A descriptor reached its soft-breach ratio ([`Response::soft_breach`]): [`Self::pairs`]
    /// then adds [`super::SOFT_BREACH_HEADER`].
    pub soft_breach: bool,
}

/// One applied limit: `l` named `name`, with `remaining` hits, resetting after `reset`; `wait`
/// is its shaping delay when admitted, or the time until the hits fit when `over_limit`.
fn applied(
    name: String,
    l: &CurrentLimit,
    remaining: u32,
    over_limit: bool,
    reset: Duration,
    wait: Duration,
) -> AppliedLimit {
    AppliedLimit {
        name,
        quota: l.requests_per_unit,
        window: l.window,
        concurrency: l.concurrency,
        remaining,
        reset_after: ceil_secs(reset),
        retry_after: ceil_secs(reset.max(wait)),
        delay: if over_limit { Duration::ZERO } else { wait },
        over_limit,
        debt: 0,
    }
}

/// Whole seconds in `d`, rounded up.
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl RateLimitHeaders {
    /// The headers of `r`, reset instants counted from the moment it was decided.
    pub fn from_response(r: &Response) -> RateLimitHeaders {
        let mut limits: Vec<AppliedLimit> = Vec::with_capacity(r.statuses.len());
        for (i, s) in r.statuses.iter().enumerate() {
            if let Some(l) = s.current_limit.as_ref() {
                let reset = s.duration_until_reset.unwrap_or(Duration::ZERO);
                let over_limit = s.code == Code::OverLimit;
                let name = if l.name.is_empty() {
                    format!("limit-{i}")
                } else {
                    l.name.clone()
                };
                let mut limit = applied(name, l, s.limit_remaining, over_limit, reset, s.wait);
                limit.debt = s.debt;
                limits.push(limit);
            }
            // The other limits of a descriptor with several follow the one its status reports.
            for o in r.other_limits.iter().filter(|o| o.descriptor == i) {
                let name = if o.limit.name.is_empty() {
                    format!("limit-{i}.{}", o.position)
                } else {
                    o.limit.name.clone()
                };
                let (remaining, over) = (o.remaining, o.over_limit);
                limits.push(applied(
                    name,
                    &o.limit,
                    remaining,
                    over,
                    o.reset_after,
                    o.wait,
                ));
            }
        }
        let denied = r.overall_code == Code::OverLimit;
        // Denied: the over-limit limit whose hits fit last, so waiting for it is never too early.
        let reported = if denied && limits.iter().any(|l| l.over_limit) {
            (0..limits.len())
                .filter(|&i| limits[i].over_limit)
                .max_by_key(|&i| (limits[i].retry_after, std::cmp::Reverse(i)))
        } else {
            (0..limits.len()).min_by_key(|&i| (limits[i].remaining, i))
        };
        let now = r.decided_at;
        let reset_at = reported.map(|i| {
            let at = now.saturating_add(Duration::from_secs(limits[i].reset_after));
            at.as_secs() + u64::from(!at.as_micros().is_multiple_of(1_000_000))
        });
        let retry_after = denied.then(|| reported.map_or(1, |i| limits[i].retry_after.max(1)));
        let delay = if denied {
            Duration::ZERO
        } else {
            limits.iter().map(|l| l.delay).max().unwrap_or_default()
        };
        RateLimitHeaders {
            limits,
            reported,
            reset_at,
            retry_after,
            delay,
            soft_breach: r.soft_breach,
        }
    }

    /// The reported limit.
    pub fn reported(&self) -> Option<&AppliedLimit> {
        self.reported.and_then(|i| self.limits.get(i))
    }

    /// Every header, name and value, in a fixed order: [`Self::de_facto`] then
    /// [`Self::standard`], then the soft-breach signal when raised. Empty when no limit applied
    /// and the request was allowed.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut out = self.de_facto();
        out.extend(self.standard());
        if self.soft_breach {
            out.push((super::SOFT_BREACH_HEADER, "true".into()));
        }
        out
    }

    /// `X-RateLimit-Limit`, `-Remaining` and `-Reset` of the reported limit.
    pub fn de_facto(&self) -> Vec<(&'static str, String)> {
        match (self.reported(), self.reset_at) {
            (Some(l), Some(reset_at)) => vec![
                ("X-RateLimit-Limit", l.quota.to_string()),
                ("X-RateLimit-Remaining", l.remaining.to_string()),
                ("X-RateLimit-Reset", reset_at.to_string()),
            ],
            _ => Vec::new(),
        }
    }

    /// `Retry-After` (when denied) and the draft-10 `RateLimit-Policy` and `RateLimit`: what
    /// gRPC answers add when `LIMIT_RESPONSE_STANDARD_HEADERS_ENABLED` is on (the Go headers
    /// already cover the de-facto trio there).
    pub fn standard(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::with_capacity(3);
        if let Some(secs) = self.retry_after {
            out.push(("Retry-After", secs.to_string()));
        }
        if !self.limits.is_empty() {
            out.push(("RateLimit-Policy", self.policy()));
            out.push(("RateLimit", self.state()));
        }
        out
    }

    /// `RateLimit-Policy`: `"name";q=100;w=60` per applied limit. A concurrency limit has no
    /// window (its lease timeout is not one): `"name";q=10;qu="concurrent-requests"`, the draft's
    /// quota unit for requests in flight, and no `w`.
    fn policy(&self) -> String {
        self.items(|l| {
            if l.concurrency {
                format!("q={};qu=\"concurrent-requests\"", l.quota)
            } else {
                format!("q={};w={}", l.quota, l.window.secs())
            }
        })
    }

    /// `RateLimit`: `"name";r=47;t=13` per applied limit.
    fn state(&self) -> String {
        self.items(|l| format!("r={};t={}", l.remaining, l.reset_after))
    }

    fn items(&self, params: impl Fn(&AppliedLimit) -> String) -> String {
        let items: Vec<String> = self
            .limits
            .iter()
            .map(|l| format!("{};{}", sf_string(&l.name), params(l)))
            .collect();
        items.join(", ")
    }
}

/// A structured-field string (RFC 8941 §3.3.3): quoted, `"` and `\` escaped, and characters
/// outside printable ASCII (which the format cannot carry) replaced by `?`.
fn sf_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests;
