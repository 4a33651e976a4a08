//! Who may call an admin handler, decided from the request head alone, as axum extractors that
//! run before the body is read: an unauthenticated request is answered 401/403 at once, however
//! large a body it announces, and never costs its upload. Every `/v1` handler takes [`Admin`] or
//! [`PolicyAdmin`] as its first argument; the console takes [`Viewer`], which also accepts the
//! session cookie of [`super::login`] (and answers the login form instead of a JSON 401).

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::access::TrustedPeer;
use super::{AdminState, error, login};
use crate::policy::{Policy, Tokens};

/// A caller that presented one of the configured bearer tokens.
#[derive(Debug, Clone)]
pub(crate) struct Admin;

/// A caller that presented one of the configured bearer tokens, and its name (for the audit of
/// what it changes outside the policy database, such as a counter reset).
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    /// The token's name.
    pub who: String,
}

/// A token holder, and the open policy database (503 when the policy API is off).
#[derive(Debug, Clone)]
pub(crate) struct PolicyAdmin {
    /// The token's name.
    pub who: String,
    /// The open database.
    pub policy: Arc<Policy>,
}

/// A reader of the console: a token holder, a browser with a live console session
/// ([`super::login`]), or a loopback peer when `ADMIN_TRUST_LOOPBACK` is on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Viewer {
    /// True when the session cookie let the reader in (the page then offers to sign out).
    pub signed_in: bool,
}

impl FromRequestParts<AdminState> for Admin {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Admin, Refusal> {
        authorize(s, &parts.headers).map(|_| Admin)
    }
}

impl FromRequestParts<AdminState> for Operator {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Operator, Refusal> {
        authorize(s, &parts.headers).map(|who| Operator { who })
    }
}

impl FromRequestParts<AdminState> for PolicyAdmin {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Self, Refusal> {
        let who = authorize(s, &parts.headers)?;
        match &s.policy {
            Ok(policy) => Ok(PolicyAdmin {
                who,
                policy: policy.clone(),
            }),
            Err(why) => Err(Refusal::PolicyOff(why.clone())),
        }
    }
}

impl FromRequestParts<AdminState> for Viewer {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Viewer, Refusal> {
        if parts.extensions.get::<TrustedPeer>().is_some() {
            return Ok(Viewer { signed_in: false });
        }
        match authorize(s, &parts.headers) {
            Ok(_) => Ok(Viewer { signed_in: false }),
            Err(Refusal::BadToken) => {
                let now = login::now(s);
                let mut ids = login::session_ids(&parts.headers);
                if ids.any(|id| s.sessions.check(id, now).is_some()) {
                    Ok(Viewer { signed_in: true })
                } else {
                    Err(Refusal::SignIn)
                }
            }
            Err(e) => Err(e),
        }
    }
}

/// Why a request is refused before its handler runs.
#[derive(Debug, Clone)]
pub(crate) enum Refusal {
    /// No token is configured: 403, the API is never open.
    NoTokens,
    /// The token is missing, of another scheme or unknown: 401.
    BadToken,
    /// The policy database is off (why): 503.
    PolicyOff(Arc<str>),
    /// The console without a token, a live session or trust: 401 with the login form.
    SignIn,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::NoTokens => error(
                StatusCode::FORBIDDEN,
                "the management API is disabled: set ADMIN_TOKEN or ADMIN_TOKEN_FILE",
            ),
            Refusal::BadToken => {
                let mut r = error(StatusCode::UNAUTHORIZED, "missing or unknown bearer token");
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
                r
            }
            Refusal::PolicyOff(why) => error(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("the policy API is off: {why}"),
            ),
            Refusal::SignIn => login::page(
                StatusCode::UNAUTHORIZED,
                "Sign in with an admin token (ADMIN_TOKEN or a line of ADMIN_TOKEN_FILE).",
            ),
        }
    }
}

/// The caller's token name, or why it is refused.
fn authorize(s: &AdminState, headers: &HeaderMap) -> Result<String, Refusal> {
    if !s.tokens.any() {
        return Err(Refusal::NoTokens);
    }
    holder(&s.tokens, headers)
        .map(str::to_string)
        .ok_or(Refusal::BadToken)
}

/// The name of the token the `Authorization` header of `headers` carries, if it is one of
/// `tokens` (also used by the debug port's `/rlconfig`).
pub(crate) fn holder<'t>(tokens: &'t Tokens, headers: &HeaderMap) -> Option<&'t str> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    tokens.check(given)
}
