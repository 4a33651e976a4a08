//! The console page, top to bottom: who this instance is (version, instance, uptime, backend),
//! the health banner, the decision charts, the key search, the limits nearest their thresholds,
//! then the detail sections. Built from a [`View`] the handler gathered; nothing here waits.

use std::fmt::Write;

use super::Violations;
use super::banner::{self, Line};
use super::html::{ago, escape, span};
use super::nearest::{self, Near};
use super::{charts, search, sections};
use crate::explain::Explained;
use crate::insight::Insight;
use crate::insight::rates::Point;

/// Everything the page shows, read before rendering.
pub(super) struct View<'a> {
    /// The read-only views.
    pub insight: &'a Insight,
    /// The newest violations.
    pub violations: Violations,
    /// Whether the policy database is on.
    pub policy_on: bool,
    /// Whether the reader came in with a session cookie (the page offers to sign out).
    pub signed_in: bool,
    /// The banner's lines.
    pub banner: Vec<Line>,
    /// The rate history (`None`: stats off).
    pub series: Option<Vec<Point>>,
    /// The limits nearest their thresholds.
    pub near: Vec<Near>,
    /// The search asked for (domain, descriptor text) and its answer.
    pub search: Option<(String, String, Result<Explained, String>)>,
    /// This region's shares and their sync, as `/rlconfig` prints them (empty without `REGION`).
    pub regions: Vec<String>,
}

const STYLE: &str = "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse}\
     td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}.none{color:#777}.bad{color:#b00}\
     .banner{padding:.5em 1em;border-radius:4px;margin:.5em 0}.banner ul{margin:.3em 0}\
     .banner.ok{background:#e3f5e6;border:2px solid #2a7}\
     .banner.degraded{background:#fde2e2;border:2px solid #b00}.banner.degraded strong{color:#b00}\
     .charts{display:flex;flex-wrap:wrap;gap:1em}.chart{margin:0}.about{color:#444}";

/// The whole page.
pub(super) fn page(v: &View<'_>) -> String {
    let i = v.insight;
    let now = i.clock.now();
    let mut out = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"refresh\" content=\"10\"><title>ratelimitd status: {}</title>\
         <style>{STYLE}</style></head><body>\n<h1>ratelimitd console</h1>\n",
        escape(&i.about.instance)
    );
    let up = now.as_secs().saturating_sub(i.about.started_at.as_secs());
    let _ = writeln!(
        out,
        "<p class=\"about\">version {} · instance <b>{}</b> · up {} (started {}) · backend {} · \
         page at {} (refreshes every 10 s)</p>",
        escape(i.about.version),
        escape(&i.about.instance),
        span(up),
        ago(now, i.about.started_at),
        escape(&i.about.backend),
        ago(now, now),
    );
    if v.signed_in {
        out.push_str(
            "<form id=\"logout\" method=\"post\" action=\"/logout\">\
             <button type=\"submit\">Sign out</button></form>\n",
        );
    }
    banner::render(&mut out, &v.banner);
    charts::render(&mut out, v.series.as_deref());
    let (domain, descriptor) = match &v.search {
        Some((d, t, _)) => (d.as_str(), t.as_str()),
        None => ("", ""),
    };
    search::form(&mut out, domain, descriptor);
    if let Some((_, _, found)) = &v.search {
        search::result(&mut out, found);
    }
    nearest::render(&mut out, &v.near);
    sections::config_status(&mut out, i, now);
    sections::limits(&mut out, i);
    sections::overrides(&mut out, i, now, v.policy_on);
    sections::hot_keys(&mut out, i);
    sections::violation_rows(&mut out, &v.violations, now);
    sections::breakers(&mut out, i);
    super::shedding::render(&mut out, i, now);
    if !v.regions.is_empty() {
        out.push_str("<h2 id=\"regions\">Regions</h2><ul>\n");
        for line in &v.regions {
            let _ = writeln!(out, "<li>{}</li>", escape(line));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2 id=\"endpoints\">Endpoints</h2><ul>\n");
    for (path, help) in crate::http::admin::ENDPOINTS {
        let _ = writeln!(out, "<li>{}: {}</li>", escape(path), escape(help));
    }
    out.push_str("</ul></body></html>\n");
    out
}
