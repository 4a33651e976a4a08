//! Signing in to the console from a browser over real HTTP on 127.0.0.1, with no loopback trust:
//! without a credential `/` is the login form; a wrong token is refused without saying why and,
//! repeated, throttled; the right one sets an `HttpOnly; SameSite=Strict; Path=/` cookie that opens
//! the console (and only it, never `/v1`); a form from another origin is refused; logout ends the
//! session; a session ends 8 hours later on the service clock. Chromium, which sends no token,
//! is shown the form.

use std::time::Duration;

use crate::support::TestServer;
use crate::support::browser::dump_dom;
use crate::support::policy::TOKEN;
use crate::support::require;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// Posts the login form with `token` (and `origin`, if any): the status, the headers, the body.
async fn login(
    s: &TestServer,
    token: &str,
    origin: Option<&str>,
) -> (StatusCode, HeaderMap, String) {
    let mut req = client()
        .post(s.admin_url("/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={}", token.replace('-', "%2D")));
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let r = req.send().await.unwrap();
    (r.status(), r.headers().clone(), r.text().await.unwrap())
}

/// GET `path` on the admin listener with `cookie` (a `Cookie` header value), if any.
async fn get(s: &TestServer, path: &str, cookie: Option<&str>) -> (StatusCode, String) {
    let mut req = client().get(s.admin_url(path));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    let r = req.send().await.unwrap();
    (r.status(), r.text().await.unwrap())
}

/// The `name=value` part of a `Set-Cookie` header, and its attributes.
fn set_cookie(h: &HeaderMap) -> (String, String) {
    let v = h
        .get("set-cookie")
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .expect("a Set-Cookie header");
    let (pair, attributes) = v.split_once(';').unwrap_or((v, ""));
    (pair.to_string(), attributes.trim().to_string())
}

async fn start() -> (TestServer, tempfile::TempDir) {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    (s, data)
}

#[tokio::test]
async fn the_login_form_exchanges_the_token_for_a_session_cookie_that_opens_the_console_only() {
    let (s, _data) = start().await;
    // No credential: the login form, as HTML a browser shows.
    let (status, page) = get(&s, "/", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(
        page.contains("<form id=\"login\" method=\"post\" action=\"/login\"")
            && page.contains("name=\"token\""),
        "{page}"
    );
    assert!(!page.contains("<script"), "{page}");

    // A wrong token is refused, with no cookie and no word on why.
    let (status, h, page) = login(&s, "not-the-token", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{page}");
    assert!(h.get("set-cookie").is_none());
    assert!(page.contains("The token was not accepted."), "{page}");
    // A form posted from another site is refused even with the right token.
    let (status, h, _) = login(&s, TOKEN, Some("http://evil.example")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(h.get("set-cookie").is_none());

    // The right token, from the console's own origin: a session cookie and back to the console.
    let origin = format!("http://{}", s.running().admin_addr);
    let (status, h, _) = login(&s, TOKEN, Some(&origin)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(h.get("location").unwrap(), "/");
    let (cookie, attributes) = set_cookie(&h);
    assert!(cookie.starts_with("ratelimitd_console="), "{cookie}");
    assert_eq!(cookie.len(), "ratelimitd_console=".len() + 64, "{cookie}");
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=28800"] {
        assert!(
            attributes.split("; ").any(|a| a == attribute),
            "{attribute} in {attributes}"
        );
    }
    let (status, page) = get(&s, "/", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("<h1>ratelimitd console</h1>"), "{page}");
    assert!(page.contains("action=\"/logout\""), "a way out: {page}");
    // The cookie opens the console, never the API.
    let (status, _) = get(&s, "/v1/overrides", Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A made-up session id is not one.
    let forged = format!("ratelimitd_console={}", "0".repeat(64));
    assert_eq!(
        get(&s, "/", Some(&forged)).await.0,
        StatusCode::UNAUTHORIZED
    );

    // Logout from another site is refused; from the console it clears the cookie and ends the
    // session, so the old cookie no longer opens the console.
    let logout = |origin: String| {
        client()
            .post(s.admin_url("/logout"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .send()
    };
    let r = logout("http://evil.example".into()).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(get(&s, "/", Some(&cookie)).await.0, StatusCode::OK);
    let r = logout(origin).await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    let (cleared, attributes) = set_cookie(r.headers());
    assert_eq!(cleared, "ratelimitd_console=");
    assert!(attributes.contains("Max-Age=0"), "{attributes}");
    let (status, page) = get(&s, "/", Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(page.contains("id=\"login\""), "{page}");
    s.shutdown().await;
}

#[tokio::test]
async fn a_session_ends_eight_hours_after_sign_in_on_the_service_clock() {
    let (s, _data) = start().await;
    let (status, h, _) = login(&s, TOKEN, None).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (cookie, _) = set_cookie(&h);
    s.advance(Duration::from_secs(8 * 3600 - 1));
    assert_eq!(get(&s, "/", Some(&cookie)).await.0, StatusCode::OK);
    s.advance(Duration::from_secs(1));
    let (status, page) = get(&s, "/", Some(&cookie)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "expired");
    assert!(page.contains("id=\"login\""), "{page}");
    s.shutdown().await;
}

#[tokio::test]
async fn repeated_failed_sign_ins_are_throttled_per_address() {
    let (s, _data) = start().await;
    for i in 0..5 {
        let (status, _, _) = login(&s, &format!("guess-{i}"), None).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "guess {i}");
    }
    // The sixth try in the minute is refused before the token is looked at, even the right one.
    let (status, h, page) = login(&s, TOKEN, None).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{page}");
    assert_eq!(h.get("retry-after").unwrap(), "60");
    assert!(h.get("set-cookie").is_none());
    // A minute later on the service clock the right token works again.
    s.advance(Duration::from_secs(60));
    assert_eq!(login(&s, TOKEN, None).await.0, StatusCode::SEE_OTHER);
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_without_a_token_is_shown_the_login_form() {
    require!(Chromium);
    let (s, _data) = start().await;
    let url = s.admin_url("/");
    let dom = tokio::task::spawn_blocking(move || dump_dom(&url))
        .await
        .unwrap();
    assert!(
        dom.contains("<form id=\"login\" method=\"post\" action=\"/login\">"),
        "{dom}"
    );
    assert!(dom.contains("type=\"password\""), "{dom}");
    s.shutdown().await;
}
