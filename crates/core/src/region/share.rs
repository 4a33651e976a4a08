//! The share arithmetic of regional limits, pure: the effective limit a region enforces on its
//! share, shares that follow demand (with a floor, moving at most a set amount per sync), and the
//! bounds on how far the world's admissions can stray from the global limit.
//!
//! **Static shares.** Region `r` enforces `⌊s_r × L⌋` on its own store; with `Σ s_r ≤ 1` the
//! world admits at most `Σ ⌊s_r × L⌋ ≤ L` per window: no over-admission at all. Rounding down
//! loses less than one request per region ([`under_admission_from_rounding`]).
//!
//! **Shares that change.** A region's counter in a window only grows, and each decision compares
//! it with the share in force at that moment, so a region admits at most its *largest* share of
//! the window times `L`. If every sync moves at most `m` of the budget from some regions to others
//! (the sum of the decreases is at most `m`), and a window of length `W` sees at most
//! `k = ⌈W / I⌉ + 1` share sets in force (one per sync interval `I`, plus the one in force when it
//! began; a region applying a sync one interval late adds no set beyond that), then
//! `Σ_r max_t s_r(t) ≤ Σ_r s_r(end) + Σ_r (decreases of r in the window) ≤ 1 + (k − 1)·m`, so the
//! world admits at most `L × (1 + (k − 1)·m)` ([`over_admission_bound`]), and never more than
//! `L × R` for `R` regions each enforcing at most the whole limit.

/// The limit a region enforces: `limit × share`, rounded down (so the regions' limits together
/// never pass the global one).
pub fn effective(limit: u64, share: f64) -> u64 {
    if !(share > 0.0) {
        return 0;
    }
    ((limit as f64) * share.min(1.0)).floor() as u64
}

/// The most `regions` lose to rounding down per window when their shares sum to 1: under one
/// request each, so at most `regions − 1` in all.
pub fn under_admission_from_rounding(regions: usize) -> u64 {
    regions.saturating_sub(1) as u64
}

/// The largest world total per window when shares move: `limit × (1 + (k − 1) × moved)` with
/// `k = ⌈window / interval⌉ + 1` share sets in force in one window and at most `moved` of the
/// budget changing hands per sync; capped at `limit × regions`. Rounded up.
pub fn over_admission_bound(
    limit: u64,
    window_secs: f64,
    interval_secs: f64,
    moved: f64,
    regions: usize,
) -> u64 {
    let syncs = (window_secs / interval_secs.max(f64::MIN_POSITIVE)).ceil();
    let total = (limit as f64) * (1.0 + syncs * moved.clamp(0.0, 1.0));
    let cap = (limit as f64) * regions.max(1) as f64;
    total.min(cap).ceil() as u64
}

/// The shares that follow `demands` (one per region, in requests per second): proportional to
/// demand, each at least `floor` (so an idle region can still start), summing to 1. With no
/// demand anywhere every region gets an equal share. `floor` is capped at `1 / regions`.
pub fn demand_shares(demands: &[f64], floor: f64) -> Vec<f64> {
    let n = demands.len();
    if n == 0 {
        return Vec::new();
    }
    let floor = floor.clamp(0.0, 1.0 / n as f64);
    let clean: Vec<f64> = demands
        .iter()
        .map(|d| if d.is_finite() { d.max(0.0) } else { 0.0 })
        .collect();
    let total: f64 = clean.iter().sum();
    if total <= 0.0 {
        return vec![1.0 / n as f64; n];
    }
    // Every region gets the floor; what is left is divided by demand.
    let rest = 1.0 - floor * n as f64;
    clean.iter().map(|d| floor + rest * d / total).collect()
}

