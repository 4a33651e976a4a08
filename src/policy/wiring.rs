//! The policy database's part of startup: open it (or say loudly that it cannot be, enforce its
//! last good copy and retry), put its rules in service next to the files, start its refresh,
//! copy and purge tasks, and hand the limiter its override index and the admin listener the
//! database and tokens. The violation log's part is `violations::start`.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::postgres;
use super::purge::{Retention, Table, retention_loop};
use super::rules::{Rule, to_files};
use super::token_file::TokenError;
use super::{Overrides, Policy, PolicySettings, Tokens};
use crate::background::Background;
use crate::reload::Reloading;
use ratelimitd_core::clock::Clock;

/// What the policy database shares with the rest of the process.
#[derive(Debug)]
pub(crate) struct PolicyDeps<'a> {
    /// The clock of expiry and purges.
    pub clock: &'a Arc<dyn Clock>,
    /// The configuration pipeline the database's rules are compiled into.
    pub reloading: &'a Reloading,
    /// Where the refresh, copy, purge and retry tasks run.
    pub background: Background<'a>,
}

/// The started policy database.
#[derive(Debug)]
pub(crate) struct PolicyHandle {
    /// The stored overrides' index, which the limiter reads.
    pub overrides: Arc<Overrides>,
    /// The database (open, or being retried), or why the policy API is off.
    pub policy: Result<Arc<Policy>, Arc<str>>,
    /// The admin API's bearer tokens.
    pub tokens: Arc<Tokens>,
}

/// Starts the policy database. A database that cannot be opened is logged at ERROR, makes the
/// service not ready until it opens (retried in the background) and has its last good copy
/// enforced meanwhile; only an unreadable token file stops startup, since it is a mistake the
/// operator must see.
pub(crate) async fn start(
    options: &PolicySettings,
    deps: PolicyDeps<'_>,
) -> Result<PolicyHandle, TokenError> {
    let PolicyDeps {
        clock,
        reloading,
        background: mut bg,
    } = deps;
    let tokens = Tokens::from_settings(options)?;
    let overrides = Arc::new(Overrides::default());
    let policy = match Policy::new(options, clock.clone(), overrides.clone()) {
        Ok(p) => {
            let p = Arc::new(p);
            let changed = Arc::new(Notify::new());
            let applied = open_or_restore(&p, options, reloading, &changed, &mut bg).await;
            let interval = options.refresh_interval;
            bg.spawn(p.clone().refresh_loop(interval, bg.stopped()));
            bg.spawn(p.clone().snapshot_loop(bg.stopped()));
            let purge = Retention {
                table: Table::ExpiredOverrides,
                keep: options.expired_retention,
                interval: options.purge_interval,
            };
            let (db, c) = (p.store().clone(), clock.clone());
            bg.spawn(retention_loop(db, c, purge, bg.stopped()));
            if let Some(url) = &options.db_url {
                bg.spawn(postgres::listen(
                    url.0.clone(),
                    changed.clone(),
                    bg.stopped(),
                ));
            }
            let (p2, r) = (p.clone(), reloading.clone());
            let sync = Triggers { changed, interval };
            bg.spawn(rules_loop(p2, r, applied, sync, bg.stopped()));
            Ok(p)
        }
        Err(why) => {
            tracing::info!(reason = %why, "policy API is off; serving the configuration files only");
            Err(Arc::from(why.as_str()))
        }
    };
    Ok(PolicyHandle {
        overrides,
        policy,
        tokens: Arc::new(tokens),
    })
}

