//! `when:` predicates through the real server on every store, over gRPC and `POST /check`: an
//! entry's predicate chooses between nodes, a limit's adds it only to the requests it holds for,
//! and a predicate that fails at run time answers by its limit's `failure_mode` and is counted;
//! `ratelimitd validate` refuses a bad one with its position.

use serde_json::json;

use crate::support::*;

/// Gold tenants 5 a minute; everyone else 20 a minute, plus 15 an hour for big requests (10 hits
/// or more). `plan` must be an int for the `free` limit, which fails open when it is not.
const CFG: &str = r#"
domain: api
descriptors:
  - key: tenant
    value: acme
    when: 'descriptor.tier == "gold"'
    descriptors:
      - key: tier
        rate_limit: {name: gold, unit: minute, requests_per_unit: 5}
  - key: tenant
    descriptors:
      - key: tier
        rate_limits:
          - {name: base, unit: minute, requests_per_unit: 20}
          - {name: big, unit: hour, requests_per_unit: 15, when: 'hits_addend >= 10'}
  - key: free
    rate_limit: {name: free, unit: minute, requests_per_unit: 1, failure_mode: allow, when: 'int(descriptor.free) > 0'}
  - key: strict
    rate_limit: {name: strict, unit: minute, requests_per_unit: 1, when: 'int(descriptor.strict) > 0'}
"#;

fn named(rpu: u32, unit: &str, name: &str) -> Option<(u32, String, String)> {
    Some((rpu, unit.into(), name.into()))
}

on_every_store!(when_over_grpc);
async fn when_over_grpc(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let gold = [("tenant", "acme"), ("tier", "gold")];
    let silver = [("tenant", "acme"), ("tier", "silver")];
    let r = s.rl("api", &[&gold]).await;
    assert_eq!(st(&r, 0), (Code::Ok, named(5, "MINUTE", "gold"), 4));
    // The exact node's predicate does not hold: the key-only node's limits apply.
    let base = |remaining| (Code::Ok, named(20, "MINUTE", "base"), remaining);
    assert_eq!(st(&s.rl("api", &[&silver]).await, 0), base(19));
    assert_eq!(st(&s.rl("api", &[&silver]).await, 0), base(18));
    assert_eq!(st(&s.rl("api", &[&gold]).await, 0).2, 3);
    // A big request (10 hits) meets the hourly limit too, which is the tighter one now.
    let entries = [("tenant", "globex"), ("tier", "x")];
    let mut big = request("api", &[&entries]);
    big.hits_addend = 10;
    let r = s.call(big).await.unwrap();
    assert_eq!(st(&r, 0), (Code::Ok, named(15, "HOUR", "big"), 5));
    // 1 hit: the hourly limit does not apply; the minute's counted both.
    assert_eq!(st(&s.rl("api", &[&entries]).await, 0), base(9));
}

on_every_store!(when_over_check);
async fn when_over_check(store: StoreKind) {
    let s = TestServer::start_with_store(&[("api.yaml", CFG)], &[], store).await;
    s.set_time(T0);
    let call = |tier: &'static str, cost: u64| {
        let s = &s;
        async move {
            let body = json!({"domain": "api", "client_key": "k", "cost": cost, "descriptors": [
                {"entries": [{"key": "tenant", "value": "acme"}, {"key": "tier", "value": tier}]}
            ]});
            let c = s.check(&body).await;
            (
                c.status,
                c.body["limit"].clone(),
                c.body["remaining"].clone(),
            )
        }
    };
    assert_eq!(call("gold", 1).await, (200, json!(5), json!(4)));
    assert_eq!(call("silver", 1).await, (200, json!(20), json!(19)));
    // `cost` is the hits: 10 bring in the hourly limit of 15, the tighter one.
    assert_eq!(call("silver", 10).await, (200, json!(15), json!(5)));
    assert_eq!(call("silver", 10).await.0, 429);
    assert_eq!(call("gold", 1).await, (200, json!(5), json!(3)));
}

/// A failing predicate: `allow` skips its limit, the default (`error`) fails the request with
/// UNAVAILABLE (and `/check` with 503), and each failure is counted per domain.
#[tokio::test]
async fn failing_predicates_follow_failure_mode_and_are_counted() {
    let env = [
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", "127.0.0.1:0"),
    ];
    let s = TestServer::start(&[("api.yaml", CFG)], &env).await;
    s.set_time(T0);
    // The positive path: a number holds, and the limit counts.
    let free = |code, remaining| (code, named(1, "MINUTE", "free"), remaining);
    assert_eq!(
        st(&s.rl("api", &[&[("free", "7")]]).await, 0),
        free(Code::Ok, 0)
    );
    assert_eq!(
        st(&s.rl("api", &[&[("free", "7")]]).await, 0),
        free(Code::OverLimit, 0)
    );
    let m = s.scrape().await;
    assert_eq!(
        m.count("ratelimitd_predicate_errors_total{domain=\"api\"}"),
        None,
        "{m}"
    );
    // Not a number: `allow` lets it through with no limit, every time.
    for _ in 0..3 {
        assert_eq!(
            st(&s.rl("api", &[&[("free", "x")]]).await, 0),
            (Code::Ok, None, 0)
        );
    }
    // No failure_mode: the default (error) fails the request.
    let err = s
        .call(request("api", &[&[("strict", "x")]]))
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unavailable);
    assert!(
        err.message().contains("int(descriptor.strict)"),
        "{}",
        err.message()
    );
    let c = s
        .check(&json!({"domain": "api", "client_key": "k", "descriptors": [
            {"entries": [{"key": "strict", "value": "y"}]}
        ]}))
        .await;
    assert_eq!(c.status, 503, "{}", c.body);
    let m = s.scrape().await;
    assert_eq!(
        m.count("ratelimitd_predicate_errors_total{domain=\"api\"}"),
        Some(5),
        "{m}"
    );
}

/// `ratelimitd validate` refuses a bad predicate as the server's load does: file, YAML path, the
/// problem with its line and column in the expression, exit code 1.
#[test]
fn validate_reports_a_bad_predicate_with_its_position() {
    let bad = "domain: d\ndescriptors:\n  - key: k\n    when: 'domain == \"d\" && tenant == \"x\"'\n    rate_limit: {unit: second, requests_per_unit: 1}\n";
    let err = crate::support::process::validate_refuses(bad);
    assert!(
        err.contains("bad.yaml: descriptors[0].when: invalid when 'domain == \"d\" && tenant == \"x\"': unknown variable 'tenant' (expected descriptor, domain or hits_addend) at line 1, column 18"),
        "{err}"
    );
}
