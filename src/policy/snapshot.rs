//! The last good copy of the policy database: the active overrides and the rules, written as one
//! JSON file (`POLICY_SNAPSHOT_PATH`) after every successful read or change, atomically (a
//! temporary file beside it, synced, then renamed over it), so a crash mid-write leaves the
//! previous copy. When the database cannot be opened at startup the service enforces this copy
//! until the database opens; the database then wins wholesale (its overrides and rules replace
//! the copy's, the copy is rewritten from it).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::model::{NewOverride, PathEntry, StoredOverride};
use super::rules::Rule;
use ratelimitd_core::clock::Timestamp;
use ratelimitd_core::config::Unit;

/// What the copy holds.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Contents {
    /// When it was written (the service clock).
    pub written_at: Timestamp,
    /// The overrides that were active then, newest first.
    pub overrides: Vec<StoredOverride>,
    /// Every rule.
    pub rules: Vec<Rule>,
}

#[derive(Serialize, Deserialize)]
struct FileOverride {
    id: String,
    domain: String,
    descriptor: Vec<PathEntry>,
    requests_per_unit: u32,
    unit: String,
    valid_until_us: u64,
    reason: String,
    created_by: String,
    created_at_us: u64,
}

#[derive(Serialize, Deserialize)]
struct FileRule {
    id: String,
    domain: String,
    descriptor: Vec<PathEntry>,
    rate_limit: Map<String, Value>,
    enabled: bool,
}

#[derive(Serialize, Deserialize)]
struct File {
    written_at_us: u64,
    overrides: Vec<FileOverride>,
    rules: Vec<FileRule>,
}

/// The file's JSON text.
fn to_text(c: &Contents) -> String {
    let file = File {
        written_at_us: c.written_at.as_micros(),
        overrides: c
            .overrides
            .iter()
            .map(|o| FileOverride {
                id: o.id.clone(),
                domain: o.spec.domain.clone(),
                descriptor: o.spec.descriptor.clone(),
                requests_per_unit: o.spec.requests_per_unit,
                unit: o.spec.unit.as_str().to_string(),
                valid_until_us: o.spec.valid_until.as_micros(),
                reason: o.spec.reason.clone(),
                created_by: o.created_by.clone(),
                created_at_us: o.created_at.as_micros(),
            })
            .collect(),
        rules: c
            .rules
            .iter()
            .map(|r| FileRule {
                id: r.id.clone(),
                domain: r.domain.clone(),
                descriptor: r.descriptor.clone(),
                rate_limit: r.rate_limit.clone(),
                enabled: r.enabled,
            })
            .collect(),
    };
    serde_json::to_string(&file).unwrap_or_default()
}

fn from_text(text: &str) -> Result<Contents, String> {
    let file: File = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut overrides = Vec::with_capacity(file.overrides.len());
    for o in file.overrides {
        let unit = Unit::parse(&o.unit)
            .ok_or_else(|| format!("override {}: invalid unit '{}'", o.id, o.unit))?;
        overrides.push(StoredOverride {
            id: o.id,
            spec: NewOverride {
                domain: o.domain,
                descriptor: o.descriptor,
                requests_per_unit: o.requests_per_unit,
                unit,
                valid_until: Timestamp::from_micros(o.valid_until_us),
                reason: o.reason,
            },
            created_by: o.created_by,
            created_at: Timestamp::from_micros(o.created_at_us),
        });
    }
    let rules = file
        .rules
        .into_iter()
        .map(|r| Rule {
            id: r.id,
            domain: r.domain,
            descriptor: r.descriptor,
            rate_limit: r.rate_limit,
            enabled: r.enabled,
        })
        .collect();
    Ok(Contents {
        written_at: Timestamp::from_micros(file.written_at_us),
        overrides,
        rules,
    })
}

/// Writes `c` to `path` atomically (blocking: run it off the async workers).
pub(crate) fn write(path: &Path, c: &Contents) -> std::io::Result<()> {
    use std::io::Write;
    let mut tmp = PathBuf::from(path);
    tmp.as_mut_os_string().push(".tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(to_text(c).as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

/// Reads the copy at `path` (blocking); `Err` says why there is none to use.
pub(crate) fn read(path: &Path) -> Result<Contents, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    from_text(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copy_round_trips_through_a_file_and_garbage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("last-good.json");
        let mut rate_limit = Map::new();
        rate_limit.insert("unit".into(), "minute".into());
        let entry = PathEntry {
            key: "client_key".into(),
            value: "user:42".into(),
        };
        let c = Contents {
            written_at: Timestamp::from_secs(10),
            overrides: vec![StoredOverride {
                id: "ov_1".into(),
                spec: NewOverride {
                    domain: "api".into(),
                    descriptor: vec![entry.clone()],
                    requests_per_unit: 2,
                    unit: Unit::Minute,
                    valid_until: Timestamp::from_secs(99),
                    reason: "r".into(),
                },
                created_by: "admin".into(),
                created_at: Timestamp::from_micros(5),
            }],
            rules: vec![Rule {
                id: "r1".into(),
                domain: "web".into(),
                descriptor: vec![entry],
                rate_limit,
                enabled: true,
            }],
        };
        write(&path, &c).unwrap();
        assert_eq!(read(&path).unwrap(), c);
        std::fs::write(&path, "{not json").unwrap();
        assert!(read(&path).is_err());
        assert!(read(&dir.path().join("missing")).is_err());
    }
}
