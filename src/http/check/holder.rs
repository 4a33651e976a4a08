//! `POST /check`'s concurrency fields: `holder`, the id a concurrency slot is held under (the
//! caller's, or one the service makes up and answers with), and `release: true`, which gives that
//! holder's slots back instead of taking any. A release takes nothing from the request's rate
//! limits and gives nothing back to them: its hits are 0, and only a concurrency limit acts on
//! the holder.

use serde_json::{Map, Value};

use super::parse::CheckError;
use ratelimitd_core::algorithm::concurrency::MAX_HOLDER_LEN;
use ratelimitd_core::limiter::Descriptor;

/// The holder fields of a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    /// The holder id: the caller's, or a fresh random one for an acquisition without it.
    pub id: String,
    /// `release: true`: give the holder's slots back.
    pub release: bool,
    /// True when the caller sent the id.
    pub sent: bool,
}

/// Reads `holder` and `release` from `obj`.
pub(crate) fn read(obj: &Map<String, Value>) -> Result<Holder, CheckError> {
    let release = match obj.get("release") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(CheckError::field("release", "must be true or false")),
    };
    let id = match obj.get("holder") {
        None | Some(Value::Null) if release => {
            return Err(CheckError::field(
                "holder",
                "required with release: true (the holder id the acquisition answered with)",
            ));
        }
        // 128 random bits: no other acquisition of any instance draws the same id.
        None | Some(Value::Null) => format!("{:016x}{:016x}", fastrand::u64(..), fastrand::u64(..)),
        Some(Value::String(s)) if s.is_empty() => {
            return Err(CheckError::field("holder", "must not be empty"));
        }
        Some(Value::String(s)) if s.len() > MAX_HOLDER_LEN => {
            return Err(CheckError::field(
                "holder",
                format!("must be at most {MAX_HOLDER_LEN} bytes"),
            ));
        }
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err(CheckError::field("holder", "must be a string")),
    };
    let sent = matches!(obj.get("holder"), Some(Value::String(_)));
    Ok(Holder { id, release, sent })
}

/// Names `holder` on every descriptor; for a release, turns each into a refund of 0 hits.
pub(crate) fn apply(descriptors: &mut [Descriptor], holder: &Holder) {
    for d in descriptors {
        d.holder = Some(holder.id.clone());
        if holder.release {
            d.refund = true;
            d.hits_addend = Some(0);
        }
    }
}
