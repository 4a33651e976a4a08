//! A secret value (a password, a token, a database URL with credentials) that no log line, banner
//! or `Debug` print can show. Below every component: the Redis store, the policy database, the
//! admin listener and the fleet all carry one in their options.

use std::fmt;

/// A secret value (password, token): never printed by `Debug` or `Display`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "\"\""
        } else {
            "\"<redacted>\""
        })
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
