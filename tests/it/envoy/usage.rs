//! Usage-based limits through a real Envoy (`envoy/envoy.yaml` with
//! `examples/envoy/config.yaml`), on every store: the /llm route checks the tenant's token budget
//! when a request arrives (`hits_addend: 0`, charging nothing) and reports the tokens the upstream
//! answered with (its `x-usage-tokens` header, copied into metadata by a Lua filter) when the
//! stream is done (`apply_on_stream_done`). The report always counts, even past the budget; the
//! tenant is then refused with 429 and `Retry-After` until the window pays the debt back, while
//! another tenant is not. ratelimitd runs in-process on the manual clock (T0 = 1234 s).

use std::time::Duration;

use crate::support::envoy::Envoy;
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};
use ratelimitd_core::clock::Stopwatch;

/// ratelimitd on `store` with the example config, and Envoy in front of it.
async fn start(store: StoreKind) -> (TestServer, Envoy) {
    let config = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/envoy/config.yaml"
    ))
    .unwrap();
    let rl = TestServer::start_with_store(&[("config.yaml", &config)], &[], store).await;
    let envoy = Envoy::start(&rl.running().grpc_addr.to_string()).await;
    (rl, envoy)
}

/// `limit_remaining` of tenant `tenant`'s budget as a check (0 hits) finds it, once it equals
/// `want` (Envoy reports after the response, so the report may land a little after the client
/// saw the answer); the last value seen after 10 s otherwise.
async fn remaining_becomes(rl: &TestServer, tenant: &str, want: u32) -> u32 {
    let watch = Stopwatch::start();
    loop {
        let mut req = crate::support::request(
            "envoy-demo",
            &[&[("generic_key", "llm"), ("tenant", tenant)]],
        );
        req.descriptors[0].hits_addend = Some(0);
        let got = rl
            .call(req)
            .await
            .expect("ShouldRateLimit succeeds")
            .statuses[0]
            .limit_remaining;
        if got == want || watch.elapsed() > Duration::from_secs(10) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

on_every_store!(reported_tokens_past_the_budget_refuse_the_tenant_until_the_window_ends);
async fn reported_tokens_past_the_budget_refuse_the_tenant_until_the_window_ends(store: StoreKind) {
    require!(Envoy);
    let (rl, envoy) = start(store).await;
    let http = reqwest::Client::new();
    let ask = |tenant: &'static str, tokens: u64| {
        http.get(envoy.url("/llm"))
            .header("x-tenant", tenant)
            .header("x-tokens", tokens.to_string())
            .send()
    };
    // 1000 tokens a minute: the check passes while the budget has room, whatever the request
    // will cost; each response's tokens are reported when it ends.
    let r = ask("acme", 700).await.unwrap();
    assert_eq!(r.status(), 200, "{}", envoy.log());
    assert_eq!(r.headers()["x-usage-tokens"], "700");
    assert_eq!(
        remaining_becomes(&rl, "acme", 300).await,
        300,
        "700 reported"
    );
    assert_eq!(ask("acme", 700).await.unwrap().status(), 200);
    // 1400 of 1000: the report counted in full (debt), so the next check is refused.
    assert_eq!(remaining_becomes(&rl, "acme", 0).await, 0);
    let watch = Stopwatch::start();
    let refused = loop {
        let r = ask("acme", 1).await.unwrap();
        if r.status() == 429 || watch.elapsed() > Duration::from_secs(10) {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused.status(), 429, "{}", envoy.log());
    // The minute window (1200–1260) ends 26 s after T0.
    assert_eq!(refused.headers()["retry-after"], "26");
    // Another tenant's budget is its own.
    assert_eq!(ask("globex", 10).await.unwrap().status(), 200);
    // The next window pays the debt back.
    rl.set_time(1_260);
    assert_eq!(ask("acme", 10).await.unwrap().status(), 200);
}
