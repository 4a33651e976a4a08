//! The insight features against the real service: `/v1/hotkeys` over HTTP (token required), the
//! status page rendered by headless Chromium (configured domain, override, hot key, escaped client
//! data), and the sampled decision log written by the real binary.

use std::time::Duration;

use crate::support::browser::dump_dom;
use crate::support::policy::{CFG_API, call, create};
use crate::support::process;
use crate::support::require;
use ratelimitd_core::clock::Stopwatch;
use reqwest::Method;

const XSS: &str = "<script>alert(1)</script>";

#[tokio::test]
async fn hotkeys_need_the_token_and_rank_by_hits_and_denials() {
    let data = tempfile::tempdir().unwrap();
    let s = crate::support::policy::start(data.path(), &[]).await;
    for _ in 0..4 {
        s.rl("api", &[&[("client_key", "alice")]]).await;
    }
    s.rl("api", &[&[("client_key", "bob")]]).await;
    assert_eq!(
        call(&s, Method::GET, "/v1/hotkeys", None, None).await.0,
        401
    );
    let (status, body) = s.admin(Method::GET, "/v1/hotkeys", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["by"], "hits");
    assert_eq!(body["keys"][0]["entries"][0]["value"], "alice");
    assert_eq!(body["keys"][0]["count"], 4);
    assert_eq!(body["keys"][1]["entries"][0]["value"], "bob");
    let path = "/v1/hotkeys?by=denials&limit=5";
    let (_, body) = s.admin(Method::GET, path, None).await;
    assert_eq!(body["keys"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(
        body["keys"][0]["count"], 2,
        "2/min: two of alice's four were over"
    );
    let (status, _) = s.admin(Method::GET, "/v1/hotkeys?by=x", None).await;
    assert_eq!(status, 400);
    s.shutdown().await;
}

#[tokio::test]
async fn prometheus_exports_the_hot_key_counts_by_rank_without_the_keys() {
    let data = tempfile::tempdir().unwrap();
    let prom = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = crate::support::policy::start(data.path(), &prom).await;
    for _ in 0..3 {
        s.rl("api", &[&[("client_key", "secret-client")]]).await;
    }
    let text = s.scrape().await;
    assert!(
        text.contains(r#"ratelimitd_hot_key_hits{by="hits",rank="1"} 3"#),
        "{text}"
    );
    assert!(
        text.contains(r#"ratelimitd_hot_key_hits{by="denials",rank="1"} 1"#),
        "{text}"
    );
    assert!(!text.contains("secret-client"), "{text}");
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_page_shows_the_domain_an_override_and_a_hot_key_escaped() {
    require!(Chromium);
    let data = tempfile::tempdir().unwrap();
    // Chromium sends no token: the page is opened to loopback peers for this test.
    let s = crate::support::policy::start(data.path(), &[("ADMIN_TRUST_LOOPBACK", "true")]).await;
    let id = create(&s, "vip", 50, "1970-01-01T01:00:00Z").await;
    for _ in 0..3 {
        s.rl("api", &[&[("client_key", XSS)]]).await;
    }
    // The third hit is over 2/minute: the violation log writes it once the (manual) clock has
    // moved by its batch delay (1 s); wait (bounded) for it.
    s.advance(Duration::from_secs(1));
    let watch = Stopwatch::start();
    loop {
        let (_, page) = s.admin(Method::GET, "/v1/violations", None).await;
        let written = page["violations"].as_array().is_some_and(|v| !v.is_empty());
        if written || watch.elapsed() > Duration::from_secs(10) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let url = s.admin_url("/");
    let dom = tokio::task::spawn_blocking(move || dump_dom(&url))
        .await
        .unwrap();
    assert!(dom.contains("ratelimitd status"), "{dom}");
    assert!(
        dom.contains("api.client_key"),
        "the configured limit: {dom}"
    );
    assert!(dom.contains(&id) && dom.contains("client_key=vip"), "{dom}");
    // Valid until 01:00:00, seen at 00:20:35 (one second after the start).
    assert!(dom.contains("39m 25s"), "time left of the override: {dom}");
    // The hot key is shown as text: the DOM holds it escaped, never as an element.
    assert!(
        dom.contains("client_key=&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{dom}"
    );
    assert!(!dom.contains(XSS), "{dom}");
    let violations = dom.split("id=\"violations\"").nth(1).unwrap_or_default();
    assert!(
        violations.contains("&lt;script&gt;alert(1)&lt;/script&gt;")
            && !violations.contains("none recorded"),
        "the recent violation: {dom}"
    );
    s.shutdown().await;
}

/// The decision lines of the binary at `rate` after three `/json` calls (waiting at most 5 s
/// for `expect` of them).
async fn decision_lines(cfg: &str, rate: &str, expect: usize) -> Vec<serde_json::Value> {
    let body =
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"u1"}]}]}"#;
    decision_lines_of(cfg, rate, expect, body).await
}

/// [`decision_lines`] for three `/json` calls with `body`.
async fn decision_lines_of(
    cfg: &str,
    rate: &str,
    expect: usize,
    body: &'static str,
) -> Vec<serde_json::Value> {
    let env = [
        ("RATELIMITD_CONFIG".to_string(), cfg.to_string()),
        ("DECISION_LOG_SAMPLE_RATE".to_string(), rate.to_string()),
        // Soft limits draw from a seeded source: their outcomes repeat run after run.
        ("RATELIMITD_TEST_RANDOM_SEED".to_string(), "27".to_string()),
    ];
    let p = process::spawn(&env);
    let client = reqwest::Client::new();
    for _ in 0..3 {
        let url = format!("http://{}/json", p.http_addr);
        client.post(url).body(body).send().await.unwrap();
    }
    let mut out = Vec::new();
    let watch = Stopwatch::start();
    let wait = if expect == 0 { 1 } else { 5 };
    while let Some(left) = Duration::from_secs(wait).checked_sub(watch.elapsed()) {
        let Ok(line) = p.lines.recv_timeout(left) else {
            break;
        };
        let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
        if v["@message"] == "decision" {
            out.push(v);
        }
        if expect > 0 && out.len() == expect {
            break;
        }
    }
    out
}

#[tokio::test]
async fn the_decision_log_writes_every_decision_at_rate_1_and_none_at_0() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("api.yaml"), CFG_API).unwrap();
    let cfg = dir.path().display().to_string();
    let lines = decision_lines(&cfg, "1", 3).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    let last = &lines[2];
    assert_eq!(last["domain"], "api");
    assert_eq!(last["entries"], r#"[{"key":"client_key","value":"u1"}]"#);
    assert_eq!(last["code"], "OVER_LIMIT");
    assert_eq!(last["limit_value"], 2);
    assert_eq!(last["limit_unit"], "MINUTE");
    assert_eq!(last["algorithm"], "fixed_window");
    assert_eq!(last["remaining"], 0);
    assert_eq!(last["hits"], 1);
    assert_eq!(last["source"], "store");
    assert!(last["reset_ms"].as_u64().is_some(), "{last}");
    assert_eq!(lines[0]["code"], "OK");
    assert_eq!(lines[0]["remaining"], 1);
    assert!(decision_lines(&cfg, "0", 0).await.is_empty());
    assert_eq!(
        (&lines[2]["class"], &lines[2]["shed"]),
        (&"".into(), &"".into())
    );
}

/// A limit with priority classes: each decision line names the request's class and whether it
/// was admitted or shed.
#[tokio::test]
async fn the_decision_log_names_the_class_and_the_shed_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "domain: api
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 2, priorities: {critical: 1.0, read: 0.5}}
";
    std::fs::write(dir.path().join("api.yaml"), yaml).unwrap();
    let cfg = dir.path().display().to_string();
    let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"u1"},{"key":"priority","value":"read"}]}]}"#;
    let lines = decision_lines_of(&cfg, "1", 3, body).await;
    let seen: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            let s = |k: &str| l[k].as_str().unwrap_or("?");
            (s("code"), s("class"), s("shed"))
        })
        .collect();
    let admitted = ("OK", "read", "admitted");
    let shed = ("OVER_LIMIT", "read", "shed");
    assert_eq!(seen, [admitted, shed, shed], "a read may use half of 2");
}

/// A soft limit: a denial in the soft zone's draw says `soft_denied` (limit 1, zone up to 2.4:
/// a hit at usage 2 is admitted when the draw `u` gives `floor(1 + 1.4·u) ≥ 2`, i.e. `u ≥ 5/7`;
/// seed 27 draws 0.59, 0.67 and 0.10, so the second and third hits are soft denials).
#[tokio::test]
async fn the_decision_log_says_when_a_denial_was_soft() {
    let dir = tempfile::tempdir().unwrap();
    let yaml = "domain: api
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 1, soft: {up_to: 2.4}}
";
    std::fs::write(dir.path().join("api.yaml"), yaml).unwrap();
    let cfg = dir.path().display().to_string();
    let body =
        r#"{"domain":"api","descriptors":[{"entries":[{"key":"client_key","value":"u1"}]}]}"#;
    let lines = decision_lines_of(&cfg, "1", 3, body).await;
    let seen: Vec<&str> = lines
        .iter()
        .map(|l| l["shed"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(seen, ["admitted", "soft_denied", "soft_denied"], "seed 27");
}
