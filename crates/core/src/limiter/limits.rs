//! Caps on what one request may ask and on what the embedded store may hold, so that no input can
//! make a request, a script call or the store's memory grow without bound
//! (`docs/design/architecture.md#bounded-input`). The server reads them from its environment
//! (`MAX_DESCRIPTORS_PER_REQUEST` and the others named below); an embedder sets them directly.

/// The caps on one request and on the embedded store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `MAX_DESCRIPTORS_PER_REQUEST`: descriptors one request may carry (each is up to a store
    /// op per limit, so this bounds a request's work and its script call).
    pub max_descriptors: usize,
    /// `MAX_ENTRIES_PER_DESCRIPTOR`: entries one descriptor may carry.
    pub max_entries: usize,
    /// `MAX_DESCRIPTOR_VALUE_BYTES`: length of the domain and of any entry key or value; they
    /// become part of a cache key the store keeps for a whole window.
    pub max_value_bytes: usize,
    /// `MEMORY_MAX_BYTES`: approximate bytes the embedded store's keys and state may take; new
    /// keys beyond it are refused (as beyond `MEMORY_MAX_KEYS`), live counters are never evicted.
    pub memory_max_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_descriptors: 64,
            max_entries: 32,
            max_value_bytes: 4096,
            memory_max_bytes: 1 << 30,
        }
    }
}

/// A request refused while it was being decoded, before it was built in full: the count named
/// reached the cap, so the rest of the request was not read. The message names the setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OverCap {
    /// More descriptors than `MAX_DESCRIPTORS_PER_REQUEST`.
    #[error(
        "request has more than {max} descriptors; at most {max} are accepted (MAX_DESCRIPTORS_PER_REQUEST)"
    )]
    Descriptors {
        /// The cap.
        max: usize,
    },
    /// A descriptor with more entries than `MAX_ENTRIES_PER_DESCRIPTOR`.
    #[error(
        "descriptor {descriptor} has more than {max} entries; at most {max} are accepted (MAX_ENTRIES_PER_DESCRIPTOR)"
    )]
    Entries {
        /// Index of the descriptor in the request.
        descriptor: usize,
        /// The cap.
        max: usize,
    },
}

impl Limits {
    /// `Err` once a request's descriptor count `count` is past the cap.
    pub fn descriptors(&self, count: usize) -> Result<(), OverCap> {
        if count > self.max_descriptors {
            return Err(OverCap::Descriptors {
                max: self.max_descriptors,
            });
        }
        Ok(())
    }

    /// `Err` once descriptor `descriptor`'s entry count `count` is past the cap.
    pub fn entries(&self, descriptor: usize, count: usize) -> Result<(), OverCap> {
        if count > self.max_entries {
            return Err(OverCap::Entries {
                descriptor,
                max: self.max_entries,
            });
        }
        Ok(())
    }
}
