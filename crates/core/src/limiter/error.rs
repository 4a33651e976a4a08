//! Why a request was not answered with a decision: bad input (Go's messages, ratelimitd's caps),
//! no configuration yet, or a store that could not decide and a failure policy that wants the
//! error. The edges map these to gRPC codes and HTTP statuses.

use crate::store::StoreError;

/// Why a request was not answered with a decision. Messages are the Go service's where it has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The request's domain is empty.
    #[error("rate limit domain must not be empty")]
    EmptyDomain,
    /// The request has no descriptors.
    #[error("rate limit descriptor list must not be empty")]
    NoDescriptors,
    /// No configuration has loaded successfully yet.
    #[error("no rate limit configuration loaded")]
    NoConfig,
    /// More descriptors than `MAX_DESCRIPTORS_PER_REQUEST`.
    #[error(
        "request has {count} descriptors; at most {max} are accepted (MAX_DESCRIPTORS_PER_REQUEST)"
    )]
    TooManyDescriptors {
        /// Descriptors sent.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// A descriptor with more entries than `MAX_ENTRIES_PER_DESCRIPTOR`.
    #[error(
        "descriptor {descriptor} has {count} entries; at most {max} are accepted (MAX_ENTRIES_PER_DESCRIPTOR)"
    )]
    TooManyEntries {
        /// Index of the descriptor in the request.
        descriptor: usize,
        /// Entries sent.
        count: usize,
        /// The cap.
        max: usize,
    },
    /// The domain, or an entry key or value, longer than `MAX_DESCRIPTOR_VALUE_BYTES`.
    #[error("{what} is {len} bytes; at most {max} are accepted (MAX_DESCRIPTOR_VALUE_BYTES)")]
    TooLong {
        /// Which field (`domain`, `descriptor 0 entry 1 value`).
        what: String,
        /// Its length.
        len: usize,
        /// The cap.
        max: usize,
    },
    /// A descriptor's override carries UNKNOWN or an invalid unit.
    #[error("descriptor {descriptor}: rate limit override has an invalid unit")]
    InvalidOverrideUnit {
        /// Index of the descriptor in the request.
        descriptor: usize,
    },
    /// A descriptor's holder id (`ratelimitd.holder`) is empty or longer than
    /// [`MAX_HOLDER_LEN`](crate::algorithm::concurrency::MAX_HOLDER_LEN): the same refusal
    /// `POST /check` gives its `holder` field.
    #[error("descriptor {descriptor}: ratelimitd.holder {reason}")]
    BadHolder {
        /// Index of the descriptor in the request.
        descriptor: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// A `when:` predicate failed at run time under `failure_mode: error` (its own, or the
    /// service's default): the request fails as it would on a store failure.
    #[error("descriptor {descriptor}: {reason}")]
    PredicateFailed {
        /// Index of the descriptor in the request.
        descriptor: usize,
        /// The predicate and its error.
        reason: String,
    },
    /// A descriptor's `ratelimitd.usage` entry names something other than `report`.
    #[error(
        "descriptor {descriptor}: ratelimitd.usage '{value}' is not valid (the only value is report: the descriptor reports usage)"
    )]
    BadUsageEntry {
        /// Index of the descriptor in the request.
        descriptor: usize,
        /// The value sent.
        value: String,
    },
    /// The store could not decide.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RequestError {
    /// True when the request exceeded one of ratelimitd's caps (`validate`).
    pub fn is_over_cap(&self) -> bool {
        matches!(
            self,
            RequestError::TooManyDescriptors { .. }
                | RequestError::TooManyEntries { .. }
                | RequestError::TooLong { .. }
        )
    }

    /// True when the caller sent a bad request (as opposed to a service-side failure).
    pub fn is_invalid_argument(&self) -> bool {
        matches!(
            self,
            RequestError::EmptyDomain
                | RequestError::NoDescriptors
                | RequestError::TooManyDescriptors { .. }
                | RequestError::TooManyEntries { .. }
                | RequestError::TooLong { .. }
                | RequestError::InvalidOverrideUnit { .. }
                | RequestError::BadHolder { .. }
                | RequestError::BadUsageEntry { .. }
        )
    }
}
