//! Signing in to the console from a browser, without script: `GET /` without a credential answers
//! 401 with a plain HTML form, which posts the admin token to `POST /login`; a known token starts
//! a [`super::session`] and answers `303 See Other` to `/` with the session cookie
//! ([`COOKIE`]: `HttpOnly; SameSite=Strict; Path=/`, `Max-Age` the session's lifetime). `POST
//! /logout` ends the session and clears the cookie.
//!
//! The cookie opens the console's page only: every `/v1` call still needs the bearer token, so a
//! stolen or forged browser request cannot change anything. Both forms refuse a cross-site post:
//! the cookie is `SameSite=Strict`, and a request whose `Origin` is not this listener's own
//! (`http(s)://` + its `Host`) is answered 403. A refused sign-in says only that the token was not
//! accepted, whatever the reason; past a few failures a minute from one address the form answers
//! 429 without looking at the token.

use std::net::{IpAddr, Ipv4Addr};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::AdminState;
use super::auth::Refusal;
use super::console::escape;
use super::session::SESSION_LIFETIME;
use crate::listener::http::Peer;
use ratelimitd_core::clock::Timestamp;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "ratelimitd_console";

/// The largest login form read (a token is far shorter).
const MAX_FORM_BYTES: usize = 4096;

/// `POST /login`: the form's `token` exchanged for a session cookie.
pub(crate) async fn login(State(s): State<AdminState>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    if let Some(refused) = cross_origin(&parts.headers) {
        return refused;
    }
    if !s.tokens.any() {
        return Refusal::NoTokens.into_response();
    }
    let now = now(&s);
    let peer = (parts.extensions.get::<Peer>())
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Peer(a)| {
            a.ip().to_canonical()
        });
    if !s.sessions.may_try(peer, now) {
        let wait = s.sessions.retry_after(peer, now);
        let mut r = page(
            StatusCode::TOO_MANY_REQUESTS,
            &format!("Too many failed sign-ins from this address: try again in {wait} s."),
        );
        if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return r;
    }
    let token = match read_token(body).await {
        Ok(t) => t,
        Err(why) => return page(StatusCode::BAD_REQUEST, &why),
    };
    let Some(who) = s.tokens.check(Some(&format!("Bearer {token}"))) else {
        s.sessions.failed(peer, now);
        return page(StatusCode::UNAUTHORIZED, "The token was not accepted.");
    };
    let id = match s.sessions.start(who, now) {
        Ok(id) => id,
        Err(e) => return page(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()),
    };
    tracing::info!(who, "console sign-in");
    let cookie = format!(
        "{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/; Max-Age={}",
        SESSION_LIFETIME.as_secs()
    );
    to_console(&cookie)
}

