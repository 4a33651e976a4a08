//! The policy database's part of startup: open it (or say loudly that it cannot be, enforce its
//! last good copy and retry), put its rules in service next to the files, start its refresh,
//! copy and purge tasks, and hand
//! the limiter its override index and the admin listener its state; then the violation log
//! ([`violation_log`]): its observer for the limiter, its writer and retention tasks.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;

use super::AppError;
use super::tasks::stopped;
use crate::clock::Clock;
use crate::http::admin::AdminState;
use crate::limiter::Observers;
use crate::metrics::Metrics;
use crate::policy::postgres;
use crate::policy::purge::{Retention, Table, retention_loop};
use crate::policy::rules::{Rule, to_files};
use crate::policy::violations::{Pending, ViolationLog, writer};
use crate::policy::{Overrides, Policy, Tokens};
use crate::reload::Reloading;
use crate::settings::Settings;

/// The override index the limiter reads and the admin API's state. A database that cannot be
/// opened is logged at ERROR, makes the service not ready until it opens (retried in the
/// background) and has its last good copy enforced meanwhile; only an unreadable token file
/// stops startup, since it is a mistake the operator must see.
pub(super) async fn start(
    settings: &Settings,
    (clock, reloading): (&Arc<dyn Clock>, &Reloading),
    tasks: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) -> Result<(Arc<Overrides>, AdminState), AppError> {
    let tokens = Tokens::from_settings(&settings.policy).map_err(AppError::AdminTokens)?;
    let overrides = Arc::new(Overrides::default());
    let policy = match Policy::new(&settings.policy, clock.clone(), overrides.clone()) {
        Ok(p) => {
            let p = Arc::new(p);
            let changed = Arc::new(Notify::new());
            let applied = open_or_restore(&p, settings, reloading, &changed, (tasks, stop)).await;
            let interval = settings.policy.refresh_interval;
            tasks.spawn(p.clone().refresh_loop(interval, stopped(stop.clone())));
            tasks.spawn(p.clone().snapshot_loop(stopped(stop.clone())));
            let purge = Retention {
                table: Table::ExpiredOverrides,
                keep: settings.policy.expired_retention,
                interval: settings.policy.purge_interval,
            };
            let (db, c) = (p.store().clone(), clock.clone());
            tasks.spawn(retention_loop(db, c, purge, stopped(stop.clone())));
            if let Some(url) = &settings.policy.db_url {
                let listen =
                    postgres::listen(url.0.clone(), changed.clone(), stopped(stop.clone()));
                tasks.spawn(listen);
            }
            let (p2, r) = (p.clone(), reloading.clone());
            let sync = Triggers { changed, interval };
            tasks.spawn(rules_loop(p2, r, applied, sync, stopped(stop.clone())));
            Ok(p)
        }
        Err(why) => {
            tracing::info!(reason = %why, "policy API is off; serving the configuration files only");
            Err(Arc::from(why.as_str()))
        }
    };
    let admin = AdminState {
        policy,
        tokens: Arc::new(tokens),
        reloading: reloading.clone(),
        insight: None,
        explainer: None,
    };
    Ok((overrides, admin))
}

/// Opens the database and puts its rules in service; or, when it cannot be opened, says so at
/// ERROR, turns the `policy_db` health component off, puts the last good copy in service and
/// starts the background retry (which, once open, turns it on and has [`rules_loop`] re-read
/// everything through `changed`). Returns the rules in service.
async fn open_or_restore(
    p: &Arc<Policy>,
    settings: &Settings,
    reloading: &Reloading,
    changed: &Arc<Notify>,
    (tasks, stop): (&mut JoinSet<()>, &watch::Receiver<bool>),
) -> Option<Vec<Rule>> {
    let why = match p.try_open(&settings.policy).await {
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
                last_good_copy = %settings.policy.snapshot_path().unwrap_or_default().display(),
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
                        "the last good copy's rules do not compile with the files; not applied:\n{e}"
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
    let (p, policy) = (p.clone(), settings.policy.clone());
    let (changed, stop) = (changed.clone(), stopped(stop.clone()));
    tasks.spawn(async move {
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
            tracing::error!("policy rules do not compile with the files; not applied:\n{e}");
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

/// The violation log's observers (none when `VIOLATIONS_LOG=off`, or `db` without a database):
/// its bounded map of pending records, the writer draining it and, with a database, the retention task.
pub(super) fn violation_log(
    settings: &Settings,
    (admin, metrics, clock): (&AdminState, &Option<Arc<Metrics>>, &Arc<dyn Clock>),
    tasks: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) -> Observers {
    let v = &settings.policy.violations;
    let mut observers = Observers::default();
    let db = match &admin.policy {
        Ok(p) if v.sinks.db() => Some(p.store().clone()),
        _ => None,
    };
    if db.is_none() && !v.sinks.json() {
        tracing::info!(sinks = ?v.sinks, "violation log off (no policy database to write to)");
        return observers;
    }
    let pending = Arc::new(Pending::new(v.queue_size));
    let instance: Arc<str> = v.instance_id.clone().unwrap_or_else(host_name).into();
    let log = ViolationLog::new(pending.clone(), instance, metrics.clone());
    observers.push(Arc::new(log));
    if let Some(db) = &db
        && v.retention_days > 0
    {
        let (days, every) = (v.retention_days, v.retention_interval);
        let task = writer::retention(
            db.clone(),
            clock.clone(),
            days,
            every,
            stopped(stop.clone()),
        );
        tasks.spawn(task);
    }
    let sinks = writer::Sinks {
        db,
        json: v.sinks.json(),
        metrics: metrics.clone(),
    };
    let batching = writer::Batching {
        size: v.batch_size,
        delay: v.batch_delay,
    };
    let run = writer::run(
        pending,
        clock.clone(),
        sinks,
        batching,
        stopped(stop.clone()),
    );
    tasks.spawn(run);
    observers
}

/// This host's name (`HOSTNAME`, else the kernel's), naming the instance in violation records.
pub(super) fn host_name() -> String {
    let kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    std::env::var("HOSTNAME")
        .ok()
        .or_else(kernel)
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ratelimitd".to_string())
}
