//! Bearer tokens of the management API: `ADMIN_TOKEN` (named `admin`), `ADMIN_TOKEN_FILE`
//! (`name:token` per line) and `ADMIN_TOKENS_FILE` (`name:token[:role]` per line, the role `admin`
//! or `read`, and a file readable by its owner only; both read by [`super::token_file`]). With none configured every request is
//! refused — the API is never open. A token's name is who the change log and the policy history
//! say made a change; a [`Role::Read`] token may read everything but change nothing.
//!
//! Tokens are trimmed when loaded and when presented, so a Secret or file written with a trailing
//! newline works. Only SHA-256 digests of them are kept: a presented token is hashed and compared
//! with every configured digest over the digest's fixed 32 bytes, without an early exit, so neither
//! the time of a refusal nor its cause tells a guesser the token's length or how much was right.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::PolicySettings;
use super::token_file::{Format, TokenError, read_file};
use crate::secret::Secret;

/// A token's SHA-256.
type Fingerprint = [u8; 32];

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// Everything: read, change rules and overrides, roll back.
    Admin,
    /// Read only: the console, the lists, the history, explain; every write answers 403.
    Read,
}

/// The accepted tokens (as digests), their names and roles.
#[derive(Clone, Default)]
pub(crate) struct Tokens {
    tokens: Vec<(String, Fingerprint, Role)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.tokens.iter().map(|(n, ..)| n.as_str()).collect();
        f.debug_struct("Tokens").field("names", &names).finish()
    }
}

impl Tokens {
    /// The tokens the options name: `ADMIN_TOKEN` (named `admin`), the lines of
    /// `ADMIN_TOKEN_FILE` and of `ADMIN_TOKENS_FILE` (the files are read once, at startup).
    pub(crate) fn from_settings(s: &PolicySettings) -> Result<Tokens, TokenError> {
        Tokens::from_sources(
            s.admin_token.as_ref(),
            s.admin_token_file.as_deref(),
            s.admin_tokens_file.as_deref(),
        )
    }

    /// The tokens of `token` (named `admin`), the lines of `token_file` (`name:token`) and of
    /// `tokens_file` (`name:token[:role]`).
    fn from_sources(
        token: Option<&Secret>,
        token_file: Option<&Path>,
        tokens_file: Option<&Path>,
    ) -> Result<Tokens, TokenError> {
        let mut t = Tokens::load(token, token_file)?;
        if let Some(path) = tokens_file {
            let taken: Vec<String> = t.tokens.iter().map(|(n, ..)| n.clone()).collect();
            for (name, token, role) in read_file(path, Format::WithRoles, &taken)? {
                t.tokens.push((name, fingerprint(token.trim()), role));
            }
        }
        Ok(t)
    }

    fn load(admin: Option<&Secret>, file: Option<&Path>) -> Result<Tokens, TokenError> {
        let mut named = Vec::new();
        if let Some(t) = admin {
            named.push(("admin".to_string(), t.0.clone()));
        }
        let mut t = Tokens::new(named);
        if let Some(path) = file {
            for (name, token, role) in read_file(path, Format::Plain, &[])? {
                t.tokens.push((name, fingerprint(token.trim()), role));
            }
        }
        Ok(t)
    }

    /// Admin tokens from `(name, token)` pairs; each token is trimmed.
    pub(crate) fn new(named: impl IntoIterator<Item = (String, String)>) -> Tokens {
        let tokens = named
            .into_iter()
            .map(|(name, token)| (name, fingerprint(token.trim()), Role::Admin))
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
        self.check_role(header).map(|(name, _)| name)
    }

    /// As [`Tokens::check`], with the token's role.
    pub(crate) fn check_role(&self, header: Option<&str>) -> Option<(&str, Role)> {
        let given = fingerprint(bearer(header?)?);
        // Every configured token is compared, whichever matches.
        let mut found = None;
        for (name, t, role) in &self.tokens {
            if same(t, &given) {
                found = Some((name.as_str(), *role));
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
    fn tokens_file_with_roles_names_lines_and_never_shows_a_token() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("tokens");
        let write = |text: &str, mode: u32| {
            std::fs::write(&file, text).unwrap();
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        let load = || Tokens::from_sources(None, None, Some(&file));
        write(
            "# team\nalice:a-secret:admin\n\nbob: b-secret :read\nci:c-secret\n",
            0o600,
        );
        let t = load().unwrap();
        assert_eq!(
            t.check_role(Some("Bearer a-secret")),
            Some(("alice", Role::Admin))
        );
        assert_eq!(
            t.check_role(Some("Bearer b-secret")),
            Some(("bob", Role::Read))
        );
        assert_eq!(
            t.check_role(Some("Bearer c-secret")),
            Some(("ci", Role::Admin))
        );
        for (text, says) in [
            ("ok:fine\nbob:sekrit-token:owner\n", "line 2: unknown role"),
            (
                "\n\nbob:sekrit-token:read:x\n",
                "line 3: expected name:token[:role]",
            ),
            (
                "# c\n:sekrit-token\n",
                "line 2: expected name:token[:role] with a name",
            ),
            (
                "a:sekrit-token\na:other-token\n",
                "line 2: the name 'a' is used already",
            ),
            ("# nobody\n", "no name:token line"),
        ] {
            write(text, 0o600);
            let err = load().unwrap_err().to_string();
            assert!(err.contains(says), "{text:?}: {err}");
            assert!(err.starts_with("ADMIN_TOKENS_FILE "), "{err}");
            assert!(
                !err.contains("sekrit") && !err.contains("other-token"),
                "{err}"
            );
        }
        for mode in [0o644, 0o640, 0o604, 0o620] {
            write("ok:sekrit-token\n", mode);
            let err = load().unwrap_err().to_string();
            assert!(err.contains(&format!("permissions {mode:o}")), "{err}");
            assert!(!err.contains("sekrit"), "{err}");
        }
        write("ok:sekrit-token\n", 0o400);
        assert!(load().is_ok(), "owner read-only is fine");
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
