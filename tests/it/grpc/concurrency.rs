//! Concurrency limits over real gRPC on every store (memory, Redis, Redis Cluster) with the
//! manual clock: the holder travels as a `ratelimitd.holder` descriptor entry, a start takes a
//! slot, a refund (`is_negative_hits`, as Envoy sends at stream done) gives it back; refused,
//! unknown and duplicate releases free nothing, and a holder that never comes back loses its slot
//! exactly at the lease timeout.

use std::time::Duration;

use crate::support::*;
use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitResponse;

/// Two slots per tenant, leases of one minute.
const CFG: &str = "domain: c
descriptors:
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 2, algorithm: concurrency}
";

/// Acquires (or, when `release`, gives back) `holder`'s slot of tenant `t`.
async fn slot(s: &TestServer, t: &str, holder: &str, release: bool) -> (Code, u32) {
    let mut req = request("c", &[&[("tenant", t), ("ratelimitd.holder", holder)]]);
    req.descriptors[0].is_negative_hits = release;
    let r: RateLimitResponse = s.call(req).await.expect("ShouldRateLimit succeeds");
    let (code, _, remaining) = st(&r, 0);
    (code, remaining)
}

on_every_store!(slots_are_taken_refused_and_given_back);
async fn slots_are_taken_refused_and_given_back(store: StoreKind) {
    let s = TestServer::start_with_store(&[("c.yaml", CFG)], &[], store).await;
    assert_eq!(slot(&s, "a", "r1", false).await, (Code::Ok, 1));
    assert_eq!(slot(&s, "a", "r2", false).await, (Code::Ok, 0));
    assert_eq!(slot(&s, "a", "r3", false).await, (Code::OverLimit, 0));
    assert_eq!(
        slot(&s, "b", "r3", false).await,
        (Code::Ok, 1),
        "each tenant has its own slots, the holder id is not part of the key"
    );
    // The refused holder, an unknown one: their releases are OK and free nothing.
    assert_eq!(slot(&s, "a", "r3", true).await, (Code::Ok, 0));
    assert_eq!(slot(&s, "a", "nobody", true).await, (Code::Ok, 0));
    assert_eq!(slot(&s, "a", "r4", false).await.0, Code::OverLimit);
    // A real release frees one slot, once.
    assert_eq!(slot(&s, "a", "r1", true).await, (Code::Ok, 1));
    assert_eq!(slot(&s, "a", "r1", true).await, (Code::Ok, 1));
    assert_eq!(slot(&s, "a", "r4", false).await, (Code::Ok, 0));
    assert_eq!(
        slot(&s, "a", "r5", false).await.0,
        Code::OverLimit,
        "r1's second release did not free r4's slot"
    );
    // A holder that starts again (a retried call) renews its slot and takes no other.
    assert_eq!(slot(&s, "a", "r2", false).await, (Code::Ok, 0));
}

on_every_store!(a_lease_ends_exactly_at_the_timeout);
async fn a_lease_ends_exactly_at_the_timeout(store: StoreKind) {
    let s = TestServer::start_with_store(&[("c.yaml", CFG)], &[], store).await;
    assert_eq!(slot(&s, "a", "crashed", false).await.0, Code::Ok);
    s.advance(Duration::from_secs(30));
    assert_eq!(slot(&s, "a", "late", false).await.0, Code::Ok);
    s.advance(Duration::from_millis(29_999));
    assert_eq!(
        slot(&s, "a", "r", false).await.0,
        Code::OverLimit,
        "1 ms before its timeout the first lease still holds"
    );
    s.advance(Duration::from_millis(1));
    assert_eq!(
        slot(&s, "a", "r", false).await,
        (Code::Ok, 0),
        "at exactly 60 s the first lease ended; the second still holds"
    );
    assert_eq!(slot(&s, "a", "r2", false).await.0, Code::OverLimit);
}

on_every_store!(without_a_holder_a_slot_frees_only_at_its_timeout);
async fn without_a_holder_a_slot_frees_only_at_its_timeout(store: StoreKind) {
    let s = TestServer::start_with_store(&[("c.yaml", CFG)], &[], store).await;
    let plain = |release| {
        let mut req = request("c", &[&[("tenant", "a")]]);
        req.descriptors[0].is_negative_hits = release;
        req
    };
    for want in [Code::Ok, Code::Ok, Code::OverLimit] {
        assert_eq!(overall(&s.call(plain(false)).await.unwrap()), want);
    }
    // Nobody to give back: the release names no holder.
    assert_eq!(overall(&s.call(plain(true)).await.unwrap()), Code::Ok);
    assert_eq!(
        overall(&s.call(plain(false)).await.unwrap()),
        Code::OverLimit
    );
    s.advance(Duration::from_secs(60));
    assert_eq!(overall(&s.call(plain(false)).await.unwrap()), Code::Ok);
}

