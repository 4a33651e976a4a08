//! Who may call an admin handler, decided from the request head alone, as axum extractors that
//! run before the body is read: an unauthenticated request is answered 401/403 at once, however
//! large a body it announces, and never costs its upload. Every `/v1` handler takes [`Admin`] or
//! [`PolicyAdmin`] as its first argument; the status page takes [`Viewer`].

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

use super::access::TrustedPeer;
use super::{AdminState, error};
use crate::policy::Policy;

/// A caller that presented one of the configured bearer tokens.
#[derive(Debug, Clone)]
pub struct Admin {
    /// The token's name (the change log's "who").
    pub who: String,
}

/// A token holder, and the open policy database (503 when the policy API is off).
#[derive(Debug, Clone)]
pub struct PolicyAdmin {
    /// The token's name.
    pub who: String,
    /// The open database.
    pub policy: Arc<Policy>,
}

/// A reader of the status page: a token holder, or a loopback peer when `ADMIN_TRUST_LOOPBACK`
/// is on.
#[derive(Debug, Clone, Copy)]
pub struct Viewer;

impl FromRequestParts<AdminState> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Admin, Response> {
        authorize(s, &parts.headers).map(|who| Admin { who })
    }
}

impl FromRequestParts<AdminState> for PolicyAdmin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Self, Response> {
        let who = authorize(s, &parts.headers)?;
        match &s.policy {
            Ok(policy) => Ok(PolicyAdmin {
                who,
                policy: policy.clone(),
            }),
            Err(why) => Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the policy API is off: {why}"),
            )),
        }
    }
}

impl FromRequestParts<AdminState> for Viewer {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Viewer, Response> {
        if parts.extensions.get::<TrustedPeer>().is_some() {
            return Ok(Viewer);
        }
        authorize(s, &parts.headers).map(|_| Viewer)
    }
}

/// The caller's token name, or the answer that refuses the request: 403 without configured
/// tokens, 401 (with `WWW-Authenticate: Bearer`) for a missing or wrong token.
fn authorize(s: &AdminState, headers: &HeaderMap) -> Result<String, Response> {
    if !s.tokens.any() {
        return Err(error(
            StatusCode::FORBIDDEN,
            "the management API is disabled: set ADMIN_TOKEN or ADMIN_TOKEN_FILE",
        ));
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match s.tokens.check(given) {
        Some(name) => Ok(name.to_string()),
        None => {
            let mut r = error(StatusCode::UNAUTHORIZED, "missing or unknown bearer token");
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            Err(r)
        }
    }
}
