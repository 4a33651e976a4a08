//! Which limit fired, in the dynamic metadata (`docs/design/contract.md#dynamic-metadata`): each
//! descriptor's entry also carries its status (`code`, `limitName`, `limitRemaining`,
//! `durationUntilReset`, named as in the JSON mapping of a status) and its `quotaGroup`, and
//! `overLimit` names the limit that denied the request. Envoy puts the struct under
//! `envoy.filters.http.ratelimit`, where an access log reads a path of keys
//! (`%DYNAMIC_METADATA(envoy.filters.http.ratelimit:overLimit:name)%`) but cannot index a list:
//! hence one object at the top, besides the per-descriptor list. Go's own keys stay as they are.

use std::time::Duration;

use serde_json::{Map, Value};

use super::outcome::Settled;
use super::plan::Plan;
use super::response::{Code, DescriptorStatus};

/// `d`'s proto3 JSON text (`"26s"`, `"0.5s"`), as `durationUntilReset` reads in `/json`.
pub fn duration_text(d: Duration) -> String {
    match d.subsec_nanos() {
        0 => format!("{}s", d.as_secs()),
        n => {
            let fraction = format!("{n:09}");
            format!("{}.{}s", d.as_secs(), fraction.trim_end_matches('0'))
        }
    }
}

/// Adds one descriptor's status to its metadata entry `m`.
pub(super) fn describe(m: &mut Map<String, Value>, r: &Settled<'_>, s: &DescriptorStatus) {
    m.insert("code".into(), Value::from(s.code.as_str()));
    if let Some(limit) = &s.current_limit {
        if !limit.name.is_empty() {
            m.insert("limitName".into(), Value::from(limit.name.clone()));
        }
        m.insert("limitRemaining".into(), Value::from(s.limit_remaining));
    }
    if let Some(reset) = s.duration_until_reset {
        m.insert(
            "durationUntilReset".into(),
            Value::from(duration_text(reset)),
        );
    }
    if let Plan::Limited(l) = r.plan
        && let Some(group) = &l.limit.quota_group
    {
        m.insert("quotaGroup".into(), Value::from(group.clone()));
    }
}

/// `overLimit`: the descriptor over its limit that decided — the first regular one, else the
/// first quota one (`is_quota`) — as its index in the request, the limit's `name` (when it has
/// one), its config `key` and `durationUntilReset`; `None` when no descriptor is over.
pub(super) fn over_limit(
    settled: &[Settled<'_>],
    statuses: &[DescriptorStatus],
    is_quota: impl Fn(&Settled<'_>) -> bool,
) -> Option<Value> {
    let over = || {
        settled
            .iter()
            .zip(statuses)
            .enumerate()
            .filter(|(_, (_, s))| s.code == Code::OverLimit)
    };
    let (index, (r, s)) = over()
        .find(|(_, (r, _))| !is_quota(r))
        .or_else(|| over().next())?;
    let mut m = Map::new();
    m.insert("descriptor".into(), Value::from(index));
    if let Some((limit, _, _)) = r.reported {
        if !limit.name.is_empty() {
            m.insert("name".into(), Value::from(limit.name.clone()));
        }
        m.insert("key".into(), Value::from(limit.full_key.clone()));
    }
    if let Some(reset) = s.duration_until_reset {
        m.insert(
            "durationUntilReset".into(),
            Value::from(duration_text(reset)),
        );
    }
    Some(Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_in_the_json_mapping() {
        assert_eq!(duration_text(Duration::from_secs(26)), "26s");
        assert_eq!(duration_text(Duration::from_millis(1_500)), "1.5s");
        assert_eq!(duration_text(Duration::from_nanos(7)), "0.000000007s");
    }
}
