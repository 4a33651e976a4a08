//! Usage-based limits through a real Envoy (`envoy/envoy.yaml` with
//! `examples/envoy/config.yaml`), on every store: the /llm route checks the tenant's token budget
//! when a request arrives (`hits_addend: 0`, charging nothing) and reports the tokens the upstream
//! answered with (its `x-usage-tokens` header, copied into metadata by a Lua filter) when the
//! stream is done (`apply_on_stream_done`). The report always counts, even past the budget; the
//! tenant is then refused with 429 and `Retry-After` until the window pays the debt back, while
//! another tenant is not. ratelimitd runs in-process on the manual clock (T0 = 1234 s).

use std::time::Duration;

use crate::support::envoy;
use crate::support::require;
use crate::support::{StoreKind, TestServer, on_every_store};
use ratelimitd_core::clock::Stopwatch;

/// `limit_remaining` of tenant `tenant`'s budget as a check (0 hits) finds it, once it equals
/// `want` (Envoy reports after the response, so the report may land a little after the client
/// saw the answer); the last value seen after 10 s otherwise.
async fn remaining_becomes(rl: &TestServer, tenant: &str, want: u32) -> u32 {
    let check = envoy::example_check(&[("generic_key", "llm"), ("tenant", tenant)]);
    envoy::remaining_becomes(rl, &check, want).await
}

on_every_store!(reported_tokens_past_the_budget_refuse_the_tenant_until_the_window_ends);
async fn reported_tokens_past_the_budget_refuse_the_tenant_until_the_window_ends(store: StoreKind) {
    require!(Envoy);
    let (rl, envoy) = envoy::start_example(store, &[]).await;
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

/// `limit_remaining` of the /ai budgets of `descriptor` (tenant, or tenant and model), read with
/// a refund of 0 (which changes nothing; a check would charge the estimate), once it equals
/// `want`; the last value seen after 10 s otherwise.
async fn budget_becomes(rl: &TestServer, descriptor: &[(&str, &str)], want: u32) -> u32 {
    let mut entries = vec![("generic_key", "ai")];
    entries.extend_from_slice(descriptor);
    let mut refund = envoy::example_check(&entries);
    refund.descriptors[0].is_negative_hits = true;
    envoy::remaining_becomes(rl, &refund, want).await
}

/// The /ai route: a tenant's budget (1000 tokens a minute) and its budget per model (400), each
/// charged an estimate of 200 at the check and trued up by the report; a 429 once either budget
/// cannot take another estimate, with `Retry-After` and `x-ratelimit-budget` naming the budget.
#[tokio::test]
async fn tenant_and_model_budgets_with_estimates_behind_envoy() {
    require!(Envoy);
    let env = [("RESPONSE_DYNAMIC_METADATA", "true")];
    let (rl, envoy) = envoy::start_example(StoreKind::Memory, &env).await;
    let http = reqwest::Client::new();
    let ask = |path: &'static str, tenant: &'static str, model: &'static str, tokens: u64| {
        http.get(envoy.url(path))
            .header("x-tenant", tenant)
            .header("x-model", model)
            .header("x-tokens", tokens.to_string())
            .send()
    };
    let tenant = [("tenant", "acme")];
    let big = [("tenant", "acme"), ("model", "big")];
    // 50 tokens: the estimates of 200 are trued up to 50 on both budgets.
    let r = ask("/ai", "acme", "big", 50).await.unwrap();
    assert_eq!(r.status(), 200, "{}", envoy.log());
    assert_eq!(
        budget_becomes(&rl, &tenant, 950).await,
        950,
        "{}",
        envoy.log()
    );
    assert_eq!(budget_becomes(&rl, &big, 350).await, 350);
    // An upstream failure used no tokens: its report of 0 gives both estimates back.
    assert_eq!(
        ask("/ai/fail", "acme", "big", 0).await.unwrap().status(),
        503
    );
    assert_eq!(budget_becomes(&rl, &tenant, 950).await, 950);
    assert_eq!(budget_becomes(&rl, &big, 350).await, 350);
    // 300 tokens: 100 more than the estimate is topped up.
    assert_eq!(ask("/ai", "acme", "big", 300).await.unwrap().status(), 200);
    assert_eq!(budget_becomes(&rl, &big, 50).await, 50);
    assert_eq!(budget_becomes(&rl, &tenant, 650).await, 650);
    // The model's budget cannot take another estimate: 429, naming it, until the minute
    // window (1200–1260) ends 26 s after T0.
    let r = ask("/ai", "acme", "big", 10).await.unwrap();
    assert_eq!(r.status(), 429, "{}", envoy.log());
    assert_eq!(r.headers()["retry-after"], "26");
    assert_eq!(
        r.headers()["x-ratelimit-budget"],
        "model-tokens",
        "{:?}",
        r.headers()
    );
    // The refused request gave the tenant's estimate back, and reported nothing.
    assert_eq!(budget_becomes(&rl, &tenant, 650).await, 650);
    assert_eq!(budget_becomes(&rl, &big, 50).await, 50);
    // Another model has its own budget; the tenant's runs out.
    assert_eq!(
        ask("/ai", "acme", "small", 500).await.unwrap().status(),
        200
    );
    assert_eq!(budget_becomes(&rl, &tenant, 150).await, 150);
    let r = ask("/ai", "acme", "other", 10).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["x-ratelimit-budget"], "tenant-tokens");
    // Another tenant is not limited; the next window pays the debts back.
    assert_eq!(ask("/ai", "globex", "big", 10).await.unwrap().status(), 200);
    rl.set_time(1_260);
    assert_eq!(ask("/ai", "acme", "big", 10).await.unwrap().status(), 200);
}
