//! The health banner at the top of the console: one line per component (configuration, store,
//! breakers, failure mode, errors), red when anything is degraded — so an instance answering every
//! call by its failure mode says so before anything else, whatever is below the fold.

use std::fmt::Write;

use super::html::{ago, escape};
use crate::insight::Insight;
use crate::insight::rates::{BUCKET_SECS, Point, Totals};
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::resilience::BreakerState;

/// Buckets of the rate history the banner looks back over: the last minute.
const RECENT_BUCKETS: usize = (60 / BUCKET_SECS) as usize;

/// One line of the banner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    /// What it is about.
    pub what: &'static str,
    /// What it says (escaped already).
    pub html: String,
    /// True when it is a problem.
    pub bad: bool,
}

/// The banner's lines for the console at `now`; `store_healthy` is the store's health check,
/// `series` the rate history (`None` with stats off).
pub(super) fn lines(
    i: &Insight,
    store_healthy: bool,
    series: Option<&[Point]>,
    now: Timestamp,
) -> Vec<Line> {
    let mut out = vec![configuration(i, now)];
    let backend = escape(&i.about.backend);
    out.push(if store_healthy {
        Line::new("store", format!("{backend}: healthy"), false)
    } else {
        Line::new("store", format!("{backend}: not answering"), true)
    });
    out.extend(breakers(i));
    if let Some(read) = &i.store_nodes {
        for (text, bad) in read() {
            out.push(Line::new("store node", escape(&text), bad));
        }
    }
    if let Some(read) = &i.fleet {
        let (text, degraded) = read();
        out.push(Line::new("fleet", escape(&text), degraded));
    }
    match series {
        Some(series) => out.extend(decisions(series, now)),
        None => out.push(Line::new(
            "decisions",
            format!("not counted: {}", super::STATS_OFF),
            false,
        )),
    }
    out
}

impl Line {
    /// A line about `what`.
    fn new(what: &'static str, html: String, bad: bool) -> Line {
        Line { what, html, bad }
    }
}

/// The configuration in service: its version, age and domains, and whether the last reload
/// failed (none loaded is a problem: every call is answered with an error).
fn configuration(i: &Insight, now: Timestamp) -> Line {
    let Some(s) = i.config.snapshot() else {
        return Line::new(
            "configuration",
            "none loaded: every call is answered with an error".into(),
            true,
        );
    };
    let mut html = format!(
        "version {} loaded {}, {} domain(s)",
        s.version,
        ago(now, s.loaded_at),
        s.config.domain_count()
    );
    let failed = i.config.last_failure();
    if let Some(f) = &failed {
        let _ = write!(
            html,
            "; the last reload failed {} and the version above stays in service",
            ago(now, f.at)
        );
    }
    Line::new("configuration", html, failed.is_some())
}

/// The store's circuit breakers: those not closed, or how many are (no line without breakers).
fn breakers(i: &Insight) -> Option<Line> {
    let read = i.breakers.as_ref()?;
    let reports = read();
    let open: Vec<String> = (reports.iter())
        .filter(|r| r.state != BreakerState::Closed)
        .map(|r| {
            let state = match r.state {
                BreakerState::Open => "open",
                _ => "half-open",
            };
            format!("{} {state}", escape(r.target))
        })
        .collect();
    Some(if open.is_empty() {
        Line::new("breakers", format!("{} closed", reports.len()), false)
    } else {
        Line::new("breakers", open.join(", "), true)
    })
}

/// The decisions of the rate history: the failure mode's answers and the errors, a problem when
/// the last minute has any, else when each was last seen.
fn decisions(series: &[Point], now: Timestamp) -> [Line; 2] {
    let recent = series.iter().rev().take(RECENT_BUCKETS);
    let last_minute = recent.fold(Totals::default(), |mut t, p| {
        t.degraded += p.counts.degraded;
        t.errors += p.counts.errors;
        t
    });
    let newest = |f: fn(&Totals) -> u64| {
        (series.iter().rev()).find(|p| f(&p.counts) > 0).map(|p| {
            ago(
                now,
                p.start
                    .saturating_add(std::time::Duration::from_secs(BUCKET_SECS)),
            )
        })
    };
    let failure_mode = match newest(|t| t.degraded) {
        _ if last_minute.degraded > 0 => Line::new(
            "failure mode",
            format!(
                "ACTIVE: {} decision(s) in the last minute were answered by the failure mode, \
                 the open breaker or the local fallback, not by the store",
                last_minute.degraded
            ),
            true,
        ),
        Some(when) => Line::new("failure mode", format!("inactive; last used {when}"), false),
        None => Line::new("failure mode", "not used in 15 min".into(), false),
    };
    let errors = match newest(|t| t.errors) {
        _ if last_minute.errors > 0 => Line::new(
            "errors",
            format!(
                "{} call(s) answered with an error in the last minute",
                last_minute.errors
            ),
            true,
        ),
        Some(when) => Line::new(
            "errors",
            format!("none in the last minute; last {when}"),
            false,
        ),
        None => Line::new("errors", "none in 15 min".into(), false),
    };
    [failure_mode, errors]
}

/// The banner's HTML: green with every line when all is well, red with the problems first.
pub(super) fn render(out: &mut String, lines: &[Line]) {
    let bad = lines.iter().filter(|l| l.bad).count();
    let (class, title) = if bad == 0 {
        ("ok", "Healthy".to_string())
    } else {
        ("degraded", format!("DEGRADED: {bad} problem(s)"))
    };
    let _ = write!(
        out,
        "<section id=\"health\" class=\"banner {class}\"><strong>{title}</strong><ul>"
    );
    let problems_first = lines
        .iter()
        .filter(|l| l.bad)
        .chain(lines.iter().filter(|l| !l.bad));
    for l in problems_first {
        let mark = if l.bad { " class=\"bad\"" } else { "" };
        let _ = write!(out, "<li{mark}><b>{}</b>: {}</li>", l.what, l.html);
    }
    out.push_str("</ul></section>\n");
}
