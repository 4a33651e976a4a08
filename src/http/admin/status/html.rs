//! HTML building blocks of the status page: escaping (every value that is not a literal goes
//! through [`escape`]), descriptor entries, durations and tables.

use std::fmt::Write;

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by entities: safe in text and quoted attributes.
pub fn escape(s: &str) -> String {
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
}
