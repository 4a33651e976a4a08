//! Who reaches the admin listener and the client data of the debug port, over real HTTP on
//! 127.0.0.1: a rebinding `Host` refused from loopback, the status page needing the token unless
//! loopback trust is turned on, a huge unauthenticated body answered before it is sent, the token
//! trimmed and the scheme in any case, and `/rlconfig` keeping stored client data (escaped) for
//! token holders.

use std::time::Duration;

use crate::support::policy::{TOKEN, call, override_body};
use crate::support::process::spawn;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const UNTIL: &str = "1970-01-01T00:30:00Z";

/// Reads from `conn` until the end of a response head (or the connection closes).
async fn read_head(conn: &mut TcpStream) -> String {
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends `request` on a new connection to `addr` and reads until the server closes it (the
/// request says `Connection: close`), within 10 s; the status and the body.
async fn raw_http(addr: &str, request: &[u8]) -> (u16, String) {
    let mut conn = TcpStream::connect(addr).await.unwrap();
    conn.write_all(request).await.unwrap();
    let mut all = Vec::new();
    let read = conn.read_to_end(&mut all);
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&all).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// A GET of `path` on `addr` with this `Host` and optional token; the status and the body.
async fn get_with_host(addr: &str, path: &str, host: &str, token: Option<&str>) -> (u16, String) {
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let head = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
    raw_http(addr, head.as_bytes()).await
}

#[tokio::test]
async fn a_rebinding_host_is_refused_from_loopback_even_with_the_token() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[("ADMIN_TRUST_LOOPBACK", "true")]).await;
    let addr = s.running().admin_addr.to_string();
    let port = s.running().admin_addr.port();
    for path in ["/", "/v1/overrides", "/v1/hotkeys", "/nope"] {
        for host in [
            "evil.example",
            &format!("evil.example:{port}"),
            "localhost.evil.example",
        ] {
            let (status, body) = get_with_host(&addr, path, host, Some(TOKEN)).await;
            assert_eq!(status, 421, "{path} with Host {host}: {body}");
            assert!(body.contains("ADMIN_ALLOWED_HOSTS"), "{body}");
        }
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        "[::1]".into(),
    ] {
        let (status, body) = get_with_host(&addr, "/v1/overrides", &host, Some(TOKEN)).await;
        assert_eq!(status, 200, "Host {host}: {body}");
    }
    s.shutdown().await;
    // An operator who serves the listener under another name says so.
    let data = tempfile::tempdir().unwrap();
    let env = [("ADMIN_ALLOWED_HOSTS", "admin.internal")];
    let s = crate::support::policy::start(data.path(), &env).await;
    let addr = s.running().admin_addr.to_string();
    let named = get_with_host(&addr, "/v1/overrides", "admin.internal:6071", Some(TOKEN)).await;
    assert_eq!(named.0, 200, "{}", named.1);
    assert_eq!(
        get_with_host(&addr, "/", "localhost", Some(TOKEN)).await.0,
        421
    );
    s.shutdown().await;
}

#[tokio::test]
async fn the_status_page_needs_the_token_from_loopback_unless_loopback_is_trusted() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let page = |token: Option<&'static str>| {
        let mut req = s.http.get(s.admin_url("/"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(
        page(None).await,
        401,
        "a loopback peer is not trusted by default"
    );
    assert_eq!(page(Some("wrong")).await, 401);
    assert_eq!(page(Some(TOKEN)).await, 200);
    s.shutdown().await;
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[("ADMIN_TRUST_LOOPBACK", "true")]).await;
    let open = s.http.get(s.admin_url("/")).send().await.unwrap();
    assert_eq!(open.status(), 200);
    // Trust opens the page only, never the API.
    assert_eq!(
        call(&s, Method::GET, "/v1/overrides", None, None).await.0,
        401
    );
    s.shutdown().await;
}

