//! The violation log's options: where records go, how they are queued and batched, and how
//! long they are kept.

use std::time::Duration;

/// Where violation records are written (`VIOLATIONS_LOG`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationSinks {
    /// The policy database's `rate_limit_violations` (the default; nothing without a database).
    Db,
    /// One JSON line per record on standard error, with the logs.
    Json,
    /// Both.
    Both,
    /// Nowhere: no observer is registered at all.
    Off,
}

impl ViolationSinks {
    /// True when records go to the database.
    pub fn db(self) -> bool {
        matches!(self, ViolationSinks::Db | ViolationSinks::Both)
    }

    /// True when records are written as JSON lines.
    pub fn json(self) -> bool {
        matches!(self, ViolationSinks::Json | ViolationSinks::Both)
    }
}

/// How the violation log runs (read from `VIOLATIONS_*` and `INSTANCE_ID` by `settings`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViolationOptions {
    /// `VIOLATIONS_LOG` (`db`, `json`, `both`, `off`; default `db`).
    pub sinks: ViolationSinks,
    /// `VIOLATIONS_QUEUE_SIZE` (default 10000): distinct violations (domain, descriptor, limit,
    /// shadow) waiting for the writer; repeats of a waiting one are counted in it, new ones
    /// beyond it are dropped and counted.
    pub queue_size: usize,
    /// `VIOLATIONS_BATCH_SIZE` (default 500, at most 1000): rows per database statement.
    pub batch_size: usize,
    /// `VIOLATIONS_BATCH_DELAY` (default 1s): how often the waiting violations are written.
    pub batch_delay: Duration,
    /// `VIOLATIONS_RETENTION_DAYS` (default 7; 0 keeps every record).
    pub retention_days: u32,
    /// `VIOLATIONS_RETENTION_INTERVAL` (default 1h): how often old records are deleted.
    pub retention_interval: Duration,
    /// `INSTANCE_ID`: the instance named in records (default: the host name).
    pub instance_id: Option<String>,
}
