//! Caps on what one request may ask and on what the embedded store may hold, so that no input can
//! make a request, a script call or the store's memory grow without bound
//! (`docs/design/architecture.md#bounded-input`). ratelimitd's own settings: the Go service has
//! none of these. The [`Limits`] type is the core limiter's; this reads it from the environment.

use super::{SettingsError, Vars, parse};

pub(crate) use ratelimitd_core::limiter::Limits;

/// Reads the caps; each must be at least 1.
pub(super) fn from_vars(v: &Vars) -> Result<Limits, SettingsError> {
    let d = Limits::default();
    let count = |name: &str, default: usize| {
        v.parse(name, default, |s| {
            parse::uint_in(s, 1, usize::MAX as u64).map(|n| n as usize)
        })
    };
    Ok(Limits {
        max_descriptors: count("MAX_DESCRIPTORS_PER_REQUEST", d.max_descriptors)?,
        max_entries: count("MAX_ENTRIES_PER_DESCRIPTOR", d.max_entries)?,
        max_value_bytes: count("MAX_DESCRIPTOR_VALUE_BYTES", d.max_value_bytes)?,
        memory_max_bytes: count("MEMORY_MAX_BYTES", d.memory_max_bytes)?,
    })
}
