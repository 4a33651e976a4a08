//! `GET /v1/history[?kind=&target=&limit=&cursor=]`: every recorded change and event, newest
//! first, paged like `/v1/violations` (`limit` 1 to 1000, default 100; `next_cursor` while more
//! follow). One rule's or override's history is `GET /v1/policies/{id}/history` and
//! `GET /v1/overrides/{id}/history`. Any token may read it. `GET /v1/config/history` is the
//! configuration's last loads (kept in memory): times, versions, hashes, file names and errors.

use std::collections::HashMap;

use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::Response;

use axum::extract::State;

use super::auth::{Admin, PolicyAdmin};
use super::{AdminState, invalid, json, unavailable};
use crate::policy::Policy;
use crate::policy::history::{HistoryEntry, HistoryQuery};
use crate::reload::LoadRecord;

/// Lists the whole history.
pub(crate) async fn list(
    PolicyAdmin { policy, .. }: PolicyAdmin,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    page(&policy, &q, None).await
}

/// One page of the history (of `target` when given), as `{"history": [...], "next_cursor"}`.
pub(crate) async fn page(
    policy: &Policy,
    params: &HashMap<String, String>,
    target: Option<String>,
) -> Response {
    let q = match HistoryQuery::parse(params, target) {
        Ok(q) => q,
        Err(errors) => return invalid(&errors),
    };
    let mut rows = match policy.history(&q).await {
        Ok(rows) => rows,
        Err(e) => return unavailable(e),
    };
    let next = q.next_cursor(&mut rows);
    let items: Vec<_> = rows.iter().map(HistoryEntry::to_json).collect();
    json(
        StatusCode::OK,
        &serde_json::json!({ "history": items, "next_cursor": next }),
    )
}

/// `GET /v1/config/history`: the last configuration loads, newest first, and the hash in service.
pub(crate) async fn config_loads(_: Admin, State(s): State<AdminState>) -> Response {
    let handle = s.reloading.handle();
    let loads: Vec<_> = handle.loads().iter().map(LoadRecord::to_json).collect();
    let current = handle.snapshot().map(|snap| snap.version);
    json(
        StatusCode::OK,
        &serde_json::json!({
            "current": { "version": current, "hash": handle.current_hash() },
            "max_kept": crate::reload::history::MAX_LOADS,
            "loads": loads,
        }),
    )
}
