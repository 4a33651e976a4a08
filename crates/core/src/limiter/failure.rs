//! The per-limit failure policy (`rate_limit.failure_mode`, `docs/design/contract.md#extensions`):
//! what a limit gets when the store did not answer its op (the call failed or timed out, or the
//! target's circuit breaker is open). By default (`error`) the request fails with UNAVAILABLE, as
//! in the Go service, and Envoy's `failure_mode_deny` decides. When every unanswered limit says
//! `allow`, `deny` or `local`, the service answers instead: `allow` limits are not enforced, `deny`
//! limits are over the limit until their window ends, `local` limits are decided by the
//! [`LocalFallback`]. A limit without a `failure_mode` takes the service's `DEFAULT_FAILURE_MODE`.
//! This is the one producer of [`Source::FailurePolicy`] and [`Source::Breaker`] outcomes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::fallback::LocalFallback;
use super::outcome::{Outcome, Source, Verdict};
use super::plan::{Plan, Plans};
use super::stats::ErrorKind;
use crate::clock::Timestamp;
use crate::config::{FailureMode, Limit};
use crate::store::{Answer, StoreError};

/// Seconds between two log lines about store failures.
const LOG_EVERY_SECS: u64 = 10;

/// Logs store failures at most once per [`LOG_EVERY_SECS`], with how many went unlogged since:
/// an outage must show in the log, but not as one line per request.
#[derive(Debug, Default)]
pub(crate) struct FailureLog {
    /// Unix second before which nothing more is logged.
    quiet_until: AtomicU64,
    /// Failures not logged since the last line.
    suppressed: AtomicU64,
}

impl FailureLog {
    /// Notes a failure at `now`; logs it unless a line went out less than
    /// [`LOG_EVERY_SECS`] ago.
    pub(crate) fn note(&self, error: &str, now: Timestamp) {
        let secs = now.as_secs();
        let quiet_until = self.quiet_until.load(Ordering::Relaxed);
        let won = secs >= quiet_until
            && self
                .quiet_until
                .compare_exchange(
                    quiet_until,
                    secs + LOG_EVERY_SECS,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok();
        if !won {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let suppressed = self.suppressed.swap(0, Ordering::Relaxed);
        tracing::warn!(
            %error,
            similar_failures_not_logged = suppressed,
            "the store could not decide; requests are answered by their limits' failure_mode"
        );
    }
}

/// What answers limits the store did not.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Degraded<'a> {
    /// `DEFAULT_FAILURE_MODE`.
    pub default_mode: FailureMode,
    /// The local fallback for `failure_mode: local`.
    pub fallback: &'a LocalFallback,
}

/// One outcome per op of `plans`: the store's answer where it gave one, else the limit's failure
/// policy. An error when some unanswered limit wants the error (`error`, or the local fallback
/// itself failing).
pub(crate) async fn resolve(
    plans: &Plans<'_>,
    answers: Result<Vec<Answer>, StoreError>,
    degraded: Degraded<'_>,
    now: Timestamp,
) -> Result<Vec<Outcome>, StoreError> {
    let mut out = Vec::with_capacity(plans.ops.len());
    for plan in &plans.descriptors {
        let Plan::Limited(l) = plan else { continue };
        for (i, limit) in l.ops.clone().zip(l.limit.all()) {
            let answer = answers.as_ref().ok().and_then(|a| a.get(i).copied());
            if let Some(o) = answer.and_then(|a| Outcome::from_answer(a, now)) {
                out.push(o);
                continue;
            }
            let (breaker_open, error) = match (answer, &answers) {
                (
                    Some(Answer::Unavailable {
                        target,
                        breaker_open,
                    }),
                    _,
                ) => {
                    let why = if breaker_open { " (breaker open)" } else { "" };
                    let e = format!("redis {target} did not answer{why}");
                    (breaker_open, StoreError::Unavailable(e))
                }
                (_, Err(e)) => (false, e.clone()),
                _ => (false, StoreError::Unavailable("no answer for an op".into())),
            };
            let mut mode = limit.failure_mode.unwrap_or(degraded.default_mode);
            let op = &plans.ops[i];
            // A concurrency release under the local fallback frees the holder's local slot (a
            // release never adds capacity, so it is safe there); its slot in the store ends with
            // its lease.
            let local_release = mode == FailureMode::Local
                && op.spec.algorithm == crate::algorithm::Algorithm::Concurrency;
            if op.refund && mode != FailureMode::Error && !local_release {
                // A refund that could not be applied takes nothing and denies nothing.
                mode = FailureMode::Allow;
            }
            out.push(match mode {
                FailureMode::Error => return Err(error),
                FailureMode::Local => degraded.fallback.outcome(op, limit, now).await?,
                _ => policy(limit, mode, breaker_open, now).ok_or(error)?,
            });
        }
    }
    Ok(out)
}

/// The `allow` / `deny` outcome for `limit` at `now`, tagged [`Source::Breaker`] when the breaker
/// answered; `None` for a limit without a window.
fn policy(limit: &Limit, mode: FailureMode, breaker_open: bool, now: Timestamp) -> Option<Outcome> {
    let verdict = match mode {
        FailureMode::Deny => {
            // Denied until the end of the limit's current window.
            let end = limit.window()?.bounds(now).end;
            let reset = Duration::from_secs(end.saturating_sub(now.as_secs()));
            Some(Verdict::over(reset))
        }
        _ => None,
    };
    let source = if breaker_open {
        Source::Breaker
    } else {
        Source::FailurePolicy
    };
    Some(Outcome { source, verdict })
}

/// What failed in a store call, if anything: the error stat it counts under (a full memory store
/// apart from a backend failure) and a line for the log.
pub(crate) fn describe(answers: &Result<Vec<Answer>, StoreError>) -> Option<(ErrorKind, String)> {
    match answers {
        Err(e @ StoreError::Full { .. }) => Some((ErrorKind::StoreFull, e.to_string())),
        Err(e) => Some((ErrorKind::Redis, e.to_string())),
        Ok(a) => a.iter().find_map(|a| match a {
            Answer::Unavailable {
                target,
                breaker_open,
            } => {
                let why = if *breaker_open { " (breaker open)" } else { "" };
                Some((
                    ErrorKind::Redis,
                    format!("redis {target} did not answer{why}"),
                ))
            }
            _ => None,
        }),
    }
}

/// True when some op was not answered by the store (for the store-call stat).
pub(crate) fn unanswered(answers: &[Answer]) -> bool {
    answers
        .iter()
        .any(|a| matches!(a, Answer::Unavailable { .. }))
}
