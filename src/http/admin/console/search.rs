//! The console's client-key search: a plain GET form (`?domain=&descriptor=key=value,…`) whose
//! answer is explain's ([`crate::explain`]) as HTML — the limits and overrides that match, their
//! live counters and the key's recent violations, counting no hit.

use std::fmt::Write;

use super::html::{ago, entries, escape, table};
use crate::explain::{Counter, DescriptorReport, Explained, Violations};
use crate::http::rate_text::rate;
use ratelimitd_core::clock::Timestamp;

/// The search form, filled with what was asked (escaped).
pub(super) fn form(out: &mut String, domain: &str, descriptor: &str) {
    let _ = write!(
        out,
        "<h2 id=\"search\">Key search</h2>\n<form method=\"get\" action=\"/#search\">\
         <label>domain <input name=\"domain\" value=\"{}\" required></label> \
         <label>descriptor <input name=\"descriptor\" size=\"40\" value=\"{}\" \
         placeholder=\"client_key=alice,path=/login\" required></label> \
         <button type=\"submit\">explain</button></form>\n\
         <p class=\"none\">Shows the limits and overrides that match, their counters now and \
         recent violations. Counts no hit.</p>\n",
        escape(domain),
        escape(descriptor)
    );
}

/// One counter in words.
pub(super) fn counter(c: &Counter, now: Timestamp) -> (String, bool) {
    match c {
        Counter::Read {
            used,
            remaining,
            over_limit,
            reset_after,
        } => {
            let state = if *over_limit {
                "at the limit"
            } else {
                "within"
            };
            let text = format!(
                "{used} used, {remaining} remaining ({state}), resets in {}s",
                reset_after.as_secs() + u64::from(reset_after.subsec_nanos() > 0)
            );
            (escape(&text), *over_limit)
        }
        Counter::CachedOver(until) => (
            format!("over the limit (local cache) until {}", ago(now, *until)),
            true,
        ),
        Counter::Unavailable(why) => (format!("unavailable: {}", escape(why)), true),
    }
}

/// The answer to a search (or why there is none).
pub(super) fn result(out: &mut String, found: &Result<Explained, String>) {
    let e = match found {
        Ok(e) => e,
        Err(why) => {
            let _ = writeln!(out, "<p class=\"bad\">{}</p>", escape(why));
            return;
        }
    };
    let now = e.at;
    out.push_str("<div id=\"search-result\">");
    if !e.domain_known {
        let _ = writeln!(
            out,
            "<p class=\"bad\">The configuration has no domain '{}': every descriptor is allowed \
             without a limit.</p>",
            escape(&e.domain)
        );
    }
    for d in &e.descriptors {
        let _ = writeln!(
            out,
            "<h3>{} / {}</h3>",
            escape(&e.domain),
            entries(&d.entries)
        );
        match d.applies {
            "unlimited" => out.push_str("<p>unlimited: never counted</p>\n"),
            "no_limit" => out.push_str("<p>no limit applies</p>\n"),
            _ => {}
        }
        limits(out, d, now);
        overrides(out, d, now);
        violations(out, &d.violations, now);
    }
    out.push_str("</div>\n");
}

/// A descriptor's limits and where each counter stands now (no table when none applies).
fn limits(out: &mut String, d: &DescriptorReport, now: Timestamp) {
    let rows: Vec<Vec<String>> = (d.limits.iter())
        .map(|l| {
            let (mut text, bad) = counter(&l.counter, now);
            // Reported usage past the limit: the key is refused until it is paid back.
            if let Some(debt) = l.debt().filter(|d| *d > 0) {
                text.push_str(&format!(", in debt by {debt}"));
            }
            let per = rate(l.algorithm, l.requests_per_unit, l.unit_multiplier, &l.unit);
            let class = if bad { "bad" } else { "" };
            vec![
                escape(&l.name),
                escape(&l.key),
                escape(&l.source),
                escape(&per),
                escape(l.algorithm),
                if l.shadow { "yes" } else { "no" }.into(),
                format!("<span class=\"{class}\">{text}</span>"),
            ]
        })
        .collect();
    if !rows.is_empty() {
        let head = [
            "limit",
            "key",
            "from",
            "rate",
            "algorithm",
            "shadow",
            "counter now",
        ];
        table(out, &head, &rows, "");
    }
}

/// The stored overrides that match a descriptor.
fn overrides(out: &mut String, d: &DescriptorReport, now: Timestamp) {
    let rows: Vec<Vec<String>> = (d.overrides.iter())
        .map(|o| {
            vec![
                escape(&o.id),
                escape(&format!("{} per {}", o.requests_per_unit, o.unit)),
                format!(
                    "{}{}",
                    ago(now, o.valid_until),
                    if o.active { "" } else { " (expired)" }
                ),
                escape(&o.reason),
                escape(&o.created_by),
            ]
        })
        .collect();
    let head = ["override", "rate", "valid until", "reason", "by"];
    table(out, &head, &rows, "no stored override on this descriptor");
}

/// A key's recent violations, or why they cannot be read.
fn violations(out: &mut String, violations: &Violations, now: Timestamp) {
    match violations {
        Violations::NotWired => out.push_str(
            "<p class=\"none\">violations: the violation log does not write to a database \
             on this instance</p>\n",
        ),
        Violations::Failed(why) => {
            let _ = writeln!(
                out,
                "<p class=\"bad\">violations unavailable: {}</p>",
                escape(why)
            );
        }
        Violations::Rows(rows) => {
            let rows: Vec<Vec<String>> = (rows.iter())
                .map(|r| {
                    vec![
                        ago(now, r.at),
                        escape(&r.limit),
                        r.requests.to_string(),
                        r.hits.to_string(),
                        if r.shadow { "yes" } else { "no" }.into(),
                    ]
                })
                .collect();
            let head = ["violation", "limit", "requests", "hits", "shadow"];
            table(out, &head, &rows, "no recent violations of this key");
        }
    }
}
