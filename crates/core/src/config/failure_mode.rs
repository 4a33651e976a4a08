//! What a limit answers when its store cannot answer: a limit's `failure_mode` in the YAML, and the
//! service-wide default for limits that name none (the server's `DEFAULT_FAILURE_MODE`).

/// What a limit answers when the store cannot be reached (`rate_limit.failure_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailureMode {
    /// The request fails with UNAVAILABLE; Envoy's `failure_mode_deny` decides (Go's behaviour).
    #[default]
    Error,
    /// This limit is not enforced while the store is down (fail open, per limit).
    Allow,
    /// This limit answers `OVER_LIMIT` while the store is down (fail closed, per limit).
    Deny,
    /// This limit is enforced by this process's memory store, on its share of the limit.
    Local,
}

impl FailureMode {
    /// Parses the config / setting value.
    pub fn parse(s: &str) -> Option<FailureMode> {
        match s {
            "error" => Some(FailureMode::Error),
            "allow" => Some(FailureMode::Allow),
            "deny" => Some(FailureMode::Deny),
            "local" => Some(FailureMode::Local),
            _ => None,
        }
    }

    /// The accepted spellings, for error messages.
    pub const EXPECTED: &'static str = "expected error, allow, deny or local";
}
