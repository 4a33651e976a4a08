//! The client alone against the real ratelimitd binary: the priority class a check names decides
//! which requests a limit with `priorities` sheds, and `Retrying` comes back after a denial no
//! earlier than ratelimitd's `Retry-After` (the server's manual clock moved by each recorded wait,
//! so nothing sleeps).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Ratelimitd, T0};
use ratelimitd_client::clock::SleepFuture;
use ratelimitd_client::{CheckRequest, Client, Decision, Error, Retrying};

#[tokio::test]
async fn the_priority_class_is_sent_and_honoured() {
    // 10 a minute per client and endpoint, of which the class `read` may use half.
    let server = Ratelimitd::start(
        "domain: shop
descriptors:
  - key: client_key
    descriptors:
      - key: endpoint
        rate_limit: {unit: minute, requests_per_unit: 10, priorities: {critical: 1.0, read: 0.5}}
",
    );
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let pay = |priority: &str| {
        CheckRequest::new("p")
            .domain("shop")
            .endpoint("/pay")
            .priority(priority)
    };
    let mut allowed = Vec::new();
    for class in ["read"; 6].into_iter().chain(["critical"; 6]) {
        allowed.push(client.check(&pay(class)).await.unwrap().allowed);
    }
    let (read, critical) = allowed.split_at(6);
    assert_eq!(
        read,
        [true, true, true, true, true, false],
        "read is shed at half"
    );
    assert_eq!(
        critical,
        [true, true, true, true, true, false],
        "critical is admitted up to the whole limit"
    );
}

#[tokio::test]
async fn retrying_waits_out_a_denial_then_is_allowed() {
    let server = Arc::new(Ratelimitd::start(
        "domain: api
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 1}
",
    ));
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let req = CheckRequest::new("user:1");
    assert!(client.check(&req).await.unwrap().allowed);

    // Each wait moves ratelimitd's clock instead of sleeping.
    let waits = Arc::new(Mutex::new(Vec::new()));
    let (log, clock) = (waits.clone(), server.clone());
    let retrying = Retrying::new()
        .seed(1)
        .sleeper(Arc::new(move |d: Duration| -> SleepFuture {
            let mut waits = log.lock().unwrap();
            waits.push(d);
            let total: Duration = waits.iter().sum();
            clock.set_time(T0 + total.as_secs());
            Box::pin(async {})
        }));
    let mut calls = 0;
    let d: Result<Decision, Error> = retrying
        .call(|| {
            calls += 1;
            client.check(&req)
        })
        .await;
    assert!(d.unwrap().allowed, "allowed once the window has passed");
    let waits = waits.lock().unwrap().clone();
    assert_eq!((calls, waits.len()), (2, 1), "{waits:?}");
    assert!(
        waits[0] >= Duration::from_secs(60) && waits[0] <= Duration::from_secs(120),
        "never earlier than Retry-After (60 s), at most one more: {waits:?}"
    );
}

#[tokio::test]
async fn a_usage_report_goes_into_debt_and_the_next_check_is_refused() {
    // 100 tokens a minute per client; the check before the request charges nothing.
    let server = Ratelimitd::start(
        "domain: llm
descriptors:
  - key: client_key
    rate_limit: {unit: minute, requests_per_unit: 100, usage: report}
",
    );
    let client = Client::builder(&server.http)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ask = CheckRequest::new("tenant").domain("llm").cost(0);
    assert!(client.check(&ask).await.unwrap().allowed);
    let d = client.report(&ask, 700).await.unwrap();
    assert!(d.allowed, "a report is never refused: {d:?}");
    assert_eq!(d.remaining, Some(0));
    assert!(!client.check(&ask).await.unwrap().allowed, "in debt");
}