/// One slot per tenant beside a rate of two a minute on the same descriptor, and a closed gate.
const WITH_RATE: &str = "domain: m
descriptors:
  - key: tenant
    rate_limits:
      - {name: in-flight, unit: minute, requests_per_unit: 1, algorithm: concurrency}
      - {name: per-minute, unit: minute, requests_per_unit: 2}
  - key: gate
    rate_limit: {unit: minute, requests_per_unit: 0}
";

on_every_store!(a_refused_request_holds_no_slot);
async fn a_refused_request_holds_no_slot(store: StoreKind) {
    let s = TestServer::start_with_store(&[("m.yaml", WITH_RATE)], &[], store).await;
    let call = |tenant: &'static str, holder: &'static str, gate: bool| {
        let mut d: Vec<&[(&str, &str)]> = vec![&[]];
        let entries = [("tenant", tenant), ("ratelimitd.holder", holder)];
        d[0] = &entries;
        let gate_entries = [("gate", "closed")];
        if gate {
            d.push(&gate_entries);
        }
        let req = request("m", &d);
        let s = &s;
        async move { overall(&s.call(req).await.expect("ShouldRateLimit succeeds")) }
    };
    // Refused by another descriptor: the slot taken in the same batch goes back at once.
    assert_eq!(call("a", "h1", true).await, Code::OverLimit);
    assert_eq!(call("a", "h2", false).await, Code::Ok, "h1 holds nothing");
    // Refused by the rate limit beside it: b's slot is free, but b used its two requests of
    // this minute, so h3 is refused and its slot goes back too.
    for holder in ["h1", "h2"] {
        assert_eq!(call("b", holder, false).await, Code::Ok);
        let mut release = request("m", &[&[("tenant", "b"), ("ratelimitd.holder", holder)]]);
        // 0 hits: the release gives nothing back to the rate limit of the same descriptor.
        release.descriptors[0].is_negative_hits = true;
        release.descriptors[0].hits_addend = Some(0);
        s.call(release).await.unwrap();
    }
    assert_eq!(call("b", "h3", false).await, Code::OverLimit);
    // T0 = 1234: the minute ends at 1260, long before a lease taken now would end.
    s.advance(Duration::from_secs(30));
    assert_eq!(
        call("b", "h4", false).await,
        Code::Ok,
        "the next minute the one slot is free: h3's refused acquisition holds nothing"
    );
}

/// A holder id over gRPC and `/json` has the caps `POST /check` gives its `holder` field: an empty
/// one (which would take an anonymous slot nobody can release) and one over 128 bytes are the
/// caller's error, and take no slot.
#[tokio::test]
async fn an_empty_or_oversized_holder_is_refused_on_every_edge() {
    let s = TestServer::start(&[("c.yaml", CFG)], &[]).await;
    for (holder, says) in [
        (String::new(), "ratelimitd.holder must not be empty"),
        (
            "h".repeat(5_000),
            "ratelimitd.holder is 5000 bytes; at most 128 are accepted",
        ),
    ] {
        let req = request("c", &[&[("tenant", "a"), ("ratelimitd.holder", &holder)]]);
        let e = s.call(req).await.expect_err("a bad holder is refused");
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{}", e.message());
        assert!(e.message().contains(says), "{}", e.message());
        let body = serde_json::json!({"domain": "c", "descriptors": [{"entries": [
            {"key": "tenant", "value": "a"}, {"key": "ratelimitd.holder", "value": holder}]}]});
        let r = s.post("/json", body.to_string()).await;
        assert_eq!(r.status(), 400, "/json refuses it too");
    }
    // Neither refusal took one of the tenant's two slots.
    assert_eq!(slot(&s, "a", "r1", false).await, (Code::Ok, 1));
    assert_eq!(slot(&s, "a", "r2", false).await, (Code::Ok, 0));
    // The cap itself is accepted.
    let at_cap = "h".repeat(128);
    assert_eq!(slot(&s, "b", &at_cap, false).await, (Code::Ok, 1));
}
