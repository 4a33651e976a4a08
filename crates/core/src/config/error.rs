//! Config errors: one [`ConfigError`] per problem, each naming the file and the YAML path, so a
//! reload reports everything wrong at once instead of Go's first-panic-wins.

use crate::algorithm::calendar::Zone;
use std::fmt;

/// One problem in one config file. `message` carries the Go reference's exact text
/// (`docs/design/contract.md#validation`) so logs and NACKs stay recognisable; `path` is ours (Go
/// has none) and locates the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file's name: its goruntime key or path (`docs/design/contract.md#config-files`), or the
    /// xDS resource name.
    pub file: String,
    /// The YAML path, e.g. `descriptors[0].rate_limit.unit`; empty for whole-file problems.
    pub path: String,
    /// The Go error text, e.g. `invalid rate limit unit 'foo'`.
    pub message: String,
    /// Ours: what would fix it (the valid choices, the nearest key, the other file), shown after
    /// the message in parentheses. Kept apart so `message` stays Go's exact text.
    pub hint: Option<String>,
}

impl ConfigError {
    /// The message with its hint, as the logs and `validate` show it (without file and path).
    pub fn explained(&self) -> String {
        match &self.hint {
            Some(hint) => format!("{} ({hint})", self.message),
            None => self.message.clone(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let message = self.explained();
        if self.path.is_empty() {
            write!(f, "{}: {message}", self.file)
        } else {
            write!(f, "{}: {}: {message}", self.file, self.path)
        }
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one load. Never empty when returned as an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", lines(.0))]
pub struct ConfigErrors(pub Vec<ConfigError>);

/// One error per line, no trailing newline.
fn lines(errors: &[ConfigError]) -> String {
    let mut out = String::new();
    for (i, e) in errors.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&e.to_string());
    }
    out
}

/// Collects errors for one file while the walkers descend, so no walker stops at the first one.
#[derive(Debug)]
pub(crate) struct Sink<'a> {
    file: &'a str,
    pub(crate) errors: &'a mut Vec<ConfigError>,
    /// Problems that do not reject the load but that the operator should see.
    warnings: &'a mut Vec<ConfigError>,
    /// The zone of calendar windows that name none (`CompileOptions::calendar_time_zone`): the
    /// one compile option a single limit's check needs, carried down the walk with the sink.
    default_zone: Option<&'static Zone>,
}

impl<'a> Sink<'a> {
    /// A sink that tags everything with `file` and appends to `errors` (or `warnings`).
    pub(crate) fn new(
        file: &'a str,
        errors: &'a mut Vec<ConfigError>,
        warnings: &'a mut Vec<ConfigError>,
    ) -> Self {
        Sink {
            file,
            errors,
            warnings,
            default_zone: None,
        }
    }

    /// This sink, checking calendar windows without a `time_zone` against `zone` (UTC: `None`).
    pub(crate) fn with_default_zone(self, zone: Option<&'static Zone>) -> Self {
        Sink {
            default_zone: zone,
            ..self
        }
    }

    /// The zone of calendar windows that name none; `None` = UTC.
    pub(crate) fn default_zone(&self) -> Option<&'static Zone> {
        self.default_zone
    }

    /// Records one warning at `path`: reported, but the load goes ahead.
    pub(crate) fn warn(&mut self, path: &str, message: impl Into<String>) {
        self.warnings.push(ConfigError {
            file: self.file.to_owned(),
            path: path.to_owned(),
            message: message.into(),
            hint: None,
        });
    }

    /// The document being checked.
    pub(crate) fn file(&self) -> &str {
        self.file
    }

    /// Records one error at `path`.
    pub(crate) fn push(&mut self, path: &str, message: impl Into<String>) {
        self.push_hinted(path, message, None);
    }

    /// Records one error at `path` with what would fix it.
    pub(crate) fn push_hinted(
        &mut self,
        path: &str,
        message: impl Into<String>,
        hint: Option<String>,
    ) {
        self.errors.push(ConfigError {
            file: self.file.to_owned(),
            path: path.to_owned(),
            message: message.into(),
            hint,
        });
    }
}

/// `parent.field`, or just `field` at the document root.
pub(crate) fn field_path(parent: &str, field: &str) -> String {
    if parent.is_empty() {
        field.to_owned()
    } else {
        format!("{parent}.{field}")
    }
}

/// `parent[index]`.
pub(crate) fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_omits_an_empty_path_and_joins_errors_by_line() {
        let a = ConfigError {
            file: "a.yaml".into(),
            path: String::new(),
            message: "boom".into(),
            hint: None,
        };
        let b = ConfigError {
            file: "b.yaml".into(),
            path: "domain".into(),
            message: "bad".into(),
            hint: Some("try this".into()),
        };
        assert_eq!(a.to_string(), "a.yaml: boom");
        assert_eq!(b.to_string(), "b.yaml: domain: bad (try this)");
        assert_eq!(
            ConfigErrors(vec![a, b]).to_string(),
            "a.yaml: boom\nb.yaml: domain: bad (try this)"
        );
    }
}
