//! The policy history: one immutable row per change of a rule or an override — its kind, its
//! target (`policy:<id>`, `override:<id>`), the target's version after it (1, 2, … per target),
//! who made it (the admin token's name), when, why (the request's optional `reason`) and the
//! target's JSON before and after — written in the same transaction as the change itself, so
//! neither exists without the other. Other parts of the service record their own events in the
//! same table through [`record_event`] (a kind such as `counters.reset` and a target of their
//! choosing). Rows are never updated or deleted; `GET /v1/history` pages through them newest first.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::model::{FieldError, StoredOverride};
use super::rules::Rule;
use super::store::{PolicyStore, StoreError};
use super::violations::cursor::{page_params, unknown_params};
use ratelimitd_core::clock::Timestamp;

/// Longest `reason` accepted on a change, in bytes (as an override's own `reason`).
pub(crate) const MAX_REASON: usize = 1024;
/// Longest kind or target of a recorded event, in bytes.
pub(crate) const MAX_NAME: usize = 256;

/// Kinds of the policy database's own changes.
pub(crate) mod kind {
    /// A rule that did not exist was written.
    pub(crate) const POLICY_CREATE: &str = "policy.create";
    /// An existing rule was replaced.
    pub(crate) const POLICY_UPDATE: &str = "policy.update";
    /// A rule was deleted.
    pub(crate) const POLICY_DELETE: &str = "policy.delete";
    /// A rule was put back as it was at an earlier version (re-created when it had been deleted).
    pub(crate) const POLICY_ROLLBACK: &str = "policy.rollback";
    /// An override was created.
    pub(crate) const OVERRIDE_CREATE: &str = "override.create";
    /// An override was deleted through the API (the expiry purge records nothing).
    pub(crate) const OVERRIDE_DELETE: &str = "override.delete";
}

/// Who asks for a change and why: the token's name and the request's `reason`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Audit {
    /// The admin token's name.
    pub who: String,
    /// Why (may be empty).
    pub reason: String,
    /// Set on a rollback: the version put back (the row's kind is then `policy.rollback`).
    pub rollback_of: Option<u64>,
}

impl Audit {
    /// A change by `who` for `reason`.
    pub(crate) fn new(who: &str, reason: &str) -> Audit {
        Audit {
            who: who.to_string(),
            reason: reason.to_string(),
            rollback_of: None,
        }
    }
}

/// One event about to be recorded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Event {
    /// What happened, `<family>.<action>` (`policy.update`, `counters.reset`, …).
    pub kind: String,
    /// What it happened to (`policy:<id>`, `override:<id>`, or the recorder's own naming).
    pub target: String,
    /// Who did it (a token's name, or the part of the service that did).
    pub actor: String,
    /// Why (may be empty).
    pub reason: String,
    /// The target before (`None`: it did not exist, or the event has no state).
    pub before: Option<Value>,
    /// The target after (`None`: it no longer exists, or the event has no state).
    pub after: Option<Value>,
}

/// One recorded row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HistoryEntry {
    /// Position among all rows (increases by one per row).
    pub seq: u64,
    /// The target's version after this event (1 for its first).
    pub version: u64,
    /// When (the service clock).
    pub at: Timestamp,
    /// What was recorded.
    pub event: Event,
}

impl HistoryEntry {
    /// Its JSON form in API answers.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "seq": self.seq,
            "version": self.version,
            "kind": self.event.kind,
            "target": self.event.target,
            "actor": self.event.actor,
            "at": self.at.to_rfc3339(),
            "reason": self.event.reason,
            "before": self.event.before,
            "after": self.event.after,
        })
    }
}

/// The target name of rule `id`.
pub(crate) fn policy_target(id: &str) -> String {
    format!("policy:{id}")
}

/// The target name of override `id`.
pub(crate) fn override_target(id: &str) -> String {
    format!("override:{id}")
}

/// An override's JSON in the history: its stored fields (not whether it is active now).
pub(crate) fn override_json(o: &StoredOverride) -> Value {
    let mut v = o.to_json(Timestamp::from_micros(0));
    if let Value::Object(m) = &mut v {
        m.remove("active");
    }
    v
}

