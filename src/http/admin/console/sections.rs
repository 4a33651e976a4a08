//! The console's detail sections below the banner and the charts: configuration, limits, active
//! overrides, hot keys, violations, breakers. Everything that is not a literal of this file goes
//! through [`escape`]; long lists are cut (with a count of what was left out) so a large
//! configuration or an override flood cannot make the page unbounded.

use std::fmt::Write;

use super::html::{ago, entries, escape, span, table};
use super::{ROWS, Violations};
use crate::http::rate_text::rate;
use crate::insight::Insight;
use crate::insight::hotkeys::By;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::resilience::BreakerState;

/// Most limits and overrides listed.
const MAX_ROWS: usize = 500;

pub(super) fn config_status(out: &mut String, i: &Insight, now: Timestamp) {
    out.push_str("<h2 id=\"config\">Configuration</h2>\n<ul>");
    match i.config.snapshot() {
        Some(s) => {
            let _ = write!(
                out,
                "<li>version {} loaded {}</li><li>{} domain(s)</li>",
                s.version,
                ago(now, s.loaded_at),
                s.config.domain_count()
            );
        }
        None => out.push_str("<li class=\"bad\">no configuration loaded</li>"),
    }
    let _ = writeln!(
        out,
        "<li>loads: {} succeeded, {} failed</li></ul>",
        i.config.load_successes(),
        i.config.load_failures()
    );
    if let Some(f) = i.config.last_failure() {
        let _ = writeln!(
            out,
            "<p class=\"bad\">The last load failed {}; the configuration above stays in service:</p><pre>{}</pre>",
            ago(now, f.at),
            escape(&f.errors)
        );
    }
    load_history(out, i, now);
}

/// The last loads: when, the version or the failure, the hash, how many files, the first error.
fn load_history(out: &mut String, i: &Insight, now: Timestamp) {
    if let Some(h) = i.config.current_hash() {
        let _ = writeln!(
            out,
            "<p id=\"config-hash\">In service: <code>{}</code></p>",
            escape(&h)
        );
    }
    let rows: Vec<Vec<String>> = (i.config.loads().iter())
        .map(|r| {
            let outcome = match r.version {
                Some(v) => format!("version {v}"),
                None => "<span class=\"bad\">failed</span>".to_string(),
            };
            let hash = r.hash.as_deref().map_or(String::new(), |h| {
                escape(h.get(..("sha256:".len() + 12)).unwrap_or(h))
            });
            let error = (r.errors.as_deref())
                .and_then(|e| e.lines().next())
                .map_or(String::new(), escape);
            vec![
                ago(now, r.at),
                outcome,
                format!("<code>{hash}</code>"),
                r.files_total.to_string(),
                error,
            ]
        })
        .collect();
    out.push_str("<h3 id=\"config-loads\">Recent loads</h3>\n");
    table(
        out,
        &["when", "outcome", "hash", "files", "first error"],
        &rows,
        "none yet",
    );
}

pub(super) fn limits(out: &mut String, i: &Insight) {
    out.push_str("<h2 id=\"limits\">Domains and limits</h2>\n");
    let Some(s) = i.config.snapshot() else {
        out.push_str("<p class=\"none\">none</p>\n");
        return;
    };
    let domains: Vec<String> = s.config.domains().map(|d| escape(&d.name)).collect();
    let _ = writeln!(out, "<p>Domains: {}</p>", domains.join(", "));
    let all = s.config.limits();
    let rows: Vec<Vec<String>> = (all.iter().take(MAX_ROWS))
        .map(|l| {
            let value = match l.unit {
                _ if l.unlimited => "unlimited".to_string(),
                Some(u) => rate(
                    l.algorithm.name(),
                    l.requests_per_unit,
                    l.unit_multiplier,
                    u.as_str(),
                ),
                None => "-".to_string(),
            };
            let mut flags = Vec::new();
            if l.shadow_mode {
                flags.push("shadow");
            }
            if l.quota_mode {
                flags.push("quota");
            }
            vec![
                escape(&l.full_key),
                escape(&l.name),
                escape(&value),
                escape(l.algorithm.name()),
                escape(&flags.join(", ")),
                escape(&l.file),
            ]
        })
        .collect();
    table(
        out,
        &["key", "name", "limit", "algorithm", "flags", "from"],
        &rows,
        "no limits configured",
    );
    more(out, all.len());
}