/// Opens the database and puts its rules in service; or, when it cannot be opened, says so at
/// ERROR, turns the `policy_db` health component off, puts the last good copy in service and
/// starts the background retry (which, once open, turns it on and has [`rules_loop`] re-read
/// everything through `changed`). Returns the rules in service.
async fn open_or_restore(
    p: &Arc<Policy>,
    options: &PolicySettings,
    reloading: &Reloading,
    changed: &Arc<Notify>,
    bg: &mut Background<'_>,
) -> Option<Vec<Rule>> {
    let why = match p.try_open(options).await {
        Ok(()) => {
            tracing::info!(db = p.db_name(), "policy API on");
            return apply_rules(p, reloading, None).await;
        }
        Err(why) => why,
    };
    let health = reloading.health().clone();
    health.set_policy_db_ready(false).await;
    let applied = match p.restore_snapshot().await {
        Ok(copy) => {
            tracing::error!(
                db = p.db_name(),
                reason = %why,
                last_good_copy = %options.snapshot_path().unwrap_or_default().display(),
                written_at = copy.written_at,
                overrides = copy.overrides,
                rules = copy.rules.len(),
                "policy database cannot be opened: stored overrides and rules are NOT enforced from it; \
                 enforcing its last good copy meanwhile; not ready; retrying in the background"
            );
            let rules = copy.rules;
            match reloading.set_extra(to_files(&rules)).await {
                Ok(_) => Some(rules),
                Err(e) => {
                    tracing::error!(
                        "the last good copy's rules do not compile with the files; not applied: {}",
                        crate::reload::one_line(&e.to_string())
                    );
                    None
                }
            }
        }
        Err(no_copy) => {
            tracing::error!(
                db = p.db_name(),
                reason = %why,
                last_good_copy = %no_copy,
                "policy database cannot be opened: stored overrides and rules are NOT enforced; \
                 not ready; retrying in the background"
            );
            None
        }
    };
    let (p, policy) = (p.clone(), options.clone());
    let (changed, stop) = (changed.clone(), bg.stopped());
    bg.spawn(async move {
        if p.reopen_loop(&policy, policy.refresh_interval, stop).await {
            tracing::info!(
                db = p.db_name(),
                "policy database open: its overrides and rules are enforced; ready"
            );
            health.set_policy_db_ready(true).await;
            changed.notify_one();
        }
    });
    applied
}

/// Reads the rules and, when they differ from `applied`, compiles them with the files into a new
/// snapshot. Returns the rules in service afterwards (`applied` again when reading or compiling
/// failed: the snapshot in service stays).
async fn apply_rules(
    policy: &Policy,
    reloading: &Reloading,
    applied: Option<Vec<Rule>>,
) -> Option<Vec<Rule>> {
    if !policy.is_open() {
        // The opener retries and logs; the rules in service (the last good copy's) stay.
        return applied;
    }
    let rules = match policy.rules().await {
        Ok(rules) => rules,
        Err(e) => {
            tracing::warn!(error = %e, "policy rules not read; keeping the configuration in service");
            return applied;
        }
    };
    if applied.as_ref() == Some(&rules) || (applied.is_none() && rules.is_empty()) {
        return Some(rules);
    }
    match reloading.set_extra(to_files(&rules)).await {
        Ok(_) => Some(rules),
        Err(e) => {
            tracing::error!(
                "policy rules do not compile with the files; not applied: {}",
                crate::reload::one_line(&e.to_string())
            );
            applied
        }
    }
}

/// When [`rules_loop`] re-reads: on every change notification, else every `interval`.
struct Triggers {
    changed: Arc<Notify>,
    interval: Duration,
}

/// Re-reads the rules (and, on a notification, the overrides) until `stop`, so a change written
/// by another instance is in service here at once with PostgreSQL, and within the interval
/// whatever happens to the notifications.
async fn rules_loop(
    policy: Arc<Policy>,
    reloading: Reloading,
    mut applied: Option<Vec<Rule>>,
    sync: Triggers,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            _ = tokio::time::sleep(sync.interval) => {}
            _ = sync.changed.notified() => {
                if let Err(e) = policy.refresh().await {
                    tracing::warn!(error = %e, "policy overrides not read; keeping those in service");
                }
            }
        }
        applied = apply_rules(&policy, &reloading, applied).await;
    }
}
