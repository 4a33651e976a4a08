//! What can go wrong asking ratelimitd, split into "ratelimitd could not answer" (a failure policy
//! decides what happens) and "ratelimitd refused the question" (a bug in the caller: retrying or
//! failing open would hide it).

use std::time::Duration;

/// An error from a ratelimitd client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No answer within the client's timeout (connecting included).
    #[error("ratelimitd did not answer within {0:?}")]
    Timeout(Duration),
    /// The connection could not be made or broke (refused, reset, DNS, TLS...).
    #[error("cannot reach ratelimitd: {0}")]
    Transport(String),
    /// ratelimitd answered that it cannot decide now (`503`: store down, no configuration).
    #[error("ratelimitd is unavailable ({code}), retry after {retry_after:?}")]
    Unavailable {
        /// The `error` field of the answer, e.g. `unavailable` or `no_config`.
        code: String,
        /// Its `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// ratelimitd refused the request as malformed (`400`, `408`, `413`): the caller sent a bad question.
    #[error("ratelimitd refused the request ({status} {code}): {message}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The `error` field, e.g. `invalid_field`.
        code: String,
        /// The `message` field, naming what is wrong.
        message: String,
    },
    /// The answer could not be understood: not JSON, fields missing or of the wrong type, too large,
    /// or a status ratelimitd never sends.
    #[error("malformed answer from ratelimitd: {0}")]
    Malformed(String),
    /// The client was built with bad settings (an unparsable URL, a zero timeout).
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// A usage to report that is not a whole number from 0 to
    /// [`MAX_USAGE`](crate::client::MAX_USAGE) (as written): nothing was sent.
    #[error("usage must be a whole number from 0 to 1000000000, not {0:?}")]
    InvalidUsage(String),
}

impl Error {
    /// Whether ratelimitd could not answer (timeout, transport, `503`, malformed answer): the cases a
    /// failure policy covers. A [`Error::Rejected`] or [`Error::Config`] is the caller's mistake.
    pub fn is_unavailable(&self) -> bool {
        !matches!(
            self,
            Error::Rejected { .. } | Error::Config(_) | Error::InvalidUsage(_)
        )
    }
}
