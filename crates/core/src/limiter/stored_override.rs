//! The stored override, as the limiter reads it: a rate for one exact descriptor of a domain,
//! valid until an instant. The policy database (in the server) writes and reads them; the
//! limiter only looks them up through the [`OverrideIndex`](super::OverrideIndex).

use serde::Serialize;

use crate::clock::Timestamp;
use crate::config::Unit;

/// One `{"key", "value"}` entry of a descriptor path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct PathEntry {
    /// The descriptor key.
    pub key: String,
    /// The descriptor value (empty matches a key-only entry).
    #[serde(default)]
    pub value: String,
}

/// An override as the API accepted it (validated).
#[derive(Debug, Clone, PartialEq)]
pub struct NewOverride {
    /// The domain it applies in.
    pub domain: String,
    /// The exact descriptor it applies to.
    pub descriptor: Vec<PathEntry>,
    /// The rate that replaces the configured one.
    pub requests_per_unit: u32,
    /// Its unit.
    pub unit: Unit,
    /// The first instant it no longer applies.
    pub valid_until: Timestamp,
    /// Why (free text, for the audit trail).
    pub reason: String,
}

/// An override as stored, with its id and who created it.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredOverride {
    /// Its id (`ov_` and 16 hex digits).
    pub id: String,
    /// What was written.
    pub spec: NewOverride,
    /// The token name that created it.
    pub created_by: String,
    /// When (the service clock).
    pub created_at: Timestamp,
}

impl StoredOverride {
    /// True while `now` is before `valid_until`.
    pub fn active_at(&self, now: Timestamp) -> bool {
        now < self.spec.valid_until
    }

    /// Its JSON form in API answers.
    pub fn to_json(&self, now: Timestamp) -> serde_json::Value {
        serde_json::json!({
            "id": self.id,
            "domain": self.spec.domain,
            "descriptor": self.spec.descriptor,
            "requests_per_unit": self.spec.requests_per_unit,
            "unit": self.spec.unit.as_str().to_ascii_lowercase(),
            "valid_until": self.spec.valid_until.to_rfc3339(),
            "reason": self.spec.reason,
            "created_by": self.created_by,
            "created_at": self.created_at.to_rfc3339(),
            "active": self.active_at(now),
        })
    }
}