/// `POST /logout`: ends the cookie's session (if any) and clears the cookie.
pub(crate) async fn logout(State(s): State<AdminState>, headers: HeaderMap) -> Response {
    if let Some(refused) = cross_origin(&headers) {
        return refused;
    }
    for id in session_ids(&headers) {
        s.sessions.end(id);
    }
    to_console(&format!(
        "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    ))
}

/// The ids of the session cookies `headers` carry (normally one).
pub(crate) fn session_ids(headers: &HeaderMap) -> impl Iterator<Item = &str> {
    (headers.get_all(header::COOKIE).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .map(|(_, id)| id)
}

/// The service clock's time (the manual clock in tests), else the system's.
pub(crate) fn now(s: &AdminState) -> Timestamp {
    use ratelimitd_core::clock::Clock;
    match &s.insight {
        Some(i) => i.clock.now(),
        None => ratelimitd_core::clock::SystemClock.now(),
    }
}

/// The login page with `message`, answered with `status` (401 when asking for the token).
pub(crate) fn page(status: StatusCode, message: &str) -> Response {
    let html = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>ratelimitd console: sign \
         in</title></head><body style=\"font-family:sans-serif;margin:1.5em\">\n\
         <h1>ratelimitd console</h1>\n<p id=\"message\">{}</p>\n\
         <form id=\"login\" method=\"post\" action=\"/login\">\
         <label>Admin token <input type=\"password\" name=\"token\" autocomplete=\"off\" \
         required autofocus></label> <button type=\"submit\">Sign in</button></form>\n\
         <p>The session lasts {} h on this instance.</p>\n</body></html>\n",
        escape(message),
        SESSION_LIFETIME.as_secs() / 3600
    );
    let mut r = (status, html_headers(), html).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    r
}

/// The headers of the console's HTML pages: no caching, no sniffing, no script, no framing, forms
/// posted to this listener only.
pub(crate) fn html_headers() -> [(header::HeaderName, &'static str); 4] {
    [
        (header::CONTENT_TYPE, "text/html; charset=utf-8"),
        (header::CACHE_CONTROL, "no-store"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; \
             frame-ancestors 'none'",
        ),
    ]
}

/// `303 See Other` to the console, setting `cookie`.
fn to_console(cookie: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    r.headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static("/"));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(v) = HeaderValue::from_str(cookie) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// 403 when the request's `Origin` is present and is not this listener (`http://` or `https://`
/// followed by its `Host`): a form posted from another site. A request without `Origin` (a
/// command-line client) passes: it cannot carry a browser's cookie unasked.
fn cross_origin(headers: &HeaderMap) -> Option<Response> {
    let origin = headers.get(header::ORIGIN)?;
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let same = match (origin.to_str(), host) {
        (Ok(o), Some(h)) => o
            .strip_prefix("http://")
            .or_else(|| o.strip_prefix("https://"))
            .is_some_and(|rest| rest.eq_ignore_ascii_case(h)),
        _ => false,
    };
    (!same).then(|| {
        page(
            StatusCode::FORBIDDEN,
            "A form posted from another site is refused.",
        )
    })
}

/// The `token` field of a urlencoded form body.
async fn read_token(body: Body) -> Result<String, String> {
    let bytes = crate::http::body::read(body, MAX_FORM_BYTES, "the login form's 4096 bytes")
        .await
        .map_err(|e| e.to_string())?;
    let text = std::str::from_utf8(&bytes).map_err(|_| "the form is not UTF-8".to_string())?;
    (text.split('&'))
        .filter_map(|pair| pair.split_once('='))
        .find(|(name, _)| *name == "token")
        .and_then(|(_, value)| form_decode(value))
        .ok_or_else(|| "The form has no token.".to_string())
}

/// A urlencoded form value decoded (`+` is a space, `%XX` a byte); `None` when malformed.
fn form_decode(value: &str) -> Option<String> {
    let mut out = Vec::with_capacity(value.len());
    let mut bytes = value.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_decoded() {
        assert_eq!(form_decode("a+b%2Fc%3d").as_deref(), Some("a b/c="));
        assert_eq!(form_decode("%E2%9C%93").as_deref(), Some("✓"));
        assert_eq!(form_decode("%4"), None);
        assert_eq!(form_decode("%zz"), None);
    }

    #[test]
    fn only_the_listeners_own_origin_may_post() {
        let with = |origin: Option<&str>| {
            let mut h = HeaderMap::new();
            h.insert(header::HOST, HeaderValue::from_static("127.0.0.1:6071"));
            if let Some(o) = origin {
                h.insert(header::ORIGIN, HeaderValue::from_str(o).unwrap());
            }
            cross_origin(&h).map(|r| r.status())
        };
        assert_eq!(with(None), None);
        assert_eq!(with(Some("http://127.0.0.1:6071")), None);
        assert_eq!(with(Some("https://127.0.0.1:6071")), None);
        for other in ["http://evil.example", "null", "http://127.0.0.1:6072"] {
            assert_eq!(with(Some(other)), Some(StatusCode::FORBIDDEN), "{other}");
        }
    }
}
