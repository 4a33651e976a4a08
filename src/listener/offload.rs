//! Work on a large request body (a JSON parse, a protobuf scan) runs on the blocking pool, not on
//! the runtime worker that received it: that worker also serves other clients, and a megabyte
//! of input takes it milliseconds that their requests would wait. Small bodies, the usual case,
//! stay inline, where they cost less than the hand-off.

use axum::body::Bytes;

/// Bodies up to this size are worked on inline; a body this small decodes in tens of
/// microseconds.
pub(crate) const INLINE_DECODE_BYTES: usize = 16 * 1024;

/// Runs `work` over `bytes`: inline when they are at most [`INLINE_DECODE_BYTES`], on the
/// blocking pool otherwise. `None` only when the runtime is shutting down.
pub(crate) async fn offload<T, F>(bytes: Bytes, work: F) -> Option<T>
where
    T: Send + 'static,
    F: FnOnce(&[u8]) -> T + Send + 'static,
{
    if bytes.len() <= INLINE_DECODE_BYTES {
        return Some(work(&bytes));
    }
    match tokio::task::spawn_blocking(move || work(&bytes)).await {
        Ok(t) => Some(t),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}
