//! One `rate_limit` entry checked and built into a [`Limit`]: units, `replaces`, `failure_mode`
//! and the extensions. Both the single-limit path (`validate`) and `rate_limits` (`multi`) build
//! their limits here, so neither has to reach into the other.

use super::compiled::{FailureMode, Limit};
use super::error::{Sink, field_path};
use super::model::{RawDescriptor, RawRateLimit};
use super::unit::Unit;

/// Checks one `rate_limit` and builds its limit (errors go to the sink; the limit is then unused).
pub(super) fn build_limit(
    rl: &RawRateLimit,
    d: &RawDescriptor,
    full_key: &str,
    sink: &mut Sink<'_>,
) -> Limit {
    check_requests_per_unit(rl, sink);
    let unit = check_unit(rl, sink);
    check_replaces(rl, sink);
    let failure_mode = check_failure_mode(rl, sink);
    let local_share = check_local_share(rl, sink);
    let when = rl.when.as_deref().and_then(|source| {
        let at = field_path(&rl.path, "when");
        super::predicate::check(source, &at, failure_mode, sink)
    });
    let ext = super::extensions::check(rl, unit, sink);
    let calendar = super::calendar::check(rl, unit, ext.algorithm, sink);
    let unlimited = rl.unlimited.unwrap_or(false);
    let shedding = super::shedding::build(&rl.shedding, &rl.path, ext.algorithm, unlimited, sink);
    Limit {
        algorithm: ext.algorithm,
        burst: ext.burst,
        unit_multiplier: ext.unit_multiplier,
        lease: ext.lease,
        split: ext.split,
        usage_report: ext.usage_report,
        usage_estimate: ext.usage_estimate,
        calendar,
        failure_mode,
        local_share,
        regions: rl.regions.clone().map(std::sync::Arc::new),
        full_key: full_key.to_owned(),
        stats_key: super::sanitize(full_key.into()).into_owned(),
        name: rl.name.clone(),
        requests_per_unit: rl.requests_per_unit,
        unit,
        unlimited,
        replaces: rl.replaces.iter().map(|(_, n)| n.clone()).collect(),
        shadow_mode: d.shadow_mode,
        quota_mode: d.quota_mode,
        quota_group: d.quota_group.clone(),
        detailed_metric: d.detailed_metric,
        metadata: d.metadata.clone(),
        also: Vec::new(),
        when: when.map(std::sync::Arc::new),
        file: sink.file().into(),
        shedding: shedding.map(std::sync::Arc::new),
    }
}

/// Warns about a limit whose `requests_per_unit` is missing: it is 0, so it refuses every request.
fn check_requests_per_unit(rl: &RawRateLimit, sink: &mut Sink<'_>) {
    if !rl.requests_per_unit_given && rl.unlimited == Some(false) {
        sink.warn(
            &field_path(&rl.path, "requests_per_unit"),
            "requests_per_unit is missing, so the limit is 0 and every request is over it; write `requests_per_unit: 0` if that is meant",
        );
    }
}

/// The limit's `unit`: none when unlimited (a unit there is an error) or invalid (reported).
fn check_unit(rl: &RawRateLimit, sink: &mut Sink<'_>) -> Option<Unit> {
    let unit_path = field_path(&rl.path, "unit");
    // A wrongly typed `unit` or `unlimited` was reported already; checking the unit again would
    // only add a confusing second error.
    match (&rl.unit, rl.unlimited) {
        (Some(text), Some(true)) => {
            if Unit::parse(text).is_some() {
                sink.push(
                    &unit_path,
                    "should not specify rate limit unit when unlimited",
                );
            }
            None
        }
        (Some(text), Some(false)) => {
            let unit = Unit::parse(text);
            if unit.is_none() {
                let hint = if text.is_empty() {
                    format!("the unit is missing; {}", Unit::EXPECTED)
                } else {
                    Unit::EXPECTED.to_string()
                };
                sink.push_hinted(
                    &unit_path,
                    format!("invalid rate limit unit '{text}'"),
                    Some(hint),
                );
            }
            unit
        }
        _ => None,
    }
}

/// Reports empty `replaces` entries and one naming the limit's own descriptor.
fn check_replaces(rl: &RawRateLimit, sink: &mut Sink<'_>) {
    for (path, name) in &rl.replaces {
        if name.is_empty() {
            sink.push(path, "should not have an empty replaces entry");
        } else if *name == rl.name {
            sink.push(
                &field_path(path, "name"),
                "replaces should not contain name of same descriptor",
            );
        }
    }
}

/// The limit's `failure_mode`, an invalid one reported and read as `error`.
fn check_failure_mode(rl: &RawRateLimit, sink: &mut Sink<'_>) -> Option<FailureMode> {
    rl.failure_mode.as_deref().map(|text| {
        FailureMode::parse(text).unwrap_or_else(|| {
            sink.push(
                &field_path(&rl.path, "failure_mode"),
                format!("invalid failure_mode '{text}' ({})", FailureMode::EXPECTED),
            );
            FailureMode::Error
        })
    })
}

/// The limit's `local_share`, one outside (0, 1] reported and dropped.
fn check_local_share(rl: &RawRateLimit, sink: &mut Sink<'_>) -> Option<f64> {
    rl.local_share.filter(|share| {
        let ok = *share > 0.0 && *share <= 1.0;
        if !ok {
            sink.push(
                &field_path(&rl.path, "local_share"),
                format!("invalid local_share {share} (expected a number above 0, at most 1)"),
            );
        }
        ok
    })
}