/// `from` moved toward `to` by at most `moved` of the budget in all (the decreases together at
/// most `moved`, and the increases scaled to match), so a sync never shifts more than `moved`.
/// Both must be share sets of the same regions summing to at most 1.
pub fn step_toward(from: &[f64], to: &[f64], moved: f64) -> Vec<f64> {
    let decrease: f64 = from.iter().zip(to).map(|(f, t)| (f - t).max(0.0)).sum();
    let k = if decrease <= moved || decrease <= 0.0 {
        1.0
    } else {
        moved.max(0.0) / decrease
    };
    from.iter().zip(to).map(|(f, t)| f + (t - f) * k).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_enforces_its_share_rounded_down() {
        assert_eq!(effective(100, 0.6), 60);
        assert_eq!(effective(100, 0.4), 40);
        assert_eq!(effective(10, 1.0 / 3.0), 3);
        assert_eq!(effective(1, 0.5), 0);
        assert_eq!(effective(100, 0.0), 0);
        assert_eq!(effective(100, f64::NAN), 0);
        assert_eq!(effective(100, 7.0), 100);
    }

    #[test]
    fn static_shares_never_admit_more_than_the_limit() {
        for limit in [1, 7, 100, 999, 10_000] {
            let shares = [0.5, 0.3, 0.2];
            let world: u64 = shares.iter().map(|s| effective(limit, *s)).sum();
            assert!(world <= limit, "{limit}: {world}");
            assert!(limit - world <= under_admission_from_rounding(shares.len()));
        }
    }

    #[test]
    fn demand_shares_follow_demand_above_the_floor() {
        let s = demand_shares(&[300.0, 100.0], 0.1);
        assert!(
            (s[0] - 0.7).abs() < 1e-9 && (s[1] - 0.3).abs() < 1e-9,
            "{s:?}"
        );
        // An idle region keeps its floor.
        let s = demand_shares(&[50.0, 0.0, 0.0], 0.05);
        assert!(
            (s[1] - 0.05).abs() < 1e-9 && (s[0] - 0.9).abs() < 1e-9,
            "{s:?}"
        );
        // No demand anywhere: equal shares; a floor too large for the regions is capped.
        assert_eq!(demand_shares(&[0.0, 0.0], 0.1), vec![0.5, 0.5]);
        let s = demand_shares(&[1.0, 0.0, 0.0], 0.9);
        assert!(s.iter().all(|x| (x - 1.0 / 3.0).abs() < 1e-9), "{s:?}");
        for s in [
            demand_shares(&[3.0, 9.0, f64::NAN], 0.01),
            demand_shares(&[1e300, 1e300], 0.2),
        ] {
            assert!((s.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{s:?}");
        }
    }

    #[test]
    fn a_sync_moves_at_most_the_set_amount() {
        let next = step_toward(&[0.9, 0.1], &[0.1, 0.9], 0.2);
        assert!(
            (next[0] - 0.7).abs() < 1e-9 && (next[1] - 0.3).abs() < 1e-9,
            "{next:?}"
        );
        // A small move is made whole.
        assert_eq!(step_toward(&[0.5, 0.5], &[0.4, 0.6], 0.2), vec![0.4, 0.6]);
    }

    /// The derived bound holds for a simulated window: each region admits its largest share of
    /// the window, shares move by `moved` per sync toward the other region's demand, and a region
    /// applies each sync one interval late half of the time.
    #[test]
    fn the_world_total_stays_within_the_derived_bound_while_shares_move() {
        let (limit, window, interval, moved) = (10_000u64, 10.0, 1.0, 0.05);
        let mut shares = vec![0.9, 0.1];
        let target = demand_shares(&[0.0, 1000.0], 0.05);
        let mut history = vec![shares.clone()];
        for _ in 0..(window / interval) as usize {
            shares = step_toward(&shares, &target, moved);
            history.push(shares.clone());
        }
        // Region 0 applies its sets one interval late; region 1 on time.
        let largest = |r: usize, late: usize| {
            (0..history.len())
                .map(|i| history[i.saturating_sub(late)][r])
                .fold(0.0, f64::max)
        };
        let world = effective(limit, largest(0, 1)) + effective(limit, largest(1, 0));
        let bound = over_admission_bound(limit, window, interval, moved, 2);
        assert!(
            world > limit,
            "shares moved, so the world admitted more: {world}"
        );
        assert!(world <= bound, "world {world} above the bound {bound}");
        // The bound is never above every region taking the whole limit.
        assert_eq!(over_admission_bound(limit, 3600.0, 1.0, 0.5, 2), 2 * limit);
    }
}
