//! TEMPORARY until the config branch merges.
#![allow(missing_docs)]
use crate::config::compiled::*;
impl RateLimitConfig {
    pub fn domain(&self, name: &str) -> Option<&Domain> { self.domains.get(name) }
    pub fn domain_count(&self) -> usize { self.domains.len() }
    pub fn limits(&self) -> Vec<&Limit> { Vec::new() }
}
impl Domain {
    pub fn get_limit<E: EntryRef>(&self, _entries: &[E]) -> Option<Match<'_>> { let _ = &self.root; None }
}
