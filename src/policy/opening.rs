//! Opening the policy database, loudly: [`Policy::try_open`] opens the backend and reads the
//! active overrides; while that fails, [`Policy::reopen_loop`] retries in the background (1 s,
//! doubling up to `POLICY_REFRESH_INTERVAL`) and [`Policy::restore_snapshot`] has put the last good
//! copy in service. [`Policy::snapshot_loop`] keeps that copy up to date while the database is
//! open, at most one write a second.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::PolicySettings;
use super::postgres::PgStore;
use super::rules::Rule;
use super::runtime::Policy;
use super::snapshot::{self, Contents};
use super::sqlite::SqliteStore;
use super::store::PolicyStore;
use ratelimitd_core::limiter::OverrideIndex;

/// The database's name in logs and errors: the SQLite file, or the PostgreSQL server (the URL
/// without its credentials).
pub(super) fn db_name(settings: &PolicySettings) -> String {
    match &settings.db_url {
        Some(url) => {
            let rest = url.0.split_once("://").map_or(url.0.as_str(), |(_, r)| r);
            let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
            format!("PostgreSQL {}", host.split(['/', '?']).next().unwrap_or(""))
        }
        None => format!("SQLite {}", settings.data_dir.join("policy.db").display()),
    }
}

/// What was restored from the last good copy.
#[derive(Debug)]
pub(crate) struct Restored {
    /// The copy's rules, to compile with the files.
    pub rules: Vec<Rule>,
    /// How many overrides went into service.
    pub overrides: usize,
    /// When the copy was written (RFC 3339).
    pub written_at: String,
}

impl Policy {
    /// Opens the backend and puts its active overrides in service; `Err` says why it could not
    /// (and is what API calls answer with until it opens).
    pub(crate) async fn try_open(&self, settings: &PolicySettings) -> Result<(), String> {
        let opened = self.open_backend(settings).await;
        if let Err(why) = &opened {
            self.lazy.set_failure(why.clone());
        }
        opened
    }

    async fn open_backend(&self, settings: &PolicySettings) -> Result<(), String> {
        let store: Arc<dyn PolicyStore> = match &settings.db_url {
            Some(url) => Arc::new(PgStore::open(&url.0).map_err(|e| e.to_string())?),
            None => Arc::new(
                SqliteStore::open(&settings.data_dir)
                    .await
                    .map_err(|e| e.to_string())?,
            ),
        };
        // A PostgreSQL pool connects lazily: open means a first read answered.
        let active = store
            .active_overrides(self.clock().now())
            .await
            .map_err(|e| e.to_string())?;
        self.lazy.set(store);
        self.overrides.publish(OverrideIndex::new(active));
        self.mark_dirty();
        Ok(())
    }

    /// Retries [`Policy::try_open`] until it succeeds (true) or `stop` (false): after 1 s, then
    /// twice as long each time up to `max`. A new reason is logged at WARN, a repeated one not.
    pub(crate) async fn reopen_loop(
        &self,
        settings: &PolicySettings,
        max: Duration,
        stop: impl Future<Output = ()>,
    ) -> bool {
        tokio::pin!(stop);
        let mut wait = Duration::from_secs(1).min(max);
        // The first failure was logged at ERROR by the caller.
        let mut last_reason = self.lazy.failure();
        loop {
            tokio::select! {
                _ = &mut stop => return false,
                _ = tokio::time::sleep(wait) => {}
            }
            match self.try_open(settings).await {
                Ok(()) => return true,
                Err(why) => {
                    if why != last_reason {
                        tracing::warn!(db = self.db_name(), reason = %why, "policy database still cannot be opened; retrying");
                    }
                    last_reason = why;
                }
            }
            wait = (wait * 2).min(max);
        }
    }

    /// Puts the last good copy's overrides in service and returns its rules; `Err` says why
    /// there is none (`POLICY_SNAPSHOT_PATH=off`, missing, unreadable).
    pub(crate) async fn restore_snapshot(&self) -> Result<Restored, String> {
        let Some(path) = self.snapshot.clone() else {
            return Err("POLICY_SNAPSHOT_PATH is off".into());
        };
        let read = tokio::task::spawn_blocking(move || snapshot::read(&path));
        let c = read.await.map_err(|e| e.to_string())??;
        let now = self.clock().now();
        let active: Vec<_> = c
            .overrides
            .into_iter()
            .filter(|o| o.active_at(now))
            .collect();
        let overrides = active.len();
        self.overrides.publish(OverrideIndex::new(active));
        Ok(Restored {
            rules: c.rules,
            overrides,
            written_at: c.written_at.to_rfc3339(),
        })
    }

    /// Writes the last good copy whenever it is behind (at most once a second, and once more at
    /// `stop` when a change is pending), while the database is open and its rules were read.
    pub(crate) async fn snapshot_loop(self: Arc<Self>, stop: impl Future<Output = ()>) {
        let Some(path) = self.snapshot.clone() else {
            return;
        };
        tokio::pin!(stop);
        let mut stopping = false;
        loop {
            if !stopping {
                stopping = tokio::select! {
                    _ = &mut stop => true,
                    _ = self.dirty_wake.notified() => false,
                };
            }
            if self.is_open() && self.dirty.swap(false, Ordering::SeqCst) {
                self.write_snapshot(&path).await;
            }
            if stopping {
                return;
            }
            stopping = tokio::select! {
                _ = &mut stop => true,
                _ = tokio::time::sleep(Duration::from_secs(1)) => false,
            };
        }
    }

    /// Writes the copy of what is in service now to `path` (the rules as last read).
    async fn write_snapshot(&self, path: &std::path::Path) {
        let Some(rules) = self.rules_read.lock().clone() else {
            // Not a whole copy before the rules are read: keep the previous one until then.
            self.dirty.store(true, Ordering::SeqCst);
            return;
        };
        let now = self.clock().now();
        let index = self.overrides.load();
        let mut overrides: Vec<_> = (index.all().into_iter())
            .filter(|o| o.active_at(now))
            .map(|o| (**o).clone())
            .collect();
        // Newest first, as the database reads them: the first active one of a descriptor applies.
        overrides.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        let c = Contents {
            written_at: now,
            overrides,
            rules,
        };
        let to = path.to_path_buf();
        let written = tokio::task::spawn_blocking(move || snapshot::write(&to, &c)).await;
        let failed = match written {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e.to_string()),
            Err(e) => Some(e.to_string()),
        };
        // Logged when it starts failing and when it works again, not on every write.
        match failed {
            Some(e) if !self.snapshot_failing.swap(true, Ordering::SeqCst) => {
                tracing::warn!(path = %path.display(), error = %e, "policy: the last good copy cannot be written; a database that cannot be opened at the next start will leave the stored overrides unenforced");
            }
            None if self.snapshot_failing.swap(false, Ordering::SeqCst) => {
                tracing::info!(path = %path.display(), "policy: the last good copy is written again");
            }
            _ => {}
        }
    }
}
