//! `value_regex` and `regex_key` (ratelimitd extensions): a descriptor entry that matches values
//! by a pattern instead of one exact value. Patterns have RE2 semantics (the `regex` crate: no
//! backreferences or look-around, matching in time linear in the value), must match the whole
//! value, and are compiled once, here, under size limits, so a pathological pattern is refused at
//! load instead of being discovered on the request path.

use regex::RegexBuilder;

use super::compiled::ValueRegex;
use super::error::{Sink, field_path};
use super::model::RawDescriptor;

/// The most memory one pattern's compiled program may take. Patterns that describe paths, user
/// agents or tenant ids compile to a few kilobytes; a counted repetition of a large Unicode class
/// (`\w{1000}`) is what this refuses.
pub(crate) const SIZE_LIMIT: usize = 1 << 20;

/// The most memory the lazy DFA of one pattern may cache while matching; past it the matcher
/// clears its cache and carries on, so time per value stays linear.
pub(crate) const DFA_SIZE_LIMIT: usize = 1 << 20;

/// `key=~pattern`: the level's name in config paths, stats keys and shared counter keys.
pub(crate) fn name(key: &str, pattern: &str) -> String {
    format!("{key}=~{pattern}")
}

/// Checks the regex fields of `d`: `Ok(None)` when it has no `value_regex` (and no stray
/// `regex_key`), `Ok(Some(_))` with the compiled pattern, `Err(())` when something was refused
/// (already reported at its YAML path).
pub(crate) fn check(d: &RawDescriptor, sink: &mut Sink<'_>) -> Result<Option<ValueRegex>, ()> {
    let Some(pattern) = &d.value_regex else {
        if d.regex_key.is_some() {
            sink.push(
                &field_path(&d.path, "regex_key"),
                "regex_key only applies to a descriptor with value_regex",
            );
            return Err(());
        }
        return Ok(None);
    };
    let at = field_path(&d.path, "value_regex");
    let mut ok = true;
    if d.value_given {
        sink.push(
            &at,
            "value and value_regex cannot both be set on one descriptor (value matches one value exactly, value_regex every value its pattern matches; write one of them)",
        );
        ok = false;
    }
    if d.share_threshold {
        sink.push(
            &field_path(&d.path, "share_threshold"),
            "share_threshold only applies to wildcard values; with value_regex write `regex_key: shared` for one counter",
        );
        ok = false;
    }
    let shared = match d.regex_key.as_deref() {
        None | Some("per_value") => false,
        Some("shared") => true,
        Some(other) => {
            sink.push(
                &field_path(&d.path, "regex_key"),
                format!("invalid regex_key '{other}' (expected per_value or shared)"),
            );
            ok = false;
            false
        }
    };
    if pattern.is_empty() {
        sink.push(
            &at,
            "value_regex must not be empty (write a pattern the whole value must match, e.g. `[0-9]+`)",
        );
        return Err(());
    }
    // The pattern as written is compiled first, so an error's position points into what the
    // operator wrote rather than into the anchored form.
    let compiled = build(pattern).and_then(|_| build(&format!("^(?:{pattern})$")));
    match compiled {
        Ok(compiled) if ok => Ok(Some(ValueRegex {
            pattern: pattern.clone(),
            shared,
            name: name(&d.key, pattern),
            compiled,
        })),
        Ok(_) => Err(()),
        Err(e) => {
            sink.push(
                &at,
                format!("invalid value_regex '{pattern}': {}", describe(&e)),
            );
            Err(())
        }
    }
}

fn build(pattern: &str) -> Result<regex::Regex, regex::Error> {
    RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(DFA_SIZE_LIMIT)
        .build()
}

/// The error on one line: the `regex` crate's syntax errors span several (the pattern, a caret
/// under the problem, the message), which would break the one-error-per-line report.
fn describe(e: &regex::Error) -> String {
    let regex::Error::Syntax(text) = e else {
        return e.to_string();
    };
    let lines: Vec<&str> = text.lines().collect();
    let message = lines
        .iter()
        .find_map(|l| l.strip_prefix("error: "))
        .map(str::trim);
    // The caret line: indentation of 4, then spaces up to the offending character.
    let column = lines.iter().find_map(|l| {
        let body = l.strip_prefix("    ")?;
        let trimmed = body.trim_start();
        (!trimmed.is_empty() && trimmed.chars().all(|c| c == '^'))
            .then(|| body.chars().count() - trimmed.chars().count() + 1)
    });
    match (message, column) {
        (Some(message), Some(column)) => format!("{message} at character {column}"),
        (Some(message), None) => message.to_owned(),
        _ => lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; "),
    }
}