fn more(out: &mut String, total: usize) {
    if total > MAX_ROWS {
        let _ = writeln!(out, "<p>… and {} more</p>", total - MAX_ROWS);
    }
}

pub(super) fn overrides(out: &mut String, i: &Insight, now: Timestamp, policy_on: bool) {
    out.push_str("<h2 id=\"overrides\">Active overrides</h2>\n");
    if !policy_on {
        out.push_str("<p class=\"none\">the policy database is off</p>\n");
        return;
    }
    let index = i.overrides.load();
    let active: Vec<_> = index
        .all()
        .into_iter()
        .filter(|o| o.active_at(now))
        .collect();
    let rows: Vec<Vec<String>> = (active.iter().take(MAX_ROWS))
        .map(|o| {
            let path: Vec<(String, String)> = (o.spec.descriptor.iter())
                .map(|e| (e.key.clone(), e.value.clone()))
                .collect();
            let left = o.spec.valid_until.as_secs().saturating_sub(now.as_secs());
            vec![
                escape(&o.id),
                escape(&o.spec.domain),
                entries(&path),
                escape(&format!(
                    "{} per {}",
                    o.spec.requests_per_unit,
                    o.spec.unit.as_str()
                )),
                span(left),
                escape(&o.spec.reason),
                escape(&o.created_by),
            ]
        })
        .collect();
    let head = [
        "id",
        "domain",
        "descriptor",
        "limit",
        "time left",
        "reason",
        "by",
    ];
    table(out, &head, &rows, "no active overrides");
    more(out, active.len());
}

pub(super) fn hot_keys(out: &mut String, i: &Insight) {
    out.push_str("<h2 id=\"hotkeys\">Hot keys (rolling last 30 s)</h2>\n");
    for by in By::ALL {
        let _ = writeln!(out, "<h3>by {}</h3>", by.as_str());
        let rows: Vec<Vec<String>> = (i.hot_keys.top_rolling(by, ROWS).iter().enumerate())
            .map(|(n, r)| {
                vec![
                    (n + 1).to_string(),
                    escape(&r.key.domain),
                    entries(&r.key.entries),
                    escape(&r.key.limit),
                    r.count.to_string(),
                ]
            })
            .collect();
        let head = ["rank", "domain", "descriptor", "limit", by.as_str()];
        table(out, &head, &rows, "none in the last 30 s");
    }
}

pub(super) fn violation_rows(out: &mut String, v: &Violations, now: Timestamp) {
    out.push_str("<h2 id=\"violations\">Recent violations</h2>\n");
    let rows = match v {
        Violations::NotWired => {
            out.push_str(
                "<p class=\"none\">the violation log is not enabled on this instance</p>\n",
            );
            return;
        }
        Violations::Failed(e) => {
            let _ = writeln!(out, "<p class=\"bad\">unavailable: {}</p>", escape(e));
            return;
        }
        Violations::Rows(rows) => rows,
    };
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                ago(now, r.at),
                escape(&r.domain),
                entries(&r.entries),
                escape(&r.limit),
                r.requests.to_string(),
                r.hits.to_string(),
                if r.shadow { "yes" } else { "no" }.to_string(),
            ]
        })
        .collect();
    let head = [
        "at",
        "domain",
        "descriptor",
        "limit",
        "requests",
        "hits",
        "shadow",
    ];
    table(out, &head, &rows, "none recorded");
}

pub(super) fn breakers(out: &mut String, i: &Insight) {
    out.push_str("<h2 id=\"breakers\">Redis circuit breakers</h2>\n");
    let Some(read) = &i.breakers else {
        out.push_str("<p class=\"none\">no Redis targets (memory store)</p>\n");
        return;
    };
    let rows: Vec<Vec<String>> = read()
        .iter()
        .map(|r| {
            let state = match r.state {
                BreakerState::Closed => "closed",
                BreakerState::HalfOpen => "half-open",
                BreakerState::Open => "open",
            };
            vec![
                escape(r.target),
                state.to_string(),
                format!("{} / {} / {}", r.opened, r.half_opened, r.closed),
            ]
        })
        .collect();
    let head = ["target", "state", "opened / half-opened / closed"];
    table(out, &head, &rows, "no breakers (RESILIENCE breakers off)");
}
