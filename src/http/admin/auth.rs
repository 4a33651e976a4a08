//! Who may call an admin handler, decided from the request head alone, as axum extractors that
//! run before the body is read: an unauthenticated request is answered 401/403 at once, however
//! large a body it announces, and never costs its upload. Every `/v1` handler takes [`Admin`],
//! [`PolicyAdmin`] (reads: any token) or [`PolicyWriter`] (changes: a token of role `admin`; a
//! `read` token is answered 403) as its first argument; the console takes [`Viewer`], which also
//! accepts the session cookie of [`super::login`] (and answers the login form instead of a JSON
//! 401).

use std::sync::Arc;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::access::TrustedPeer;
use super::{AdminState, error, login};
use crate::policy::{Policy, Role, Tokens};

/// A caller that presented one of the configured bearer tokens.
#[derive(Debug, Clone)]
pub(crate) struct Admin;

/// A caller that presented a token of role `admin` (a `read` token is answered 403), and its
/// name (for the audit of what it changes outside the policy database, such as a counter reset).
#[derive(Debug, Clone)]
pub(crate) struct Operator {
    /// The token's name.
    pub who: String,
}

/// A token holder, and the open policy database (503 when the policy API is off).
#[derive(Debug, Clone)]
pub(crate) struct PolicyAdmin {
    /// The open database.
    pub policy: Arc<Policy>,
}

/// A holder of a token of role `admin`, and the open policy database: the callers that may
/// change it.
#[derive(Debug, Clone)]
pub(crate) struct PolicyWriter {
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
        let (who, role) = authorize_role(s, &parts.headers)?;
        if role != Role::Admin {
            return Err(Refusal::ReadOnly(who));
        }
        Ok(Operator { who })
    }
}

impl FromRequestParts<AdminState> for PolicyAdmin {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Self, Refusal> {
        authorize(s, &parts.headers)?;
        match &s.policy {
            Ok(policy) => Ok(PolicyAdmin {
                policy: policy.clone(),
            }),
            Err(why) => Err(Refusal::PolicyOff(why.clone())),
        }
    }
}

impl FromRequestParts<AdminState> for PolicyWriter {
    type Rejection = Refusal;

    async fn from_request_parts(parts: &mut Parts, s: &AdminState) -> Result<Self, Refusal> {
        let (who, role) = authorize_role(s, &parts.headers)?;
        if role != Role::Admin {
            return Err(Refusal::ReadOnly(who));
        }
        match &s.policy {
            Ok(policy) => Ok(PolicyWriter {
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
    /// A token of role `read` (its name) asked to change something: 403.
    ReadOnly(String),
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        match self {
            Refusal::NoTokens => error(
                StatusCode::FORBIDDEN,
                "the management API is disabled: set ADMIN_TOKEN, ADMIN_TOKEN_FILE or ADMIN_TOKENS_FILE",
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
            Refusal::ReadOnly(who) => error(
                StatusCode::FORBIDDEN,
                format!(
                    "the token '{who}' has the role read: it may read but not change anything \
                     (a token of role admin may)"
                ),
            ),
            Refusal::SignIn => login::page(
                StatusCode::UNAUTHORIZED,
                "Sign in with an admin token (ADMIN_TOKEN, or a line of ADMIN_TOKEN_FILE or ADMIN_TOKENS_FILE; a read token may sign in).",
            ),
        }
    }
}

/// The caller's token name, or why it is refused.
fn authorize(s: &AdminState, headers: &HeaderMap) -> Result<String, Refusal> {
    authorize_role(s, headers).map(|(who, _)| who)
}

/// The caller's token name and role, or why it is refused.
fn authorize_role(s: &AdminState, headers: &HeaderMap) -> Result<(String, Role), Refusal> {
    if !s.tokens.any() {
        return Err(Refusal::NoTokens);
    }
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    (s.tokens.check_role(given))
        .map(|(who, role)| (who.to_string(), role))
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
