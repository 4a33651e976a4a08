//! The operator console against the real service on a real redis-server, rendered by headless
//! Chromium (with a screenshot of each state in `$CARGO_TARGET_TMPDIR/console/`): the health
//! banner is green while Redis answers, red — at the top of the page — once Redis is gone and
//! calls are answered by the failure mode, green again when Redis is back; the decision charts
//! count the traffic; client data is escaped; the key search shows a key's limit and live counter
//! without counting a hit.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::browser::{dump_dom, screenshot};
use crate::support::chaos::{self, source};
use crate::support::redis::RedisServer;
use crate::support::require;
use crate::support::{Code, TestServer, overall, request};
use ratelimitd_core::clock::Stopwatch;

const XSS: &str = "<script>alert(1)</script>";

const CFG: &str = r#"
domain: console
descriptors:
  - key: client_key
    rate_limit: {name: per_client, unit: minute, requests_per_unit: 5, failure_mode: allow}
  - key: strict
    rate_limit: {unit: minute, requests_per_unit: 5}
"#;

async fn start(redis: &RedisServer) -> TestServer {
    let mut env = chaos::ENV.to_vec();
    // Chromium sends no token: the console is opened to loopback peers for this test.
    env.push(("ADMIN_TRUST_LOOPBACK", "true"));
    TestServer::start_on(&[("console.yaml", CFG)], &env, Some(redis)).await
}

fn shot(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{name}.png"))
}

/// The DOM of `path` on the admin listener, and a screenshot of it named `name`.
async fn render(s: &TestServer, path: &str, name: &'static str) -> String {
    let url = s.admin_url(path);
    tokio::task::spawn_blocking(move || {
        screenshot(&url, &shot(name));
        dump_dom(&url)
    })
    .await
    .unwrap()
}