/// The row of a rule change: `before` and `after` the rule (either may be missing).
pub(crate) fn rule_event(before: Option<&Rule>, after: Option<&Rule>, audit: &Audit) -> Event {
    let id = after.or(before).map_or("", |r| r.id.as_str());
    let kind = match (audit.rollback_of, before, after) {
        (Some(_), _, _) => kind::POLICY_ROLLBACK,
        (None, _, None) => kind::POLICY_DELETE,
        (None, None, Some(_)) => kind::POLICY_CREATE,
        (None, Some(_), Some(_)) => kind::POLICY_UPDATE,
    };
    let reason = match (audit.rollback_of, audit.reason.is_empty()) {
        (Some(v), true) => format!("rollback to version {v}"),
        _ => audit.reason.clone(),
    };
    Event {
        kind: kind.to_string(),
        target: policy_target(id),
        actor: audit.who.clone(),
        reason,
        before: before.map(Rule::to_json),
        after: after.map(Rule::to_json),
    }
}

/// The row of an override change.
pub(crate) fn override_event(
    before: Option<&StoredOverride>,
    after: Option<&StoredOverride>,
    audit: &Audit,
) -> Event {
    let id = after.or(before).map_or("", |o| o.id.as_str());
    Event {
        kind: if after.is_some() {
            kind::OVERRIDE_CREATE
        } else {
            kind::OVERRIDE_DELETE
        }
        .to_string(),
        target: override_target(id),
        actor: audit.who.clone(),
        reason: audit.reason.clone(),
        before: before.map(override_json),
        after: after.map(override_json),
    }
}

/// Why an event could not be recorded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RecordError {
    /// The kind, target or actor is empty or too long, or the reason too long.
    #[error("{0}")]
    Invalid(String),
    /// The database failed or is not open.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Records one event that is not a change of the policy database itself (a counter reset, …)
/// in the history, at `now`, and returns its row. `kind` is `<family>.<action>`, `target` names
/// what it happened to (its versions count from 1), `actor` who did it.
pub(crate) async fn record_event(
    store: &dyn PolicyStore,
    event: Event,
    now: Timestamp,
) -> Result<HistoryEntry, RecordError> {
    for (field, text) in [
        ("kind", &event.kind),
        ("target", &event.target),
        ("actor", &event.actor),
    ] {
        if text.is_empty() || text.len() > MAX_NAME {
            let why = format!("event {field}: expected 1 to {MAX_NAME} bytes");
            return Err(RecordError::Invalid(why));
        }
    }
    if event.reason.len() > MAX_REASON {
        let why = format!("event reason: at most {MAX_REASON} bytes");
        return Err(RecordError::Invalid(why));
    }
    Ok(store.record(&event, now).await?)
}

/// One page of `GET /v1/history` or of one target's history: newest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct HistoryQuery {
    /// Only this target's rows.
    pub target: Option<String>,
    /// Only rows of this kind.
    pub kind: Option<String>,
    /// Rows per page (1 to 1000).
    pub limit: u32,
    /// Only rows before this `seq` (the previous page's `next_cursor`).
    pub before_seq: Option<u64>,
}

const KNOWN: [&str; 4] = ["limit", "cursor", "kind", "target"];

impl HistoryQuery {
    /// Reads the query string (`limit`, `cursor`, `kind`, and `target` unless `target` is
    /// given: the history of one policy); every unknown or invalid parameter is an error.
    pub(crate) fn parse(
        params: &HashMap<String, String>,
        target: Option<String>,
    ) -> Result<HistoryQuery, Vec<FieldError>> {
        let known: &[&str] = if target.is_some() {
            &KNOWN[..3]
        } else {
            &KNOWN
        };
        let mut errors = Vec::new();
        unknown_params(params, known, &mut errors);
        let mut paging = params.clone();
        paging.remove("cursor");
        let (limit, _) = page_params(&paging, &mut errors);
        let before_seq = match params.get("cursor").filter(|c| !c.is_empty()) {
            None => None,
            Some(c) => match c.parse::<u64>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    let msg = "not a cursor returned as next_cursor by this endpoint";
                    errors.push(FieldError::new("cursor", msg));
                    None
                }
            },
        };
        for field in ["kind", "target"] {
            if params.get(field).is_some_and(|v| v.len() > MAX_NAME) {
                errors.push(FieldError::new(field, format!("at most {MAX_NAME} bytes")));
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let given = |k: &str| params.get(k).filter(|v| !v.is_empty()).cloned();
        Ok(HistoryQuery {
            target: target.or_else(|| given("target")),
            kind: given("kind"),
            limit,
            before_seq,
        })
    }

    /// The cursor of the page after `rows` (read with one row more than a page), and `rows`
    /// cut to the page.
    pub(crate) fn next_cursor(&self, rows: &mut Vec<HistoryEntry>) -> Option<String> {
        let more = rows.len() > self.limit as usize;
        rows.truncate(self.limit as usize);
        rows.last().filter(|_| more).map(|r| r.seq.to_string())
    }
}

