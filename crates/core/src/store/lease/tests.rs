//! The lease table on its own: serving from a grant, honest remaining counts, window ends,
//! changed limits and the drain on reload or shutdown.

use std::time::Duration;

use super::{Leases, Serve, Unspent, local};
use crate::algorithm::token_bucket::{self, Params, Step};
use crate::algorithm::{Algorithm, Decision, LimitSpec, Window, fixed_window};
use crate::clock::Timestamp;
use crate::store::Op;

fn op(limit: u64, lease: Option<u32>) -> Op {
    let spec = LimitSpec {
        algorithm: Algorithm::FixedWindow,
        limit,
        window: Window::from_secs(60).unwrap(),
        burst: limit,
    };
    Op {
        lease,
        ..Op::new("k", spec, 1)
    }
}

fn at(secs: u64) -> Timestamp {
    Timestamp::from_secs(secs)
}

/// Redis's answer to the reserving op at `now`: the count went from `after - 1` to `after`.
fn answer(o: &Op, after: u64, now: Timestamp) -> Decision {
    fixed_window::decide(after - 1, after, o.spec.limit, o.spec.window, now)
}

#[test]
fn a_grant_is_spent_locally_with_the_remaining_count_going_down() {
    let leases = Leases::new(0);
    let o = op(1000, Some(100));
    assert_eq!(leases.serve(&o, at(600)), Serve::Reserve);
    // The op itself took the counter to 10; 100 more were granted (Redis now holds 110).
    leases.granted(&o, &answer(&o, 10, at(600)), 100, at(600));
    for n in 1..=100 {
        let Serve::Served(d) = leases.serve(&o, at(610)) else {
            panic!("hit {n} not served from the lease");
        };
        assert!(!d.over_limit);
        assert_eq!(d.remaining, 990 - n, "remaining after local hit {n}");
        assert_eq!(d.reset_after, Duration::from_secs(50));
    }
    assert_eq!(
        leases.serve(&o, at(610)),
        Serve::Reserve,
        "spent: reserve again"
    );
    let t = leases.counters.read();
    assert_eq!((t.taken, t.granted, t.served), (1, 100, 100));
}

#[test]
fn a_lease_ends_with_its_window_and_only_serves_its_own_limit() {
    let leases = Leases::new(50);
    let o = op(1000, None);
    assert_eq!(
        leases.size(&o),
        50,
        "LEASE_DEFAULT_SIZE applies without `lease`"
    );
    assert_eq!(
        leases.size(&op(1000, Some(0))),
        0,
        "`lease: 0` turns it off"
    );
    leases.granted(&o, &answer(&o, 1, at(600)), 50, at(600));
    assert_eq!(leases.serve(&o, at(660)), Serve::Reserve, "window over");
    assert_eq!(leases.drain(at(660)), Vec::new(), "nothing to give back");

    leases.granted(&o, &answer(&o, 1, at(600)), 50, at(600));
    let changed = op(500, None);
    assert_eq!(leases.serve(&changed, at(601)), Serve::Reserve);
    assert_eq!(
        leases.take_outdated(&changed),
        50,
        "the old grant goes back"
    );
    assert_eq!(leases.take_outdated(&changed), 0, "once");
}

#[test]
fn drain_hands_over_every_unspent_hit_once() {
    let leases = Leases::new(0);
    let o = op(1000, Some(100));
    leases.granted(&o, &answer(&o, 1, at(600)), 100, at(600));
    for _ in 0..30 {
        assert!(matches!(leases.serve(&o, at(601)), Serve::Served(_)));
    }
    let unspent = leases.drain(at(602));
    assert_eq!(
        unspent,
        vec![Unspent {
            key: "k".into(),
            spec: o.spec,
            hits: 70
        }]
    );
    assert_eq!(leases.drain(at(602)), Vec::new());
    assert_eq!(leases.held(), 0);
}

#[test]
fn only_fixed_windows_and_token_buckets_taking_hits_now_lease() {
    let leases = Leases::new(100);
    let mut refund = op(10, None);
    refund.refund = true;
    let mut log = op(10, None);
    log.spec.algorithm = Algorithm::SlidingLog;
    for o in [refund, log] {
        assert_eq!(leases.serve(&o, at(1)), Serve::Plain, "{o:?}");
    }
    assert_eq!(leases.serve(&bucket(100), at(1)), Serve::Reserve);
}

fn bucket(limit: u64) -> Op {
    let mut o = op(limit, Some(100));
    o.spec.algorithm = Algorithm::TokenBucket;
    o
}

#[test]
fn a_token_bucket_lease_serves_until_its_ttl_then_goes_back() {
    // 1000 tokens a minute: 100 tokens refill in 6 s, the lease's TTL.
    let o = bucket(1000);
    assert_eq!(local::bucket_ttl(&o.spec, 100), Duration::from_secs(6));
    assert_eq!(
        local::bucket_ttl(&o.spec, 1),
        Duration::from_secs(1),
        "at least 1 s"
    );
    assert_eq!(
        local::bucket_ttl(&bucket(10).spec, 100),
        Duration::from_secs(60),
        "at most the window"
    );
    let leases = Leases::new(0);
    // The op took one token (999 left, the grant counted as left), 100 were granted.
    let p = Params::of(&o.spec);
    let step = Step {
        debt_before: 0,
        debt_after: p.token_cost,
        allowed: true,
    };
    let d = token_bucket::decide(&p, &o.spec, step, 1, at(600));
    leases.granted(&o, &d, 100, at(600));
    for n in 1..=40 {
        let Serve::Served(d) = leases.serve(&o, at(605)) else {
            panic!("hit {n} not served from the lease");
        };
        assert!(!d.over_limit);
        assert_eq!(d.remaining, 999 - n, "remaining after local hit {n}");
    }
    assert_eq!(leases.drain_expired(at(605)), Vec::new(), "still live");
    assert_eq!(leases.serve(&o, at(606)), Serve::Reserve, "TTL over");
    assert_eq!(
        leases.take_outdated(&o),
        60,
        "its reservation gives the rest back"
    );
    leases.granted(&o, &d, 50, at(606));
    assert_eq!(
        leases.drain_expired(at(612)),
        vec![Unspent {
            key: "k".into(),
            spec: o.spec,
            hits: 50
        }],
        "an idle key's lease goes back when its TTL passes"
    );
    assert_eq!(leases.held(), 0);
}

#[test]
fn a_forgotten_lease_serves_nothing_and_gives_nothing_back() {
    let leases = Leases::new(0);
    let on = |key: &str| Op {
        key: key.into(),
        ..op(1000, Some(10))
    };
    let (a, b) = (on("tenant_a"), on("tenant_b"));
    for o in [&a, &b] {
        assert_eq!(leases.serve(o, at(600)), Serve::Reserve);
        leases.granted(o, &answer(o, 1, at(600)), 10, at(600));
    }
    assert!(matches!(leases.serve(&a, at(601)), Serve::Served(_)));
    assert!(leases.forget(&a.key));
    assert!(!leases.forget(&a.key), "held once");
    assert_eq!(
        leases.serve(&a, at(601)),
        Serve::Reserve,
        "no lease left on a"
    );
    assert_eq!(leases.forget_prefix("tenant_"), 1);
    assert_eq!(leases.held(), 0);
    assert!(leases.drain(at(601)).is_empty(), "nothing to give back");
}
