//! Bearer tokens of the management API: `ADMIN_TOKEN` (named `admin`) and `ADMIN_TOKEN_FILE`
//! (`name:token` per line). With none configured every request is refused — the API is never
//! open. A token's name is who the change log says made a change.

use std::path::Path;

use crate::settings::PolicySettings;

/// The accepted tokens and their names.
#[derive(Clone, Default)]
pub struct Tokens {
    tokens: Vec<(String, String)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tokens.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Tokens").field("names", &names).finish()
    }
}

/// A token file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("ADMIN_TOKEN_FILE {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not `name:token` with both parts non-empty.
    #[error("ADMIN_TOKEN_FILE {path} line {line}: expected name:token")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
    },
}

impl Tokens {
    /// The tokens the settings name (the file is read once, at startup).
    pub fn from_settings(s: &PolicySettings) -> Result<Tokens, TokenError> {
        let mut tokens = Vec::new();
        if let Some(t) = &s.admin_token {
            tokens.push(("admin".to_string(), t.0.clone()));
        }
        if let Some(path) = &s.admin_token_file {
            tokens.extend(read_file(path)?);
        }
        Ok(Tokens { tokens })
    }

    /// True when at least one token is configured.
    pub fn any(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The name of the token in an `Authorization` header value, if it is one of ours.
    pub fn check(&self, header: Option<&str>) -> Option<&str> {
        let given = header?.strip_prefix("Bearer ")?.trim();
        self.tokens
            .iter()
            .find(|(_, t)| same(t.as_bytes(), given.as_bytes()))
            .map(|(n, _)| n.as_str())
    }
}

/// Compares without returning early on the first differing byte, so response time does not tell
/// how much of a guess was right.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn read_file(path: &Path) -> Result<Vec<(String, String)>, TokenError> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
        path: shown.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once(':') {
            Some((name, token)) if !name.trim().is_empty() && !token.trim().is_empty() => {
                out.push((name.trim().to_string(), token.trim().to_string()));
            }
            _ => {
                return Err(TokenError::Line {
                    path: shown,
                    line: i + 1,
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Settings;

    #[test]
    fn env_token_and_file_tokens_with_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens");
        std::fs::write(&file, "# ops team\nalice:a-secret\n\nci: c-secret \n").unwrap();
        let s = Settings::from_env([
            ("ADMIN_TOKEN".to_string(), "env-secret".to_string()),
            ("ADMIN_TOKEN_FILE".to_string(), file.display().to_string()),
        ])
        .unwrap();
        let t = Tokens::from_settings(&s.policy).unwrap();
        assert_eq!(t.check(Some("Bearer env-secret")), Some("admin"));
        assert_eq!(t.check(Some("Bearer a-secret")), Some("alice"));
        assert_eq!(t.check(Some("Bearer c-secret")), Some("ci"));
        assert_eq!(t.check(Some("Bearer a-secre")), None);
        assert_eq!(t.check(Some("a-secret")), None);
        assert_eq!(t.check(None), None);
        std::fs::write(&file, "alice\n").unwrap();
        let err = Tokens::from_settings(&s.policy).unwrap_err().to_string();
        assert!(err.ends_with("line 1: expected name:token"), "{err}");
        assert!(!Tokens::default().any());
    }
}
