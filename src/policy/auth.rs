//! Bearer tokens of the management API: `ADMIN_TOKEN` (named `admin`) and `ADMIN_TOKEN_FILE`
//! (`name:token` per line). With none configured every request is refused — the API is never
//! open. A token's name is who the change log says made a change.
//!
//! Tokens are trimmed when loaded and when presented, so a Secret or file written with a trailing
//! newline works. Only SHA-256 digests of them are kept: a presented token is hashed and compared
//! with every configured digest over the digest's fixed 32 bytes, without an early exit, so neither
//! the time of a refusal nor its cause tells a guesser the token's length or how much was right.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::PolicySettings;
use crate::secret::Secret;

/// A token's SHA-256.
type Fingerprint = [u8; 32];

/// The accepted tokens (as digests) and their names.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    tokens: Vec<(String, Fingerprint)>,
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
    /// The file has no token line (only comments or blank lines).
    #[error("ADMIN_TOKEN_FILE {path}: no name:token line (an empty file would leave the API off)")]
    Empty {
        /// The file.
        path: String,
    },
}

impl Tokens {
    /// The tokens the options name: `ADMIN_TOKEN` (named `admin`) and the lines of
    /// `ADMIN_TOKEN_FILE` (the file is read once, at startup).
    pub(crate) fn from_settings(s: &PolicySettings) -> Result<Tokens, TokenError> {
        Tokens::load(s.admin_token.as_ref(), s.admin_token_file.as_deref())
    }

    fn load(admin: Option<&Secret>, file: Option<&Path>) -> Result<Tokens, TokenError> {
        let mut named = Vec::new();
        if let Some(t) = admin {
            named.push(("admin".to_string(), t.0.clone()));
        }
        if let Some(path) = file {
            named.extend(read_file(path)?);
        }
        Ok(Tokens::new(named))
    }

    /// Tokens from `(name, token)` pairs; each token is trimmed.
    pub(crate) fn new(named: impl IntoIterator<Item = (String, String)>) -> Tokens {
        let tokens = named
            .into_iter()
            .map(|(name, token)| (name, fingerprint(token.trim())))
            .collect();
        Tokens { tokens }
    }

    /// True when at least one token is configured.
    pub(crate) fn any(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// How many tokens are configured.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The name of the token in an `Authorization` header value (`Bearer <token>`, the scheme in
    /// any case), if it is one of ours.
    pub(crate) fn check(&self, header: Option<&str>) -> Option<&str> {
        let given = fingerprint(bearer(header?)?);
        // Every configured token is compared, whichever matches.
        let mut found = None;
        for (name, t) in &self.tokens {
            if same(t, &given) {
                found = Some(name.as_str());
            }
        }
        found
    }
}

/// The token of a `Bearer` credential, trimmed; `None` for another scheme or an empty token.
fn bearer(header: &str) -> Option<&str> {
    let header = header.trim_start();
    let (scheme, token) = header.split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn fingerprint(token: &str) -> Fingerprint {
    Sha256::digest(token.as_bytes()).into()
}

/// Compares two digests over all their bytes, without returning early on the first difference.
fn same(a: &Fingerprint, b: &Fingerprint) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
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
    if out.is_empty() {
        return Err(TokenError::Empty { path: shown });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_token_and_file_tokens_with_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens");
        std::fs::write(&file, "# ops team\nalice:a-secret\n\nci: c-secret \n").unwrap();
        let admin = Secret("env-secret".to_string());
        let load = || Tokens::load(Some(&admin), Some(&file));
        let t = load().unwrap();
        assert_eq!(t.check(Some("Bearer env-secret")), Some("admin"));
        assert_eq!(t.check(Some("Bearer a-secret")), Some("alice"));
        assert_eq!(t.check(Some("Bearer c-secret")), Some("ci"));
        assert_eq!(t.check(Some("Bearer a-secre")), None);
        assert_eq!(t.check(Some("a-secret")), None);
        assert_eq!(t.check(None), None);
        std::fs::write(&file, "alice\n").unwrap();
        let err = load().unwrap_err().to_string();
        assert!(err.ends_with("line 1: expected name:token"), "{err}");
        std::fs::write(&file, "# nobody yet\n\n").unwrap();
        let err = load().unwrap_err().to_string();
        assert!(err.contains("no name:token line"), "{err}");
        assert!(!Tokens::default().any());
    }

    #[test]
    fn scheme_in_any_case_and_both_sides_trimmed() {
        let t = Tokens::new([("ops".to_string(), " s3cret\n".to_string())]);
        for ok in [
            "Bearer s3cret",
            "bearer s3cret",
            "BEARER  s3cret \r\n",
            "\tbearer\ts3cret",
        ] {
            assert_eq!(t.check(Some(ok)), Some("ops"), "{ok:?}");
        }
        for refused in [
            "Bearer",
            "Bearer ",
            "Basic s3cret",
            "Bearers3cret",
            "Token s3cret",
        ] {
            assert_eq!(t.check(Some(refused)), None, "{refused:?}");
        }
        // An empty configured token matches nothing presented.
        assert_eq!(
            Tokens::new([("x".into(), String::new())]).check(Some("Bearer ")),
            None
        );
    }
}