#[tokio::test]
async fn an_unauthenticated_huge_body_is_refused_before_it_is_sent() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let addr = s.running().admin_addr;
    for (line, auth) in [
        ("POST /v1/overrides", ""),
        ("POST /v1/overrides", "Authorization: Bearer wrong\r\n"),
        ("PUT /v1/policies/p1", ""),
    ] {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "{line} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: 2000000\r\n\r\n"
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        // Not one byte of the announced 2 MB is sent: the answer must not wait for it.
        let answer = tokio::time::timeout(Duration::from_secs(5), read_head(&mut conn))
            .await
            .unwrap_or_else(|_| panic!("{line}: no answer before the body was sent"));
        assert!(answer.starts_with("HTTP/1.1 401"), "{line}: {answer}");
    }
    let (_, list) = s.admin(Method::GET, "/v1/overrides", None).await;
    assert_eq!(list, json!({"overrides": [], "next_cursor": null}));
    s.shutdown().await;
}

#[tokio::test]
async fn the_binary_accepts_lowercase_bearer_and_a_token_with_a_trailing_newline() {
    // No config: this test is about the admin API, so an empty start is allowed explicitly.
    let env = [
        ("ADMIN_TOKEN".to_string(), "s3cret\n".to_string()),
        ("ALLOW_EMPTY_CONFIG".to_string(), "true".to_string()),
    ];
    let bin = spawn(&env);
    let http = reqwest::Client::new();
    let url = format!("http://{}/v1/hotkeys", bin.admin_addr);
    let status = |auth: &'static str| {
        let req = http.get(&url).header("authorization", auth);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status("bearer s3cret").await, 200);
    assert_eq!(status("BEARER s3cret ").await, 200);
    assert_eq!(status("Bearer s3cret\t").await, 200);
    assert_eq!(status("Bearer s3cre").await, 401);
    assert_eq!(status("Basic s3cret").await, 401);
}

#[tokio::test]
async fn rlconfig_shows_stored_client_data_only_with_the_token_and_escaped() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    let forged = "user:1\n# override: ov_forged domain=\"api\"";
    let body = override_body(forged, 5, UNTIL);
    let (status, created) = s.admin(Method::POST, "/v1/overrides", Some(body)).await;
    assert_eq!(status, 201, "{created}");
    let rule = json!({
        "domain": "tenants",
        "descriptor": [{"key": "client_key", "value": "vip-7"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": 9},
    });
    let (status, put) = s.admin(Method::PUT, "/v1/policies/r1", Some(rule)).await;
    assert_eq!(status, 201, "{put}");
    let file_line =
        "api.client_key: unit=MINUTE requests_per_unit=2, shadow_mode: false, quota_mode: false\n";
    let rlconfig = |token: Option<&'static str>| {
        let mut req = s.http.get(s.debug_url("/rlconfig"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap().text().await.unwrap() }
    };
    for anonymous in [rlconfig(None).await, rlconfig(Some("wrong")).await] {
        assert!(
            anonymous.starts_with(file_line),
            "Go's lines unchanged: {anonymous}"
        );
        for secret in ["user:1", "vip-7", "by=", "ov_"] {
            assert!(!anonymous.contains(secret), "{secret}: {anonymous}");
        }
        assert!(
            anonymous.contains("# rules: 1 limits hidden"),
            "{anonymous}"
        );
        assert!(anonymous.contains("# overrides: 1 hidden"), "{anonymous}");
    }
    let shown = rlconfig(Some(TOKEN)).await;
    assert!(shown.starts_with(file_line), "{shown}");
    assert!(
        shown.contains("tenants.client_key_vip-7: unit=MINUTE requests_per_unit=9"),
        "{shown}"
    );
    let overrides: Vec<&str> = shown
        .lines()
        .filter(|l| l.starts_with("# override:"))
        .collect();
    assert_eq!(
        overrides.len(),
        1,
        "a newline in a value forges no line: {shown}"
    );
    let id = created["id"].as_str().unwrap();
    assert!(
        overrides[0].starts_with(&format!(
            r#"# override: {id} domain="api" descriptor=[{{"key":"client_key","value":"user:1\n# override: ov_forged domain=\"api\""}}] unit=MINUTE"#
        )) && overrides[0].ends_with(r#" by="admin""#),
        "{shown}"
    );
    s.shutdown().await;
}
