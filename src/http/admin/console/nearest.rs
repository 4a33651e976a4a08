//! "Nearest their thresholds": the keys busiest over the last half minute (the rolling hot-key
//! view), their counters read through explain — counting no hit — and ranked by how much of
//! their limit they use now. A key at 100% is being denied.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::html::{entries, escape, table};
use crate::explain::{Counter, Explainer, MAX_DESCRIPTORS};
use crate::insight::Insight;
use crate::insight::hotkeys::By;

/// One limit of one busy key.
#[derive(Debug, Clone)]
pub(super) struct Near {
    domain: String,
    entries: Vec<(String, String)>,
    limit: String,
    used: u64,
    capacity: u64,
    remaining: u64,
}

impl Near {
    /// The share of the limit in use, 0 to 1.
    fn share(&self) -> f64 {
        1.0 - self.remaining.min(self.capacity) as f64 / self.capacity.max(1) as f64
    }
}

/// The `rows` limits of the busiest keys that are nearest their threshold, fullest first.
pub(super) async fn find(i: &Insight, explainer: &Explainer, rows: usize) -> Vec<Near> {
    let mut by_domain: BTreeMap<String, Vec<Vec<(String, String)>>> = BTreeMap::new();
    for r in i.hot_keys.top_rolling(By::Hits, MAX_DESCRIPTORS) {
        by_domain
            .entry(r.key.domain.clone())
            .or_default()
            .push(r.key.entries.clone());
    }
    let mut found = Vec::new();
    for (domain, descriptors) in by_domain {
        let Ok(e) = explainer.explain_with(&domain, &descriptors, false).await else {
            continue;
        };
        for d in e.descriptors {
            for l in d.limits {
                let Counter::Read {
                    used, remaining, ..
                } = l.counter
                else {
                    continue;
                };
                let capacity = u64::from(l.burst.unwrap_or(l.requests_per_unit));
                let limit = if l.name.is_empty() { l.key } else { l.name };
                found.push(Near {
                    domain: domain.clone(),
                    entries: d.entries.clone(),
                    limit,
                    used,
                    capacity,
                    remaining,
                });
            }
        }
    }
    found.sort_by(|a, b| b.share().total_cmp(&a.share()));
    found.truncate(rows);
    found
}

/// The section.
pub(super) fn render(out: &mut String, near: &[Near]) {
    out.push_str(
        "<h2 id=\"nearest\">Limits nearest their thresholds (busiest keys, last 30 s)</h2>\n",
    );
    let rows: Vec<Vec<String>> = (near.iter())
        .map(|n| {
            let pct = (n.share() * 100.0).round();
            let class = if n.remaining == 0 { "bad" } else { "" };
            vec![
                escape(&n.domain),
                entries(&n.entries),
                escape(&n.limit),
                format!(
                    "<meter min=\"0\" max=\"100\" value=\"{pct}\"></meter> \
                     <span class=\"{class}\">{pct}%</span>"
                ),
                format!(
                    "{} used, {} of {} remaining",
                    n.used, n.remaining, n.capacity
                ),
            ]
        })
        .collect();
    let head = ["domain", "descriptor", "limit", "in use", "counter now"];
    table(out, &head, &rows, "no busy keys in the last 30 s");
    let _ = writeln!(out);
}
