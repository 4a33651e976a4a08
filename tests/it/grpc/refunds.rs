//! Refunds (`is_negative_hits`) through the real service, on every store (memory, Redis, Redis
//! Cluster) over gRPC on 127.0.0.1 with the manual clock: each algorithm gives hits back and admits
//! exactly that much more, a refund is OK even on a key over its limit, never creates a key (so it
//! never banks credit beyond the limit), and moves only `total_negative_hits`; `/json` takes the
//! field too.

use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;

/// One limit of 3 per minute per algorithm (buckets hold 3).
fn cfg() -> String {
    each_algorithm("r", 3, "minute", "")
}

/// One call on `key` with `hits`, given back when `refund`.
async fn hits(s: &TestServer, key: &str, hits: u64, refund: bool) -> RateLimitResponse {
    let mut req = request("r", &[&[(key, "v")]]);
    req.descriptors[0].hits_addend = Some(hits);
    req.descriptors[0].is_negative_hits = refund;
    s.call(req).await.expect("ShouldRateLimit succeeds")
}

/// The code of one plain hit on `key`.
async fn one(s: &TestServer, key: &str) -> Code {
    answer(&s.rl("r", &[&[(key, "v")]]).await).0
}

/// (code, remaining) of the only descriptor.
fn answer(r: &RateLimitResponse) -> (Code, u32) {
    let (code, _, remaining) = st(r, 0);
    (code, remaining)
}

on_every_store!(every_algorithm_gives_hits_back);
async fn every_algorithm_gives_hits_back(store: StoreKind) {
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &[], store).await;
    for key in ALGORITHM_KEYS {
        assert_eq!(
            answer(&hits(&s, key, 3, false).await),
            (Code::Ok, 0),
            "{key}"
        );
        assert_eq!(one(&s, key).await, Code::OverLimit);
        // A fixed window counted the rejected hit too (as the Go service does): 4 - 2 = 2 used.
        let want = if key == "fw" { 1 } else { 2 };
        let r = hits(&s, key, 2, true).await;
        assert_eq!(answer(&r), (Code::Ok, want), "{key}");
        assert_eq!(overall(&r), Code::Ok);
        assert_eq!(st(&r, 0).1, lim(3, "MINUTE"), "{key}");
        for _ in 0..want {
            assert_eq!(one(&s, key).await, Code::Ok, "{key}");
        }
        assert_eq!(
            one(&s, key).await,
            Code::OverLimit,
            "{key}: a refund gives back only what it names"
        );
    }
}

on_every_store!(a_refund_never_banks_credit);
async fn a_refund_never_banks_credit(store: StoreKind) {
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &[], store).await;
    for key in ALGORITHM_KEYS {
        // On an untouched key (none is created) and on one that is already back to empty.
        assert_eq!(
            answer(&hits(&s, key, 5, true).await),
            (Code::Ok, 3),
            "{key}"
        );
        hits(&s, key, 1, false).await;
        assert_eq!(
            answer(&hits(&s, key, 9, true).await),
            (Code::Ok, 3),
            "{key}"
        );
        assert_eq!(
            answer(&hits(&s, key, 3, false).await),
            (Code::Ok, 0),
            "{key}"
        );
        assert_eq!(one(&s, key).await, Code::OverLimit);
    }
}

on_every_store!(a_refund_in_the_next_window_gives_nothing_back);
async fn a_refund_in_the_next_window_gives_nothing_back(store: StoreKind) {
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &[], store).await;
    s.set_time(1259);
    assert_eq!(answer(&hits(&s, "fw", 3, false).await), (Code::Ok, 0));
    s.set_time(1260);
    assert_eq!(answer(&hits(&s, "fw", 3, true).await), (Code::Ok, 3));
    assert_eq!(answer(&hits(&s, "fw", 3, false).await), (Code::Ok, 0));
    assert_eq!(one(&s, "fw").await, Code::OverLimit);
}

#[tokio::test]
async fn refunds_count_only_total_negative_hits() {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("r.yaml", &cfg())], &env).await;
    hits(&s, "fw", 4, false).await;
    hits(&s, "fw", 3, true).await;
    hits(&s, "fw", 2, true).await;
    let m = s.scrape().await;
    let v = |stat: &str| {
        m.count(&format!(
            "ratelimit_service_rate_limit_{stat}{{domain=\"r\",key1=\"fw\",key2=\"\"}}"
        ))
    };
    assert_eq!(v("total_negative_hits"), Some(5), "{m}");
    assert_eq!(v("total_hits"), Some(4));
    assert_eq!(v("over_limit"), Some(1));
    assert_eq!(v("within_limit"), None, "refunds are not hits");
}

#[tokio::test]
async fn json_takes_is_negative_hits() {
    let s = TestServer::start(&[("r.yaml", &cfg())], &[]).await;
    hits(&s, "tb", 3, false).await;
    let body = r#"{"domain":"r","descriptors":[{"entries":[{"key":"tb","value":"v"}],"hitsAddend":2,"isNegativeHits":true}]}"#;
    let r = s.http.post(s.http_url("/json")).body(body).send().await;
    let v: serde_json::Value = r.unwrap().json().await.unwrap();
    assert_eq!(v["overallCode"], "OK");
    assert_eq!(v["statuses"][0]["limitRemaining"], 2, "{v}");
}

/// With `LOCAL_CACHE_SIZE_IN_BYTES`, a key over its limit is answered from the local cache; a
/// refund still reaches Redis and clears that entry, so the room it made is usable at once.
#[tokio::test]
async fn a_refund_clears_the_local_over_limit_cache() {
    require!(Redis);
    let env = [("LOCAL_CACHE_SIZE_IN_BYTES", "100000")];
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &env, StoreKind::Redis).await;
    assert_eq!(answer(&hits(&s, "fw", 4, false).await).0, Code::OverLimit);
    // From the cache: not counted in Redis, which holds 4.
    assert_eq!(one(&s, "fw").await, Code::OverLimit);
    assert_eq!(answer(&hits(&s, "fw", 3, true).await), (Code::Ok, 2));
    assert_eq!(answer(&s.rl("r", &[&[("fw", "v")]]).await), (Code::Ok, 1));
}

/// On Redis, a refund of a key nobody hit leaves no key behind, whatever the algorithm.
#[tokio::test]
async fn a_refund_creates_no_redis_key() {
    require!(Redis);
    let env = [("CACHE_KEY_PREFIX", "refund-no-key:")];
    let s = TestServer::start_with_store(&[("r.yaml", &cfg())], &env, StoreKind::Redis).await;
    for key in ALGORITHM_KEYS {
        assert_eq!(
            answer(&hits(&s, key, 2, true).await),
            (Code::Ok, 3),
            "{key}"
        );
    }
    let redis = crate::support::stores::shared_redis();
    assert_eq!(redis.cli(&["KEYS", "refund-no-key:*"]), "");
    hits(&s, "tb", 1, false).await;
    assert_ne!(
        redis.cli(&["KEYS", "refund-no-key:*"]),
        "",
        "a hit does create one"
    );
}
