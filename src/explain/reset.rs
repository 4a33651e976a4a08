//! Resetting what a client has used: the counters a descriptor's limits touch (planned exactly
//! as [`super::Explainer::explain`] plans them, so the same matching, overrides and keys), or the
//! keys under a prefix of one domain, a bounded number per call. The store forgets each key
//! whatever its algorithm, and this instance's lease and over-limit cache entry on it
//! ([`ratelimitd_core::store::Store::reset`]). Served by `POST /v1/counters/reset` and
//! `ratelimitd reset`.

use std::time::Duration;

use super::{Explainer, MAX_ENTRIES, MAX_TEXT};
use ratelimitd_core::config::FailureMode;
use ratelimitd_core::limiter::plan::{self, Plan};
use ratelimitd_core::limiter::{Descriptor, Entry, Request};
use ratelimitd_core::store::ResetError;

/// Most keys one prefix reset removes when the caller names no bound.
pub(crate) const DEFAULT_MAX_KEYS: usize = 1000;
/// Most keys one prefix reset may remove.
pub(crate) const MAX_KEYS: usize = 10_000;
/// How long the store may take before the reset answers "unavailable".
const WAIT: Duration = Duration::from_secs(10);

/// What to reset in a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ResetTarget {
    /// The counters of every limit this descriptor's request would touch.
    Descriptor(Vec<(String, String)>),
    /// Every key starting with `prefix` (a cache key's beginning), at most `max_keys`.
    Prefix {
        /// The beginning of the keys.
        prefix: String,
        /// The bound of this call.
        max_keys: usize,
    },
}

impl ResetTarget {
    /// The target as the audit line and the answer name it.
    pub(crate) fn describe(&self) -> String {
        match self {
            ResetTarget::Descriptor(entries) => {
                let pairs: Vec<String> = entries.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("descriptor {}", pairs.join(","))
            }
            ResetTarget::Prefix { prefix, .. } => format!("prefix {prefix}"),
        }
    }
}

/// What a reset did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResetDone {
    /// The counter keys aimed at: a descriptor's limits, or the keys a prefix scan found.
    pub keys: Vec<String>,
    /// How many of them held state and were removed.
    pub reset: u64,
    /// A prefix reset stopped at its bound: calling again removes more.
    pub more: bool,
}

/// Why a reset was refused; nothing was changed, except for [`ResetRefused::Unavailable`] (part
/// of the keys may be gone).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ResetRefused {
    /// The configuration has no such domain (404).
    #[error("no domain '{0}' in the configuration; loaded: {1}")]
    UnknownDomain(String, String),
    /// A field is missing, empty, too large or outside the domain (422): the field, then why.
    #[error("{0}: {1}")]
    Invalid(String, String),
    /// The store in service cannot do this kind of reset (409).
    #[error("{0}")]
    Unsupported(String),
    /// The store failed or did not answer in time (503).
    #[error("the store did not complete the reset: {0}")]
    Unavailable(String),
}

fn invalid(field: &str, why: impl Into<String>) -> ResetRefused {
    ResetRefused::Invalid(field.to_string(), why.into())
}

