//! The limiter's request types. The gRPC and HTTP edges convert into these, so nothing past the
//! edge sees a proto or JSON type. Hits are carried as sent; the limiter normalises them once, when
//! it plans the request ([`super::plan`]), and the raw values only reach the dynamic metadata.

use std::time::Duration;

use crate::config::{EntryRef, Unit};

/// One `key`/`value` pair of a descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Entry {
    /// The descriptor key.
    pub key: String,
    /// The value; may be empty.
    pub value: String,
}

impl Entry {
    /// An entry from anything string-like.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Entry {
        Entry {
            key: key.into(),
            value: value.into(),
        }
    }
}

impl EntryRef for Entry {
    fn key(&self) -> &str {
        &self.key
    }
    fn value(&self) -> &str {
        &self.value
    }
}

/// A limit supplied by the caller instead of the configured one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Override {
    /// Requests per unit.
    pub requests_per_unit: u32,
    /// The unit; `None` when the caller sent UNKNOWN or a number that is no unit, which is
    /// answered with an invalid-argument error (the Go service crashes here).
    pub unit: Option<Unit>,
}

/// One descriptor of a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// Entries, outermost first.
    pub entries: Vec<Entry>,
    /// A caller-chosen limit.
    pub limit: Option<Override>,
    /// Per-descriptor hits as sent; `Some(0)` means check without consuming.
    pub hits_addend: Option<u64>,
    /// `is_negative_hits`: the descriptor's hits are given back instead of added.
    pub refund: bool,
    /// The hits are usage reported after the fact (`POST /check`'s `report`): counted even past
    /// the limit, never refused ([`crate::algorithm::report`]). A limit with `usage: report`
    /// treats every call with hits as a report without it.
    pub report: bool,
    /// Who holds the slot of a concurrency limit this descriptor acquires or releases
    /// ([`crate::algorithm::concurrency`]); `None`: the request gets a fresh anonymous holder,
    /// whose slot frees only at its lease timeout.
    pub holder: Option<String>,
    /// The class the caller named for the whole request (`POST /check`'s `priority`): it stands
    /// for the `priority_key` entry of a limit with priorities when the descriptor has no such
    /// entry (an entry in the descriptor wins: it is the more specific statement).
    pub priority: Option<String>,
}

/// The descriptor entry key that names the holder over gRPC and `/json` (Envoy:
/// `request_headers { header_name: x-request-id, descriptor_key: ratelimitd.holder }`). The
/// entry is taken out of the descriptor before matching, so it never reaches a cache key.
pub const HOLDER_ENTRY_KEY: &str = "ratelimitd.holder";

/// The descriptor entry that marks a usage report over gRPC and `/json` (Envoy: a stream-done
/// action's `generic_key { descriptor_key: ratelimitd.usage, descriptor_value: report }`): the
/// descriptor's hits are usage reported after the fact, even 0, as `POST /check`'s `report`. The
/// entry is taken out before matching, so it never reaches a cache key; any other value is
/// refused.
pub const USAGE_ENTRY_KEY: &str = "ratelimitd.usage";

impl Descriptor {
    /// Moves every [`USAGE_ENTRY_KEY`] entry of value `report` out of the entries into
    /// [`Descriptor::report`]. An entry of another value stays, and validation refuses it.
    pub fn split_report(&mut self) {
        if !self.entries.iter().any(|e| e.key == USAGE_ENTRY_KEY) {
            return;
        }
        let mut report = false;
        self.entries.retain(|e| {
            let marker = e.key == USAGE_ENTRY_KEY && e.value == "report";
            report |= marker;
            !marker
        });
        self.report |= report;
    }

    /// Moves the last [`HOLDER_ENTRY_KEY`] entry (and drops any other) out of the entries into
    /// [`Descriptor::holder`]. An empty value is kept as sent: validation refuses it, as it
    /// refuses one over the holder cap.
    pub fn split_holder(&mut self) {
        if !self.entries.iter().any(|e| e.key == HOLDER_ENTRY_KEY) {
            return;
        }
        let mut holder = None;
        self.entries.retain_mut(|e| {
            if e.key != HOLDER_ENTRY_KEY {
                return true;
            }
            holder = Some(std::mem::take(&mut e.value));
            false
        });
        self.holder = holder;
    }

    /// A descriptor with these entries and nothing else.
    pub fn of(entries: &[(&str, &str)]) -> Descriptor {
        Descriptor {
            entries: entries.iter().map(|(k, v)| Entry::new(*k, *v)).collect(),
            ..Descriptor::default()
        }
    }
}

/// A rate limit request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    /// The domain; must not be empty.
    pub domain: String,
    /// The descriptors; must not be empty.
    pub descriptors: Vec<Descriptor>,
    /// Hits for descriptors without their own `hits_addend`, as sent: 0 (unset) means 1.
    pub hits_addend: u64,
    /// How long the caller accepts to wait before proceeding (`POST /check`'s `max_wait_ms`):
    /// leaky bucket limits then shape (reserve a later slot) instead of denying. Zero polices,
    /// as gRPC and `/json` always do.
    pub max_wait: Duration,
}

impl Request {
    /// A request with the given domain and descriptors, one hit each.
    pub fn new(domain: impl Into<String>, descriptors: Vec<Descriptor>) -> Request {
        Request {
            domain: domain.into(),
            descriptors,
            hits_addend: 0,
            max_wait: Duration::ZERO,
        }
    }
}