/// The console's HTML as served, once `want` is in it (bounded: 15 s of real time, which covers
/// the store health probe's one-second period).
async fn until_page_says(s: &TestServer, want: &str) -> String {
    let watch = Stopwatch::start();
    loop {
        let page = s.http.get(s.admin_url("/")).send().await.unwrap();
        let text = page.text().await.unwrap();
        if text.contains(want) {
            return text;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(15),
            "never said {want:?}: {text}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The health banner: the first section of the body.
fn banner(dom: &str) -> &str {
    let start = dom.find("<section id=\"health\"").expect("a health banner");
    let end = start + dom[start..].find("</section>").unwrap();
    &dom[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_banner_is_red_while_redis_is_down_and_green_when_it_is_back() {
    require!(Redis, Chromium);
    let mut redis = RedisServer::start();
    let s = start(&redis).await;
    for _ in 0..8 {
        s.rl("console", &[&[("client_key", XSS)]]).await;
    }
    let dom = render(&s, "/", "healthy").await;
    let top = banner(&dom);
    assert!(
        top.contains("class=\"banner ok\"") && top.contains("Healthy"),
        "{top}"
    );
    assert!(!top.contains("DEGRADED"), "{top}");
    assert!(
        dom.find("id=\"health\"") < dom.find("id=\"rates\""),
        "the banner comes first"
    );
    // The charts counted the traffic: 5 allowed, 3 over the limit, none degraded.
    assert!(
        dom.contains("data-kind=\"allowed\" data-total=\"5\""),
        "{dom}"
    );
    assert!(
        dom.contains("data-kind=\"denied\" data-total=\"3\""),
        "{dom}"
    );
    assert!(
        dom.contains("data-kind=\"failure mode\" data-total=\"0\""),
        "{dom}"
    );
    assert!(dom.contains("<rect x="), "bars are drawn");
    // The client's value is text, never markup: Chromium built no script element from it.
    assert!(
        dom.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{dom}"
    );
    assert!(!dom.contains("<script"), "{dom}");
    assert!(dom.contains("ratelimitd console") && dom.contains("backend redis single"));

    redis.kill();
    for _ in 0..6 {
        let r = s.rl("console", &[&[("client_key", "during")]]).await;
        assert_eq!(overall(&r), Code::Ok, "failure_mode: allow answers");
    }
    // The default failure mode (error, as Go) answers with an error instead.
    for _ in 0..2 {
        let r = s.call(request("console", &[&[("strict", "x")]])).await;
        assert!(r.is_err(), "{r:?}");
    }
    until_page_says(&s, "not answering").await;
    let dom = render(&s, "/", "redis-down").await;
    let top = banner(&dom);
    assert!(top.contains("class=\"banner degraded\""), "{top}");
    assert!(top.contains("DEGRADED"), "{top}");
    assert!(
        top.contains("<b>store</b>: redis single") && top.contains("not answering"),
        "{top}"
    );
    assert!(top.contains("<b>breakers</b>: main open"), "{top}");
    assert!(
        top.contains("ACTIVE: 6 decision(s) in the last minute were answered by the failure mode"),
        "{top}"
    );
    assert!(
        dom.contains("data-kind=\"failure mode\" data-total=\"6\""),
        "{dom}"
    );
    // Failure-mode answers are not errors; the two calls that got one are.
    assert!(
        dom.contains("data-kind=\"errors\" data-total=\"2\""),
        "{dom}"
    );
    assert!(
        top.contains("<b>errors</b>: 2 call(s) answered with an error in the last minute"),
        "{top}"
    );

    redis.restart();
    // The breaker's cool-down runs on the manual clock: advance it until Redis decides again.
    let watch = Stopwatch::start();
    loop {
        s.advance(Duration::from_secs(1));
        let r = s.rl("console", &[&[("client_key", "after")]]).await;
        if source(&r) == "store" {
            break;
        }
        assert!(
            watch.elapsed() < Duration::from_secs(20),
            "Redis decides again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A minute later the failure mode is history, not a problem. (A console view samples the
    // counters first: what moved is counted at the time it is seen.)
    until_page_says(&s, "ratelimitd console").await;
    s.advance(Duration::from_secs(70));
    until_page_says(&s, "class=\"banner ok\"").await;
    let dom = render(&s, "/", "recovered").await;
    let top = banner(&dom);
    assert!(top.contains("Healthy"), "{top}");
    assert!(
        top.contains("<b>failure mode</b>: inactive; last used <time"),
        "{top}"
    );
    assert!(
        top.contains("<b>errors</b>: none in the last minute; last <time"),
        "{top}"
    );
    s.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_search_shows_the_limit_and_live_counter_counting_no_hit() {
    require!(Redis, Chromium);
    let redis = RedisServer::start();
    let s = start(&redis).await;
    for _ in 0..2 {
        s.rl("console", &[&[("client_key", "bob")]]).await;
    }
    let path = "/?domain=console&descriptor=client_key%3Dbob";
    for _ in 0..3 {
        let dom = render(&s, path, "search").await;
        let start = dom.find("id=\"search-result\"").expect("a search result");
        let result = &dom[start..];
        assert!(result.contains("console / client_key=bob"), "{result}");
        assert!(result.contains("<td>per_client</td>"), "{result}");
        assert!(result.contains("5 per minute"), "{result}");
        assert!(result.contains("2 used, 3 remaining (within)"), "{result}");
        assert!(
            result.contains("no stored override on this descriptor"),
            "{result}"
        );
    }
    // Three searches (six page loads) later bob still has 3 left: the third hit leaves 2.
    let r = s.rl("console", &[&[("client_key", "bob")]]).await;
    assert_eq!(r.statuses[0].limit_remaining, 2);
    // The busiest key is listed nearest its threshold.
    let dom = dump_dom(&s.admin_url("/"));
    let near = &dom[dom.find("id=\"nearest\"").unwrap()..];
    assert!(
        near.contains("client_key=bob") && near.contains("60%"),
        "{near}"
    );
    // A bad descriptor is explained, not a server error.
    let dom = dump_dom(&s.admin_url("/?domain=console&descriptor=bob"));
    assert!(dom.contains("expected key=value pairs"), "{dom}");
    s.shutdown().await;
}
