//! HTML building blocks of the console: escaping (every value that is not a literal goes
//! through [`escape`]), descriptor entries, durations, relative times and tables.

use std::fmt::Write;

use ratelimitd_core::clock::Timestamp;

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by entities: safe in text and quoted attributes.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `k=v, k=v` of descriptor entries, escaped.
pub(super) fn entries(e: &[(String, String)]) -> String {
    let parts: Vec<String> = e.iter().map(|(k, v)| format!("{k}={v}")).collect();
    escape(&parts.join(", "))
}

/// `1h 2m 3s` of a number of seconds.
pub(super) fn span(secs: u64) -> String {
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, _) => format!("{m}m {s}s"),
        _ => format!("{h}h {m}m {s}s"),
    }
}

/// `t` relative to `now` in words ("just now", "3 min ago", "in 2 h"), in a `<time>` element
/// whose tooltip is the exact RFC 3339 time.
pub(super) fn ago(now: Timestamp, t: Timestamp) -> String {
    let (past, secs) = if t <= now {
        (true, now.as_secs() - t.as_secs())
    } else {
        (false, t.as_secs() - now.as_secs())
    };
    let amount = match secs {
        0..5 => return format!("<time title=\"{}\">just now</time>", t.to_rfc3339()),
        5..120 => format!("{secs} s"),
        120..7_200 => format!("{} min", secs / 60),
        7_200..172_800 => format!("{} h", secs / 3600),
        _ => format!("{} d", secs / 86_400),
    };
    let words = if past {
        format!("{amount} ago")
    } else {
        format!("in {amount}")
    };
    format!("<time title=\"{}\">{words}</time>", t.to_rfc3339())
}

/// A table with `head` columns and escaped-already `rows`; `empty` when there are none.
pub(super) fn table(out: &mut String, head: &[&str], rows: &[Vec<String>], empty: &str) {
    if rows.is_empty() {
        let _ = writeln!(out, "<p class=\"none\">{}</p>", escape(empty));
        return;
    }
    out.push_str("<table><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr>\n");
    for r in rows {
        out.push_str("<tr>");
        for cell in r {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape(r#"<script>alert('x')</script>&"#),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;"
        );
        assert_eq!(escape("\"a\""), "&quot;a&quot;");
        assert_eq!(span(3725), "1h 2m 5s");
        assert_eq!(span(59), "59s");
    }

    #[test]
    fn times_are_relative_with_the_exact_time_as_tooltip() {
        let now = Timestamp::from_secs(10_000);
        let at = |s| ago(now, Timestamp::from_secs(s));
        assert!(at(9_998).contains(">just now<"));
        assert!(at(9_955).contains(">45 s ago<"));
        assert!(at(9_800).contains(">3 min ago<"));
        assert!(at(10_000 + 2_400).contains(">in 40 min<"));
        assert!(ago(Timestamp::from_secs(400_000), now).contains(">4 d ago<"));
        assert!(at(9_800).contains("title=\"1970-01-01T02:43:20"));
    }
}
