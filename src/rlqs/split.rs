//! The split arithmetic, pure: a bucket's global budget divided among the streams reporting it,
//! in proportion to their recent demand, each weighed at least [`FLOOR`] of the average demand so
//! an idle Envoy still gets enough to start; then expressed as the token bucket Envoy enforces.
//!
//! Why a token bucket and not `requests_per_time_unit`: Envoy 1.40's filter does not implement
//! `RequestsPerTimeUnit` (it logs "not yet supported" and ignores the assignment). Envoy builds a
//! token bucket that starts FULL, refills continuously at `tokens_per_fill / whole seconds of
//! fill_interval`, and is rebuilt (full again) whenever an assignment's numbers change. So the
//! bucket is sized to hold one fill of the share, and one fill is the shortest whole number of
//! seconds worth at least one token: a 10/s share is 10 tokens a second (a fresh bucket admits at
//! most one second of the share at once), a share of 1 a minute is 1 token per 60 s. A limit's
//! explicit `burst` above its rate adds its share of the difference to the capacity.

use super::bucket::Budget;

/// The least weight of a reporter, as a share of the average demand.
pub(crate) const FLOOR: f64 = 0.1;

/// The longest fill interval (a share below one request a day is one request a day).
const MAX_FILL_SECS: f64 = 86_400.0;

/// A rise of an assignment's rate smaller than this fraction is not sent: Envoy rebuilds (and
/// refills) its bucket whenever the numbers change, so jitter would admit extra bursts. A fall is
/// always sent, so the shares of a bucket never add up to more than its budget for long.
pub(crate) const HYSTERESIS: f64 = 0.1;

/// The caller's fraction of the budget; `demands[0]` is the caller's, the rest the other live
/// reporters' (requests per second). Equal parts when nobody has demand.
pub(crate) fn fraction(demands: &[f64]) -> f64 {
    let n = demands.len().max(1) as f64;
    let clean = |d: &f64| if d.is_finite() { d.max(0.0) } else { 0.0 };
    let total: f64 = demands.iter().map(clean).sum();
    if total <= 0.0 {
        return 1.0 / n;
    }
    let floor = FLOOR * total / n;
    let weight = |d: &f64| clean(d).max(floor);
    let sum: f64 = demands.iter().map(weight).sum();
    demands.first().map_or(1.0, |d| weight(d) / sum)
}

/// The token bucket Envoy is told to enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenBucket {
    /// Capacity (the share of the limit's burst), at least 1.
    pub max_tokens: u32,
    /// Tokens per fill, at least 1.
    pub tokens_per_fill: u32,
    /// Fill interval in whole seconds.
    pub fill_interval_secs: u64,
}

/// What a stream is assigned for one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Assignment {
    /// `ALLOW_ALL`.
    AllowAll,
    /// `DENY_ALL`.
    DenyAll,
    /// A token bucket.
    Bucket(TokenBucket),
}

impl Assignment {
    /// The label of `ratelimitd_rlqs_assignments_total`.
    pub(crate) fn strategy(&self) -> &'static str {
        match self {
            Assignment::AllowAll => "allow_all",
            Assignment::DenyAll => "deny_all",
            Assignment::Bucket(_) => "token_bucket",
        }
    }
}

/// The assignment of `fraction` of `budget`.
pub(crate) fn assign(budget: Budget, fraction: f64) -> Assignment {
    let Budget::Rate {
        per_window,
        window_secs,
        burst,
    } = budget
    else {
        return match budget {
            Budget::DenyAll => Assignment::DenyAll,
            _ => Assignment::AllowAll,
        };
    };
    let fraction = fraction.clamp(0.0, 1.0);
    let clamp = |x: f64| x.clamp(1.0, f64::from(u32::MAX)) as u32;
    let share = per_window as f64 * fraction / window_secs.max(1) as f64;
    let secs = if share > 0.0 {
        (1.0 / share - 1e-9).ceil().clamp(1.0, MAX_FILL_SECS)
    } else {
        MAX_FILL_SECS
    };
    let tokens_per_fill = clamp((share * secs).round());
    let extra = burst.saturating_sub(per_window) as f64 * fraction;
    Assignment::Bucket(TokenBucket {
        max_tokens: tokens_per_fill.max(clamp(f64::from(tokens_per_fill) + extra.round())),
        tokens_per_fill,
        fill_interval_secs: secs as u64,
    })
}