impl Explainer {
    /// Resets `target` in `domain` now.
    pub(crate) async fn reset(
        &self,
        domain: &str,
        target: &ResetTarget,
    ) -> Result<ResetDone, ResetRefused> {
        let snapshot = self.config.snapshot();
        let config = snapshot.as_ref().map(|s| &s.config);
        let Some(found) = config.and_then(|c| c.domain(domain)) else {
            let names: Vec<&str> = config
                .map(|c| c.domains().map(|d| d.name.as_str()).collect())
                .unwrap_or_default();
            let loaded = if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            };
            return Err(ResetRefused::UnknownDomain(domain.to_string(), loaded));
        };
        let now = self.clock.now();
        match target {
            ResetTarget::Descriptor(entries) => {
                check_entries(entries)?;
                let req = Request::new(
                    domain,
                    vec![Descriptor {
                        entries: entries.iter().map(|(k, v)| Entry::new(k, v)).collect(),
                        hits_addend: Some(0),
                        ..Descriptor::default()
                    }],
                );
                let stored = self.overrides.load();
                let still = ratelimitd_core::random::Fixed(0.0);
                let plans = plan::plan(
                    Some(found),
                    &stored,
                    &req,
                    &self.keys,
                    now,
                    &still,
                    FailureMode::default(),
                )
                .map_err(|e| invalid("descriptor", e.to_string()))?;
                if !matches!(plans.descriptors.first(), Some(Plan::Limited(_))) {
                    return Err(invalid(
                        "descriptor",
                        format!("no limit of domain '{domain}' counts this descriptor"),
                    ));
                }
                // A split limit's counter is every one of its sub-keys.
                let (ops, _) = super::every_sub_key(&plans);
                let keys = ops.iter().map(|op| op.key.clone()).collect();
                let reset = bounded(self.store.reset(&ops, now))
                    .await?
                    .map_err(|e| ResetRefused::Unavailable(e.to_string()))?;
                Ok(ResetDone {
                    keys,
                    reset,
                    more: false,
                })
            }
            ResetTarget::Prefix { prefix, max_keys } => {
                if *max_keys == 0 || *max_keys > MAX_KEYS {
                    return Err(invalid("max_keys", format!("expected 1 to {MAX_KEYS}")));
                }
                let others = config.map(|c| c.domains().map(|d| d.name.as_str()));
                self.check_prefix(domain, prefix, others)?;
                let done = bounded(self.store.reset_prefix(prefix, *max_keys, now))
                    .await?
                    .map_err(|e| match e {
                        ResetError::Unsupported(why) => ResetRefused::Unsupported(why),
                        ResetError::Store(e) => ResetRefused::Unavailable(e.to_string()),
                    })?;
                Ok(ResetDone {
                    keys: Vec::new(),
                    reset: done.reset,
                    more: done.more,
                })
            }
        }
    }

    /// A prefix must name keys of `domain` only: it starts with one of the domain's key roots
    /// (see [`ratelimitd_core::limiter::KeyBuilder::domain_roots`]), and a Go-format root may not
    /// also be the beginning of another loaded domain's keys.
    fn check_prefix<'a>(
        &self,
        domain: &str,
        prefix: &str,
        others: Option<impl Iterator<Item = &'a str>>,
    ) -> Result<(), ResetRefused> {
        if prefix.len() > MAX_TEXT * 4 {
            return Err(invalid(
                "prefix",
                format!("expected at most {} bytes", MAX_TEXT * 4),
            ));
        }
        let (safe, go) = self.keys.domain_roots(domain);
        if prefix.starts_with(&safe) {
            return Ok(());
        }
        if go.as_ref().is_some_and(|g| prefix.starts_with(g.as_str())) {
            let clash = others.into_iter().flatten().find(|other| {
                *other != domain && {
                    let (_, other_go) = self.keys.domain_roots(other);
                    other_go.is_some_and(|o| o.starts_with(prefix) || prefix.starts_with(&o))
                }
            });
            return match clash {
                None => Ok(()),
                Some(other) => Err(invalid(
                    "prefix",
                    format!(
                        "'{prefix}' also begins keys of domain '{other}' (CACHE_KEY_FORMAT=go keys \
                         are not told apart by domain): make it longer or reset by descriptor"
                    ),
                )),
            };
        }
        let mut accepted = format!("'{safe}'");
        if let Some(go) = go {
            accepted += &format!(" or '{go}'");
        }
        Err(invalid(
            "prefix",
            format!("'{prefix}' is outside domain '{domain}': its keys begin with {accepted}"),
        ))
    }
}

/// Checks a descriptor's entries: 1 to [`MAX_ENTRIES`], keys 1 to [`MAX_TEXT`] bytes.
fn check_entries(entries: &[(String, String)]) -> Result<(), ResetRefused> {
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return Err(invalid(
            "descriptor",
            format!("expected 1 to {MAX_ENTRIES} entries"),
        ));
    }
    for (i, (k, v)) in entries.iter().enumerate() {
        if k.is_empty() || k.len() > MAX_TEXT {
            return Err(invalid(
                &format!("descriptor[{i}].key"),
                format!("expected 1 to {MAX_TEXT} bytes"),
            ));
        }
        if v.len() > MAX_TEXT {
            return Err(invalid(
                &format!("descriptor[{i}].value"),
                format!("expected at most {MAX_TEXT} bytes"),
            ));
        }
    }
    Ok(())
}

/// `call`, or "unavailable" after [`WAIT`].
async fn bounded<T>(call: impl Future<Output = T>) -> Result<T, ResetRefused> {
    tokio::time::timeout(WAIT, call)
        .await
        .map_err(|_| ResetRefused::Unavailable(format!("no answer within {WAIT:?}")))
}
