//! The console's priority shedding section: for each limit with priority classes, the usage the
//! store counted at this instance's latest decision on it (the value decided last, as the
//! concurrency slots gauge keeps it: `metrics::usage`) against each class's threshold, e.g.
//! "usage 84% of 100" with "test (70%) and read (80%) shed; write (90%) and critical (100%)
//! admitted". Keys and class names come from the config; every one is escaped.

use super::html::{escape, table};
use crate::insight::Insight;
use crate::metrics::usage::Usage;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::effective_limit;

/// Most limits listed.
const MAX_ROWS: usize = 200;

pub(super) fn render(out: &mut String, i: &Insight, now: Timestamp) {
    out.push_str("<h2 id=\"shedding\">Priority shedding</h2>\n");
    let Some(gauges) = &i.shed_usage else {
        out.push_str(&format!(
            "<p class=\"none\">no usage is kept: {}</p>\n",
            escape(super::STATS_OFF)
        ));
        return;
    };
    out.push_str(
        "<p class=\"about\">Usage as the store counted it at this instance's latest decision on \
         each limit (the value decided last; on a shared store it includes the other \
         instances' hits as of that decision). A class is shed once its next hit would pass \
         its share of the limit.</p>\n",
    );
    let rows: Vec<Vec<String>> = (gauges.snapshot(now).into_iter().take(MAX_ROWS))
        .map(|(key, usage, current)| {
            let state = if current {
                format!("usage {}% of {}", percent(usage.share()), usage.limit)
            } else {
                format!(
                    "no decision in the current window (the last one: {}% of {})",
                    percent(usage.share()),
                    usage.limit
                )
            };
            let classes = if current {
                classes(&usage)
            } else {
                String::new()
            };
            vec![escape(&key), state, escape(&classes)]
        })
        .collect();
    table(
        out,
        &["limit", "usage", "classes"],
        &rows,
        "no decision on a limit with priorities yet",
    );
}

/// "test (70%) and read (80%) shed; write (90%) and critical (100%) admitted", classes by
/// share, lowest first.
fn classes(u: &Usage) -> String {
    let Some(p) = u.shedding.as_ref().and_then(|s| s.priorities.as_ref()) else {
        return String::new();
    };
    let mut by_share: Vec<&(String, f64)> = p.classes.iter().collect();
    by_share.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (shed, admitted): (Vec<_>, Vec<_>) = by_share
        .into_iter()
        .map(|(name, share)| {
            let threshold = effective_limit(u.limit, *share, 1.0, 0.0);
            (
                format!("{name} ({}%)", percent(*share)),
                u.usage >= threshold,
            )
        })
        .partition(|(_, shed)| *shed);
    let list = |v: Vec<(String, bool)>| {
        let names: Vec<String> = v.into_iter().map(|(n, _)| n).collect();
        match names.split_last() {
            None => String::new(),
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        }
    };
    match (list(shed), list(admitted)) {
        (s, a) if s.is_empty() => format!("{a} admitted"),
        (s, a) if a.is_empty() => format!("{s} shed"),
        (s, a) => format!("{s} shed; {a} admitted"),
    }
}

/// A share as a whole percentage, rounded down (84.9% is not yet 85%).
fn percent(share: f64) -> u64 {
    (share * 100.0 + 1e-9).floor() as u64
}
