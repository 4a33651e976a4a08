//! The token files of the management API, read once at startup: `ADMIN_TOKEN_FILE` (`name:token`
//! per line, every token an admin) and `ADMIN_TOKENS_FILE` (`name:token[:role]` per line, readable
//! by its owner only). Blank lines and `#` comments are skipped; a name may be used once across
//! all the sources; a file without a token line is refused, since it would leave the API off. No
//! error ever shows a token.

use std::path::Path;

use super::auth::Role;

/// A token file that cannot be used. No variant ever carries a token.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("{setting} {path}: {source}")]
    Read {
        /// `ADMIN_TOKEN_FILE` or `ADMIN_TOKENS_FILE`.
        setting: &'static str,
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not of the file's form.
    #[error("{setting} {path} line {line}: {why}")]
    Line {
        /// `ADMIN_TOKEN_FILE` or `ADMIN_TOKENS_FILE`.
        setting: &'static str,
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what is expected (never the token).
        why: String,
    },
    /// The file has no token line (only comments or blank lines).
    #[error("{setting} {path}: no name:token line (an empty file would leave the API off)")]
    Empty {
        /// `ADMIN_TOKEN_FILE` or `ADMIN_TOKENS_FILE`.
        setting: &'static str,
        /// The file.
        path: String,
    },
    /// `ADMIN_TOKENS_FILE` may be read or written by others than its owner.
    #[error(
        "ADMIN_TOKENS_FILE {path}: permissions {mode:o} let others than its owner read or change it; \
         allow the owner only (chmod 600, or 400; a Kubernetes Secret volume: defaultMode 0400)"
    )]
    Permissions {
        /// The file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// One name is given twice (the history could not tell who).
    #[error(
        "{setting} {path} line {line}: the name '{name}' is used already (names must be unique)"
    )]
    Duplicate {
        /// `ADMIN_TOKEN_FILE` or `ADMIN_TOKENS_FILE`.
        setting: &'static str,
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// The repeated name.
        name: String,
    },
}

/// Which token file a line comes from: the older one knows no roles (a token may contain `:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    /// `ADMIN_TOKEN_FILE`: `name:token`, every token an admin.
    Plain,
    /// `ADMIN_TOKENS_FILE`: `name:token[:role]`, owner-only permissions.
    WithRoles,
}

impl Format {
    /// The setting that names a file of this format.
    fn setting(self) -> &'static str {
        match self {
            Format::Plain => "ADMIN_TOKEN_FILE",
            Format::WithRoles => "ADMIN_TOKENS_FILE",
        }
    }
}

/// The `(name, token, role)` lines of a token file of `format`; `taken` are names in use already.
pub(super) fn read_file(
    path: &Path,
    format: Format,
    taken: &[String],
) -> Result<Vec<(String, String, Role)>, TokenError> {
    let setting = format.setting();
    let shown = path.display().to_string();
    let read_error = |source| TokenError::Read {
        setting,
        path: shown.clone(),
        source,
    };
    if format == Format::WithRoles {
        owner_only(path, &shown)?;
    }
    let text = std::fs::read_to_string(path).map_err(read_error)?;
    let mut out: Vec<(String, String, Role)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| TokenError::Line {
            setting,
            path: shown.clone(),
            line: i + 1,
            why: why.to_string(),
        };
        let (name, token, role) = match format {
            Format::Plain => match line.split_once(':') {
                Some((name, token)) => (name.trim(), token.trim(), Role::Admin),
                None => return Err(bad("expected name:token")),
            },
            Format::WithRoles => {
                let parts: Vec<&str> = line.split(':').map(str::trim).collect();
                match parts.as_slice() {
                    [name, token] => (*name, *token, Role::Admin),
                    [name, token, "admin"] => (*name, *token, Role::Admin),
                    [name, token, "read"] => (*name, *token, Role::Read),
                    [_, _, _] => {
                        return Err(bad(
                            "unknown role (expected name:token[:role], role admin or read)",
                        ));
                    }
                    _ => {
                        return Err(bad(
                            "expected name:token[:role] (role admin or read; a token cannot contain ':')",
                        ));
                    }
                }
            }
        };
        if name.is_empty() || token.is_empty() {
            return Err(bad(match format {
                Format::Plain => "expected name:token",
                Format::WithRoles => "expected name:token[:role] with a name and a token",
            }));
        }
        if taken.iter().any(|n| n == name) || out.iter().any(|(n, ..)| n == name) {
            return Err(TokenError::Duplicate {
                setting,
                path: shown,
                line: i + 1,
                name: name.to_string(),
            });
        }
        out.push((name.to_string(), token.to_string(), role));
    }
    if out.is_empty() {
        return Err(TokenError::Empty {
            setting,
            path: shown,
        });
    }
    Ok(out)
}

/// Refuses a file that others than its owner may read or change.
#[cfg(unix)]
fn owner_only(path: &Path, shown: &str) -> Result<(), TokenError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|source| TokenError::Read {
        setting: Format::WithRoles.setting(),
        path: shown.to_string(),
        source,
    })?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TokenError::Permissions {
            path: shown.to_string(),
            mode,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn owner_only(_: &Path, _: &str) -> Result<(), TokenError> {
    Ok(())
}
