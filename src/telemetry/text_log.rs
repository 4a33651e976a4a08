//! The `LOG_FORMAT=text` field format: tracing's default `key=value` rendering with every control
//! character escaped, in every field of events and spans (the message included). Fields carry
//! client input — a domain, descriptor keys and values, an RLQS bucket — and a raw newline or ESC
//! there would forge a log line or drive the operator's terminal. A newline becomes `\n`, a
//! carriage return `\r`, a tab `\t`, any other control character (and the Unicode line and
//! paragraph separators) `\u{…}`; a backslash is left alone, so ordinary text reads as before.
//! (`LOG_FORMAT=json` needs nothing: JSON strings escape control characters already.)

use std::fmt;

use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, Writer};

/// [`DefaultFields`] with control characters escaped.
#[derive(Debug, Default)]
pub(crate) struct EscapedFields {
    inner: DefaultFields,
}

impl EscapedFields {
    /// The escaping field format.
    pub(crate) fn new() -> EscapedFields {
        EscapedFields::default()
    }
}

impl<'writer> FormatFields<'writer> for EscapedFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        // Rendered without colours (no escape sequences of our own), then escaped as a whole.
        let mut raw = String::new();
        self.inner.format_fields(Writer::new(&mut raw), fields)?;
        write_escaped(&mut writer, &raw)
    }
}

/// Writes `text` to `out` with every control character escaped (see the module docs).
pub(crate) fn write_escaped(out: &mut impl fmt::Write, text: &str) -> fmt::Result {
    let mut rest = text;
    while let Some(at) = rest.find(needs_escape) {
        out.write_str(&rest[..at])?;
        let c = rest[at..].chars().next().unwrap_or_default();
        match c {
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c => write!(out, "\\u{{{:x}}}", u32::from(c))?,
        }
        rest = &rest[at + c.len_utf8()..];
    }
    out.write_str(rest)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\u{2028}' || c == '\u{2029}'
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::fmt::MakeWriter;

    use super::*;

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        write_escaped(&mut out, text).unwrap();
        out
    }

    #[test]
    fn control_characters_are_escaped_and_the_rest_is_kept() {
        assert_eq!(escaped("plain é ü \\ \"q\""), "plain é ü \\ \"q\"");
        assert_eq!(
            escaped("a\nb\rc\td\u{1b}[31me\u{7f}f\u{85}g\u{2028}h"),
            "a\\nb\\rc\\td\\u{1b}[31me\\u{7f}f\\u{85}g\\u{2028}h"
        );
    }

    /// Collects what the subscriber writes.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Buffer {
            self.clone()
        }
    }

    #[test]
    fn a_forged_line_in_any_field_stays_on_one_line() {
        let buffer = Buffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(buffer.clone())
            .with_ansi(false)
            .fmt_fields(EscapedFields::new())
            .finish();
        let forged = "d\n2026-01-01T00:00:00Z ERROR forged\u{1b}[2J";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("req", domain = %forged);
            let _in = span.enter();
            tracing::warn!(domain = %forged, value = forged, "refused {forged}");
        });
        let out = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(!out.contains('\u{1b}'), "{out}");
        assert_eq!(
            out.matches("d\\n2026-01-01T00:00:00Z ERROR forged\\u{1b}[2J")
                .count(),
            3
        );
    }
}
