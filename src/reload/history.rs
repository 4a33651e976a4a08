//! The configuration's load history: every load that compiled (startup, reload, SIGHUP, an xDS
//! push, a policy rule change) and every one that failed, with the SHA-256 of what it compiled
//! (the files' names and contents, and the policy database's documents), the files' names, the
//! time and, for a failure, its errors. Only the last [`MAX_LOADS`] are kept, in memory: the
//! history says which configuration was in service when, never what the files held.

use std::collections::VecDeque;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::ConfigFile;

/// How many loads are kept (the oldest is dropped past this).
pub(crate) const MAX_LOADS: usize = 32;

/// Most file names listed per load (a directory of thousands stays a bounded record).
const MAX_NAMES: usize = 256;

/// One load attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadRecord {
    /// When it happened.
    pub at: Timestamp,
    /// The version it put in service; `None` when it failed.
    pub version: Option<u64>,
    /// `sha256:<hex>` of what it compiled; `None` when the files could not be read.
    pub hash: Option<String>,
    /// The names of the documents it compiled (at most 256; `files_total` counts them all).
    pub files: Vec<String>,
    /// How many documents it compiled.
    pub files_total: usize,
    /// The errors of a failed load, one per line.
    pub errors: Option<String>,
}

impl LoadRecord {
    /// A load of `files` at `at`: in service as `version`, or failed with `errors`.
    pub(crate) fn of(
        files: Option<&[ConfigFile]>,
        at: Timestamp,
        version: Option<u64>,
        errors: Option<String>,
    ) -> LoadRecord {
        let files = files.unwrap_or_default();
        LoadRecord {
            at,
            version,
            hash: (!files.is_empty() || errors.is_none()).then(|| hash(files)),
            files: files
                .iter()
                .take(MAX_NAMES)
                .map(|f| f.name.clone())
                .collect(),
            files_total: files.len(),
            errors,
        }
    }

    /// Its JSON form (`/v1/config/history`).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "at": self.at.to_rfc3339(),
            "ok": self.version.is_some(),
            "version": self.version,
            "hash": self.hash,
            "files": self.files,
            "files_total": self.files_total,
            "errors": self.errors.as_ref().map(|e| e.lines().collect::<Vec<_>>()),
        })
    }
}

/// `sha256:<hex>` of the documents' names and contents, in name order (each length-prefixed, so
/// moving bytes between a name and a content changes it).
pub(crate) fn hash(files: &[ConfigFile]) -> String {
    let mut sorted: Vec<&ConfigFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut h = Sha256::new();
    for f in sorted {
        for part in [f.name.as_bytes(), f.contents.as_bytes()] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part);
        }
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The last [`MAX_LOADS`] loads, oldest first.
#[derive(Debug, Default)]
pub(crate) struct LoadHistory {
    loads: Mutex<VecDeque<LoadRecord>>,
}

impl LoadHistory {
    /// Adds `r`, dropping the oldest past [`MAX_LOADS`].
    pub(crate) fn push(&self, r: LoadRecord) {
        let mut loads = self.loads.lock();
        if loads.len() >= MAX_LOADS {
            loads.pop_front();
        }
        loads.push_back(r);
    }

    /// The kept loads, newest first.
    pub(crate) fn newest_first(&self) -> Vec<LoadRecord> {
        self.loads.lock().iter().rev().cloned().collect()
    }

    /// The hash of the load that put `version` in service, if it is still kept.
    pub(crate) fn hash_of(&self, version: u64) -> Option<String> {
        let loads = self.loads.lock();
        (loads.iter().rev())
            .find(|r| r.version == Some(version))
            .and_then(|r| r.hash.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reload::test_file as file;

    #[test]
    fn the_hash_follows_names_and_contents_not_order() {
        let (a, b) = (file("a.yaml", "x"), file("b.yaml", "y"));
        assert_eq!(hash(&[a.clone(), b.clone()]), hash(&[b.clone(), a.clone()]));
        assert_ne!(hash(std::slice::from_ref(&a)), hash(&[file("a.yaml", "z")]));
        assert_ne!(hash(&[file("ab", "c")]), hash(&[file("a", "bc")]));
        assert!(hash(&[a]).starts_with("sha256:"));
    }

    #[test]
    fn only_the_last_loads_are_kept() {
        let h = LoadHistory::default();
        for v in 1..=(MAX_LOADS as u64 + 5) {
            let f = [file("a.yaml", &v.to_string())];
            h.push(LoadRecord::of(
                Some(&f),
                Timestamp::from_secs(v),
                Some(v),
                None,
            ));
        }
        let all = h.newest_first();
        assert_eq!(all.len(), MAX_LOADS);
        assert_eq!(all[0].version, Some(MAX_LOADS as u64 + 5));
        assert!(h.hash_of(1).is_none(), "dropped");
        assert_eq!(h.hash_of(MAX_LOADS as u64 + 5), all[0].hash);
        let failed = LoadRecord::of(None, Timestamp::from_secs(1), None, Some("e1\ne2".into()));
        assert_eq!(
            (failed.hash.clone(), failed.to_json()["errors"].clone()),
            (None, serde_json::json!(["e1", "e2"]))
        );
    }
}