/// The optional `reason` of a change request: a string of at most [`MAX_REASON`] bytes.
pub(crate) fn reason_field(v: Option<&Value>, errors: &mut Vec<FieldError>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) if s.len() <= MAX_REASON => s.clone(),
        Some(Value::String(s)) => {
            let msg = format!("is {} bytes; at most {MAX_REASON} are accepted", s.len());
            errors.push(FieldError::new("reason", msg));
            String::new()
        }
        Some(_) => {
            errors.push(FieldError::new("reason", "expected a string"));
            String::new()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)], target: Option<&str>) -> Result<HistoryQuery, Vec<String>> {
        let map = (pairs.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        HistoryQuery::parse(&map, target.map(str::to_string))
            .map_err(|e| e.into_iter().map(|e| e.field).collect())
    }

    #[test]
    fn paging_parameters_are_checked_and_bounded() {
        let q = parse(&[], None).unwrap();
        assert_eq!((q.limit, q.before_seq, q.target), (100, None, None));
        let q = parse(&[("cursor", "12"), ("target", "policy:a")], None).unwrap();
        assert_eq!(
            (q.before_seq, q.target.as_deref()),
            (Some(12), Some("policy:a"))
        );
        assert_eq!(
            parse(&[("limit", "1001"), ("cursor", "x"), ("sort", "1")], None).unwrap_err(),
            ["sort", "limit", "cursor"]
        );
        // One policy's history takes its target from the path.
        assert_eq!(
            parse(&[("target", "policy:b")], Some("policy:a")).unwrap_err(),
            ["target"]
        );
    }

    #[test]
    fn a_rule_change_is_named_after_what_it_did() {
        let r = crate::policy::rules::parse_rule(
            "r1",
            br#"{"domain":"api","descriptor":[{"key":"k"}],"rate_limit":{"unit":"second","requests_per_unit":1}}"#,
        )
        .unwrap();
        let a = Audit::new("alice", "");
        assert_eq!(rule_event(None, Some(&r), &a).kind, kind::POLICY_CREATE);
        assert_eq!(rule_event(Some(&r), Some(&r), &a).kind, kind::POLICY_UPDATE);
        let gone = rule_event(Some(&r), None, &a);
        assert_eq!(
            (gone.kind.as_str(), gone.target.as_str()),
            (kind::POLICY_DELETE, "policy:r1")
        );
        let back = Audit {
            rollback_of: Some(3),
            ..a
        };
        let e = rule_event(None, Some(&r), &back);
        assert_eq!(
            (e.kind.as_str(), e.reason.as_str()),
            (kind::POLICY_ROLLBACK, "rollback to version 3")
        );
    }

    #[tokio::test]
    async fn other_parts_record_their_events_with_versions_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::policy::sqlite::SqliteStore::open(dir.path())
            .await
            .unwrap();
        let reset = |target: &str| Event {
            kind: "counters.reset".into(),
            target: target.into(),
            actor: "alice".into(),
            reason: "customer called".into(),
            before: None,
            after: Some(json!({"keys": 3})),
        };
        let t = Timestamp::from_secs(50);
        let first = record_event(&store, reset("counters:api"), t)
            .await
            .unwrap();
        let second = record_event(&store, reset("counters:api"), t)
            .await
            .unwrap();
        let other = record_event(&store, reset("counters:web"), t)
            .await
            .unwrap();
        assert_eq!((first.seq, first.version), (1, 1));
        assert_eq!((second.seq, second.version), (2, 2));
        assert_eq!((other.seq, other.version), (3, 1));
        assert_eq!(other.event, reset("counters:web"));
        let q = HistoryQuery {
            kind: Some("counters.reset".into()),
            limit: 10,
            ..HistoryQuery::default()
        };
        let rows = store.history(&q).await.unwrap();
        assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [3, 2, 1]);
        assert_eq!(rows[2].at, t);
        let nameless = Event {
            kind: String::new(),
            ..reset("x")
        };
        let err = record_event(&store, nameless, t).await.unwrap_err();
        assert!(err.to_string().contains("event kind"), "{err}");
        assert_eq!(
            store.history(&q).await.unwrap().len(),
            3,
            "nothing recorded"
        );
    }
}
