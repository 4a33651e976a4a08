//! Reads ratelimitd's `/check` answer — status, headers, JSON body — into a [`Decision`] or a typed
//! [`Error`]. Nothing here trusts the answer: a missing field, a wrong type, a status ratelimitd does
//! not send or a body contradicting its status is [`Error::Malformed`], never a panic.

use std::time::Duration;

use http::{HeaderMap, StatusCode};
use serde::Deserialize;

use crate::check::{Decision, forwarded};
use crate::error::Error;

/// The body of a `200` or `429`.
#[derive(Deserialize)]
struct Verdict {
    allowed: bool,
    remaining: Option<u64>,
    reset_at: Option<u64>,
    retry_after: u64,
    delay_ms: u64,
    #[serde(default)]
    holder: Option<String>,
}

/// The body of a `400`, `408`, `413` or `503`.
#[derive(Deserialize)]
struct Refusal {
    error: String,
    #[serde(default)]
    message: String,
}

/// Turns one answer into a decision. `max_wait_ms` is what the request accepted: a delay beyond it
/// is not one ratelimitd gives, so it is refused rather than waited.
pub(crate) fn read(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    max_wait_ms: u64,
) -> Result<Decision, Error> {
    match status.as_u16() {
        200 | 429 => {
            let v: Verdict = json(body)?;
            if v.allowed != (status == StatusCode::OK) {
                return Err(Error::Malformed(format!(
                    "status {status} with \"allowed\": {}",
                    v.allowed
                )));
            }
            if v.delay_ms > max_wait_ms {
                return Err(Error::Malformed(format!(
                    "delay_ms {} over the {max_wait_ms} ms the request accepted",
                    v.delay_ms
                )));
            }
            if !v.allowed && v.retry_after == 0 {
                return Err(Error::Malformed("a denial with retry_after 0".into()));
            }
            Ok(Decision {
                allowed: v.allowed,
                remaining: v.remaining,
                reset_at: v.reset_at,
                retry_after: Duration::from_secs(v.retry_after),
                delay: Duration::from_millis(v.delay_ms),
                headers: forwarded(headers),
                holder: v.holder,
            })
        }
        400 | 408 | 413 => {
            let r: Refusal = json(body)?;
            Err(Error::Rejected {
                status: status.as_u16(),
                code: r.error,
                message: r.message,
            })
        }
        503 => {
            let code = json::<Refusal>(body).map_or_else(|_| "unavailable".into(), |r| r.error);
            Err(Error::Unavailable {
                code,
                retry_after: retry_after(headers),
            })
        }
        _ => Err(Error::Malformed(format!("unexpected status {status}"))),
    }
}

/// The `Retry-After` header in whole seconds, when present and well formed.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let v = headers.get(http::header::RETRY_AFTER)?.to_str().ok()?;
    v.trim().parse::<u64>().ok().map(Duration::from_secs)
}

fn json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Malformed(format!("body: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_body(status: u16, body: &str) -> Result<Decision, Error> {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "7".parse().unwrap());
        h.insert("ratelimit", "\"a\";r=0;t=7".parse().unwrap());
        h.insert("x-other", "kept out".parse().unwrap());
        read(
            StatusCode::from_u16(status).unwrap(),
            &h,
            body.as_bytes(),
            100,
        )
    }

    #[test]
    fn a_denial_carries_its_wait_and_only_the_rate_limit_headers() {
        let d = read_body(
            429,
            r#"{"allowed":false,"remaining":0,"reset_at":9,"retry_after":7,"delay_ms":0}"#,
        )
        .unwrap();
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Duration::from_secs(7));
        assert_eq!(d.headers.len(), 2);
        assert!(d.headers.get("x-other").is_none());
    }

    #[test]
    fn hostile_or_broken_answers_are_malformed_errors() {
        for (status, body) in [
            (200, "not json"),
            (200, r#"{"allowed":true}"#),
            (
                200,
                r#"{"allowed":"yes","remaining":1,"reset_at":1,"retry_after":0,"delay_ms":0}"#,
            ),
            (
                200,
                r#"{"allowed":false,"remaining":1,"reset_at":1,"retry_after":1,"delay_ms":0}"#,
            ),
            (
                429,
                r#"{"allowed":false,"remaining":0,"reset_at":1,"retry_after":0,"delay_ms":0}"#,
            ),
            (
                200,
                r#"{"allowed":true,"remaining":1,"reset_at":1,"retry_after":0,"delay_ms":101}"#,
            ),
            (
                200,
                r#"{"allowed":true,"remaining":-1,"reset_at":1,"retry_after":0,"delay_ms":0}"#,
            ),
            (302, ""),
            (500, "{}"),
            (400, "<html>"),
        ] {
            let e = read_body(status, body).unwrap_err();
            assert!(matches!(e, Error::Malformed(_)), "{status} {body}: {e}");
        }
    }

    #[test]
    fn refusals_and_unavailability_are_told_apart() {
        let e = read_body(
            400,
            r#"{"error":"invalid_field","message":"client_key: empty"}"#,
        )
        .unwrap_err();
        assert!(!e.is_unavailable(), "{e}");
        assert!(e.to_string().contains("client_key: empty"), "{e}");
        let e = read_body(503, r#"{"error":"no_config","message":"x"}"#).unwrap_err();
        match e {
            Error::Unavailable { code, retry_after } => {
                assert_eq!(
                    (code.as_str(), retry_after),
                    ("no_config", Some(Duration::from_secs(7)))
                );
            }
            other => panic!("{other}"),
        }
    }
}