/// `next`, unless it is a token bucket at most [`HYSTERESIS`] above the `previous` one.
pub(crate) fn steady(previous: Option<Assignment>, next: Assignment) -> Assignment {
    match (previous, next) {
        (Some(Assignment::Bucket(p)), Assignment::Bucket(n))
            if p.fill_interval_secs == n.fill_interval_secs
                && n.tokens_per_fill >= p.tokens_per_fill =>
        {
            let rise = f64::from(n.tokens_per_fill - p.tokens_per_fill);
            if rise <= HYSTERESIS * f64::from(p.tokens_per_fill) {
                Assignment::Bucket(p)
            } else {
                next
            }
        }
        _ => next,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWENTY: Budget = Budget::Rate {
        per_window: 20,
        window_secs: 1,
        burst: 20,
    };

    fn tokens(a: Assignment) -> u32 {
        match a {
            Assignment::Bucket(b) => b.tokens_per_fill,
            other => panic!("not a bucket: {other:?}"),
        }
    }

    #[test]
    fn equal_demand_splits_evenly() {
        assert_eq!(fraction(&[5.0, 5.0]), 0.5);
        let a = assign(TWENTY, fraction(&[5.0, 5.0]));
        assert_eq!(
            a,
            Assignment::Bucket(TokenBucket {
                max_tokens: 10,
                tokens_per_fill: 10,
                fill_interval_secs: 1
            })
        );
    }

    #[test]
    fn shares_follow_demand_and_sum_to_the_budget() {
        let demands = [30.0, 10.0];
        let mine = fraction(&demands);
        let theirs = fraction(&[10.0, 30.0]);
        assert!((mine - 0.75).abs() < 1e-9, "{mine}");
        assert!((mine + theirs - 1.0).abs() < 1e-9);
        // 15 and 5 requests a second, refilled every second.
        assert_eq!(tokens(assign(TWENTY, mine)), 15);
        assert_eq!(tokens(assign(TWENTY, theirs)), 5);
    }

    #[test]
    fn an_idle_reporter_gets_the_floor() {
        let idle = fraction(&[0.0, 100.0]);
        // Weighed at a tenth of the average (5 of 50): 5 / 105 of the budget.
        assert!((idle - 5.0 / 105.0).abs() < 1e-9, "{idle}");
        assert!(tokens(assign(TWENTY, idle)) >= 1);
        // Nobody has demand yet: equal parts.
        assert_eq!(fraction(&[0.0, 0.0, 0.0, 0.0]), 0.25);
        assert_eq!(fraction(&[]), 1.0);
        assert_eq!(fraction(&[f64::NAN, 1.0]), fraction(&[0.0, 1.0]));
    }

    #[test]
    fn blanket_rules_for_deny_and_unlimited() {
        assert_eq!(assign(Budget::DenyAll, 0.5), Assignment::DenyAll);
        assert_eq!(assign(Budget::AllowAll, 0.5), Assignment::AllowAll);
    }

    /// The bucket a share of `per_window` hits per `window_secs` (capacity `burst`) becomes, as
    /// (max tokens, tokens per fill, fill interval in seconds).
    fn bucket_of(per_window: u64, window_secs: u64, burst: u64, share: f64) -> (u32, u32, u64) {
        let budget = Budget::Rate {
            per_window,
            window_secs,
            burst,
        };
        let Assignment::Bucket(b) = assign(budget, share) else {
            panic!("a bucket");
        };
        (b.max_tokens, b.tokens_per_fill, b.fill_interval_secs)
    }

    #[test]
    fn slow_shares_refill_one_token_per_whole_interval() {
        // A third of 100 a minute is 0.56/s: one token every 2 s, holding one.
        assert_eq!(bucket_of(100, 60, 100, 1.0 / 3.0), (1, 1, 2));
        assert_eq!(bucket_of(1, 60, 1, 1.0), (1, 1, 60));
        // An explicit burst above the rate adds its share to the capacity only.
        assert_eq!(bucket_of(20, 1, 60, 0.5), (30, 10, 1));
    }

    #[test]
    fn small_changes_keep_the_previous_assignment() {
        let old = assign(TWENTY, 0.5);
        // A rise within a tenth is held back (Envoy would refill its bucket for nothing)...
        assert_eq!(steady(Some(old), assign(TWENTY, 0.52)), old);
        // ...a fall is always sent, so the shares never add up to more than the budget.
        let fell = assign(TWENTY, 0.45);
        assert_eq!(steady(Some(old), fell), fell);
        let moved = assign(TWENTY, 0.7);
        assert_eq!(steady(Some(old), moved), moved);
        assert_eq!(steady(Some(old), Assignment::DenyAll), Assignment::DenyAll);
        assert_eq!(steady(None, moved), moved);
    }
}
