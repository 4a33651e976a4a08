//! Request bodies on the main port: read up to a setting's byte cap (refused as soon as the
//! count passes it, never buffered past it), within the listener's `HTTP_BODY_TIMEOUT` (which
//! [`crate::listener::http`] puts on every body); the handlers then decode them through
//! [`crate::listener::offload`], off the runtime workers when large.

use axum::body::{Body, Bytes};
use futures_util::StreamExt;

use crate::listener::http::BodyTimeout;

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum BodyError {
    /// Longer than its cap.
    #[error("body is over {max} bytes ({setting})")]
    TooLarge {
        /// The cap.
        max: usize,
        /// Its setting.
        setting: &'static str,
    },
    /// Not received in full within `HTTP_BODY_TIMEOUT`.
    #[error(transparent)]
    TimedOut(#[from] BodyTimeout),
    /// The connection failed while the body was read.
    #[error("body could not be read: {0}")]
    Read(String),
}

/// Reads `body` whole, refusing it once it passes `max` bytes (the cap of `setting`).
pub(crate) async fn read(
    body: Body,
    max: usize,
    setting: &'static str,
) -> Result<Bytes, BodyError> {
    let mut stream = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut rest = Vec::new();
    let mut len = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| classify(&e))?;
        len += chunk.len();
        if len > max {
            return Err(BodyError::TooLarge { max, setting });
        }
        // Most bodies arrive in one chunk: keep it without a copy.
        match &first {
            None => first = Some(chunk),
            Some(f) => {
                if rest.is_empty() {
                    rest.extend_from_slice(f);
                }
                rest.extend_from_slice(&chunk);
            }
        }
    }
    if rest.is_empty() {
        return Ok(first.unwrap_or_default());
    }
    Ok(Bytes::from(rest))
}

/// A body-stream error: the listener's timeout, or a failed connection.
fn classify(e: &axum::Error) -> BodyError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(t) = s.downcast_ref::<BodyTimeout>() {
            return BodyError::TimedOut(*t);
        }
        source = s.source();
    }
    BodyError::Read(e.to_string())
}
