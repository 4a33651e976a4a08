//! Last step of a decision: statuses from the settled descriptors, the overall code (quota mode,
//! global shadow mode), response headers and dynamic metadata
//! (`docs/design/contract.md#descriptor-status` to `docs/design/contract.md#dynamic-metadata`).

use std::time::Duration;

use serde_json::{Map, Value};

use super::LimiterOptions;
use super::outcome::{Settled, Source, Verdict};
use super::plan::Plan;
use super::quota::Role;
use super::request::Request;
use super::response::{Code, CurrentLimit, DescriptorStatus, OtherLimit, Response};
use super::signals;
use crate::algorithm::Algorithm;
use crate::clock::Timestamp;
use crate::config::Limit;

/// Builds the response from the settled descriptors. The flag tells whether global shadow mode
/// turned `OVER_LIMIT` into OK (the `global_shadow_mode` stat).
pub(crate) fn respond(
    options: &LimiterOptions,
    req: &Request,
    settled: &[Settled<'_>],
    now: Timestamp,
) -> (Response, bool) {
    let statuses: Vec<DescriptorStatus> = settled.iter().map(status).collect();
    let mut overall_code = overall(options, settled, &statuses);
    let global_shadow = overall_code == Code::OverLimit && options.shadow_mode;
    if global_shadow {
        overall_code = Code::Ok;
    }
    let soft_breach = settled.iter().any(|s| signals::soft_breach(options, s));
    let mut response_headers = options
        .headers
        .as_ref()
        .map(|names| headers(names, options, settled, &statuses))
        .unwrap_or_default();
    if soft_breach && options.headers.is_some() {
        response_headers.push((signals::SOFT_BREACH_HEADER.into(), "true".into()));
    }
    let dynamic_metadata = options.dynamic_metadata.then(|| {
        let mut m = metadata(options, req, settled, &statuses);
        if soft_breach {
            m.insert("softBreach".into(), Value::Bool(true));
        }
        m
    });
    let response = Response {
        overall_code,
        statuses,
        response_headers,
        dynamic_metadata,
        decided_at: now,
        holds_slots: settled.iter().any(|s| match s.plan {
            Plan::Limited(l) => l.limit.all().any(|l| l.algorithm == Algorithm::Concurrency),
            _ => false,
        }),
        soft_breach,
        other_limits: other_limits(settled),
    };
    (response, global_shadow)
}

/// The enforced limits of each descriptor with several (`rate_limits`) besides its reported one.
fn other_limits(settled: &[Settled<'_>]) -> Vec<OtherLimit> {
    let mut out = Vec::new();
    for (descriptor, s) in settled.iter().enumerate() {
        let (Plan::Limited(l), Some((reported, _, _))) = (s.plan, s.reported) else {
            continue;
        };
        if l.limit.also.is_empty() {
            continue;
        }
        for (position, (o, limit)) in s.outcomes.iter().zip(l.limit.all()).enumerate() {
            let (Some(v), Some(unit), Some(window)) = (o.verdict, limit.unit, limit.window())
            else {
                continue;
            };
            if std::sync::Arc::ptr_eq(limit, reported) {
                continue;
            }
            let over_limit = v.over_limit && !limit.shadow_mode;
            out.push(OtherLimit {
                descriptor,
                position,
                limit: CurrentLimit {
                    name: limit.name.clone(),
                    requests_per_unit: limit.requests_per_unit,
                    unit,
                    window,
                    concurrency: limit.algorithm == Algorithm::Concurrency,
                },
                over_limit,
                remaining: if v.over_limit {
                    0
                } else {
                    u32::try_from(v.remaining).unwrap_or(u32::MAX)
                },
                reset_after: v.reset_after,
                wait: if v.over_limit && !over_limit {
                    Duration::ZERO
                } else {
                    v.wait
                },
            });
        }
    }
    out
}

fn status(s: &Settled<'_>) -> DescriptorStatus {
    let (limit, d) = match (s.plan, s.reported) {
        (Plan::Unlimited, _) => return DescriptorStatus::unlimited(),
        (Plan::Limited(_), Some((limit, _, verdict))) => (limit, verdict),
        _ => return DescriptorStatus::no_limit(),
    };
    let (Some(unit), Some(window)) = (limit.unit, limit.window()) else {
        return DescriptorStatus::unlimited();
    };
    // A shadow rule reports OK but keeps the remaining count at 0
    // (`docs/design/contract.md#shadow-mode`).
    let code = if d.over_limit && !limit.shadow_mode {
        Code::OverLimit
    } else {
        Code::Ok
    };
    DescriptorStatus {
        code,
        current_limit: Some(CurrentLimit {
            name: limit.name.clone(),
            requests_per_unit: limit.requests_per_unit,
            unit,
            window,
            concurrency: limit.algorithm == Algorithm::Concurrency,
        }),
        limit_remaining: if d.over_limit {
            0
        } else {
            u32::try_from(d.remaining).unwrap_or(u32::MAX)
        },
        duration_until_reset: Some(d.reset_after),
        // A shadow rule's denial wait is no delay: its hits were not admitted.
        wait: if d.over_limit && code == Code::Ok {
            Duration::ZERO
        } else {
            s.wait
        },
        debt: debt(limit, d),
    }
}

/// How far past `limit` the usage `v` read is, for the window algorithms (whose usage is a count
/// of hits); 0 for the buckets. A refused step's `after` counts its own hits as if taken, so its
/// usage is `before`, as explain reads it.
pub(crate) fn debt(limit: &Limit, v: &Verdict) -> u64 {
    let windows = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ];
    match v.usage {
        Some((before, after)) if windows.contains(&limit.algorithm) => {
            let used = if v.over_limit { before } else { after };
            used.saturating_sub(u64::from(limit.requests_per_unit))
        }
        _ => 0,
    }
}

fn is_quota(options: &LimiterOptions, s: &Settled<'_>) -> bool {
    options.quota_mode || matches!(s.plan, Plan::Limited(l) if l.limit.quota_mode)
}

/// The overall code of the statuses (`super::quota`: regular descriptors, quota groups).
fn overall(
    options: &LimiterOptions,
    settled: &[Settled<'_>],
    statuses: &[DescriptorStatus],
) -> Code {
    let roles = settled.iter().zip(statuses).map(|(r, s)| {
        let role = match r.plan {
            Plan::Unlimited => Role::Skipped,
            _ if !is_quota(options, r) => Role::Regular,
            Plan::Limited(l) => Role::Quota(l.limit.quota_group.as_deref()),
            Plan::NoLimit => Role::Quota(None),
        };
        (role, s.code == Code::OverLimit)
    });
    super::quota::overall(roles)
}

/// The limit/remaining/reset headers of the most constrained descriptor
/// (`docs/design/contract.md#headers`).
fn headers(
    names: &super::HeaderNames,
    options: &LimiterOptions,
    settled: &[Settled<'_>],
    statuses: &[DescriptorStatus],
) -> Vec<(String, String)> {
    let mut chosen: Option<&DescriptorStatus> = None;
    let mut min = u32::MAX;
    for (r, s) in settled.iter().zip(statuses) {
        if s.current_limit.is_none() {
            continue;
        }
        let regular_over = s.code == Code::OverLimit && !is_quota(options, r);
        if regular_over || s.limit_remaining < min {
            chosen = Some(s);
            min = s.limit_remaining;
        }
    }
    let Some(s) = chosen else { return Vec::new() };
    let (Some(limit), Some(reset)) = (&s.current_limit, s.duration_until_reset) else {
        return Vec::new();
    };
    vec![
        (names.limit.clone(), limit.requests_per_unit.to_string()),
        (names.remaining.clone(), s.limit_remaining.to_string()),
        (names.reset.clone(), reset.as_secs().to_string()),
    ]
}

/// Dynamic metadata (`docs/design/contract.md#dynamic-metadata`): the request's domain and
/// descriptors with their statuses, the merged config `metadata` of the descriptors that passed,
/// and the limit that fired (`super::fired`).
fn metadata(
    options: &LimiterOptions,
    req: &Request,
    settled: &[Settled<'_>],
    statuses: &[DescriptorStatus],
) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("domain".into(), Value::from(req.domain.clone()));
    let descriptors = req
        .descriptors
        .iter()
        .zip(settled.iter().zip(statuses))
        .map(|(d, (r, s))| {
            let mut m = Map::new();
            let entries = d
                .entries
                .iter()
                .map(|e| Value::from(format!("{}={}", e.key, e.value)));
            m.insert("entries".into(), Value::Array(entries.collect()));
            if let Some(o) = &d.limit {
                let unit = o.unit.map_or("UNKNOWN", |u| u.as_str());
                let text = format!("requests_per_unit:{} unit:{}", o.requests_per_unit, unit);
                m.insert("limit".into(), Value::from(text));
            }
            if let Some(h) = d.hits_addend {
                m.insert("hitsAddend".into(), Value::from(h));
            }
            super::fired::describe(&mut m, r, s);
            Value::Object(m)
        })
        .collect();
    out.insert("descriptors".into(), Value::Array(descriptors));
    if req.hits_addend != 0 {
        out.insert("hitsAddend".into(), Value::from(req.hits_addend));
    }
    let mut merged = Map::new();
    for (r, s) in settled.iter().zip(statuses) {
        if let Plan::Limited(l) = r.plan
            && s.code != Code::OverLimit
            && let Some(md) = &l.limit.metadata
        {
            merge_first_wins(&mut merged, md);
        }
    }
    if !merged.is_empty() {
        out.insert("metadata".into(), Value::Object(merged));
    }
    if let Some(over) = super::fired::over_limit(settled, statuses, |r| is_quota(options, r)) {
        out.insert("overLimit".into(), over);
    }
    // When the store did not decide, say what did (the local fallback, or the failure policy).
    let degraded = settled
        .iter()
        .filter_map(|s| s.reported.map(|(_, source, _)| source))
        .find(|s| !matches!(s, Source::Store | Source::LocalCache));
    if let Some(source) = degraded {
        out.insert("decisionSource".into(), Value::from(source.as_str()));
    }
    out
}

/// Adds `from` into `into`: existing keys win, except that two objects are merged recursively.
fn merge_first_wins(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (None, _) => {
                into.insert(k.clone(), v.clone());
            }
            (Some(Value::Object(a)), Value::Object(b)) => merge_first_wins(a, b),
            _ => {}
        }
    }
}
