//! The share arithmetic of regional limits, pure: the effective limit a region enforces on its
//! share, shares that follow demand (with a floor, moving at most a set amount per sync), and the
//! bounds on how far the world's admissions can stray from the global limit.
//!
//! **Static shares.** Region `r` enforces `⌊s_r × L⌋` on its own store, exactly: the share is
//! taken in whole parts per million ([`ppm`]), so `0.57` of 100 is 57. With `Σ s_r ≤ 1` the
//! world admits at most `Σ ⌊s_r × L⌋ ≤ L` per window: no over-admission at all. Rounding down
//! loses less than one request per region ([`under_admission_from_rounding`]).
//!
//! **Shares that follow demand.** Every sync each region computes the same target shares from
//! the demand board ([`demand_shares`]: proportional to demand, each at least the floor, summing
//! to 1) and moves *its own* share toward its target ([`step_own`]): down by at most `m` (the
//! limit's `max_step`), up by at most `m / (R − 1)` for `R` regions. The steps do not keep the
//! sum at most 1 by themselves (the regions' rounds interleave); what does is that a region holds
//! at most the share its entry on the board records, and a rise is recorded only as far as the
//! others' recorded shares leave of the whole ([`grant`], applied atomically by the global
//! store), so the shares in force add up to at most 1 at every instant.
//!
//! A region's counter in a window only grows, and each decision compares it with the share in
//! force at that moment, so a region admits at most its *largest* share of the window times `L`.
//! Over a window of length `W` with sync interval `I` each region syncs at most `k = ⌈W / I⌉`
//! times and rises at most `m / (R − 1)` each time, whenever it syncs, so
//! `Σ_r max_t s_r(t) ≤ Σ_r s_r(start) + k·m·R/(R − 1) ≤ 1 + k·m·R/(R − 1)`: the world admits at
//! most `L × (1 + k·m·R/(R − 1))` per window ([`over_admission_bound`]; `L × (1 + 2·k·m)` for two
//! regions), and never more than `L × R`. Shares
//! that fall take effect at once, so under-admission when demand moves lasts at most
//! `⌈(target − share) / (m / (R − 1))⌉` syncs for the region that gains.

/// A share's exact unit: a share is held, posted and enforced in whole parts per million.
pub const PPM: u64 = 1_000_000;

/// `share` in whole parts per million, rounded down. A share is written in decimals (`0.57`) and
/// read into the nearest float (`0.5699999…`), so a shortfall under a billionth of the part above
/// is float noise, not a smaller share: `0.57` is 570 000 parts, and `1 − 0.8` is 200 000. Shares
/// written with at most six decimals are then exact; finer ones are rounded down.
pub fn ppm(share: f64) -> u64 {
    if share.is_nan() || share <= 0.0 {
        return 0;
    }
    // Not negative, so the cast's truncation is its floor (no libm call on every decision).
    ((share.min(1.0) * PPM as f64) + 1e-3) as u64
}

/// `share` in whole parts per million, rounded up (float noise under a billionth forgiven, as in
/// [`ppm`]): a share that falls is lowered to this, never below what it computed.
pub fn ppm_up(share: f64) -> u64 {
    if share.is_nan() || share <= 0.0 {
        return 0;
    }
    ((share.min(1.0) * PPM as f64) - 1e-3).ceil().max(0.0) as u64
}

/// A share of `ppm` parts per million.
pub fn from_ppm(ppm: u64) -> f64 {
    ppm as f64 / PPM as f64
}

/// The limit a region enforces: `⌊limit × share⌋`, computed exactly on the share's parts per
/// million ([`ppm`]): `requests_per_unit: 100` with a share of `0.57` is 57, not the 56 the float
/// product `56.999…` would round down to. Rounded down, so the regions' limits together never
/// pass the global one.
pub fn effective(limit: u64, share: f64) -> u64 {
    let exact = u128::from(limit) * u128::from(ppm(share)) / u128::from(PPM);
    // At most `limit`: the share is at most 1.
    exact as u64
}

/// The most a region may hold when it asks for `want`: no more than what the other regions hold
/// (`others`, each at least its `floor`: a region that shows nothing holds at most its floor)
/// leaves of the whole. In parts per million. The global store applies this rule atomically
/// where a region records the share it holds (`lua/region_demand.lua`), so no two regions can
/// count on the same room; a region that holds more than it is granted (every key starts at its
/// floor and falls to it when its lease runs out, so only a race could do that) still records
/// what it holds, and lowers to the grant.
pub fn grant(want: u64, others: &[u64], floor: u64) -> u64 {
    let held: u64 = others.iter().map(|o| (*o).max(floor)).sum();
    want.min(PPM.saturating_sub(held))
}

/// The most `regions` lose to rounding down per window when their shares sum to 1: under one
/// request each, so at most `regions − 1` in all.
pub fn under_admission_from_rounding(regions: usize) -> u64 {
    regions.saturating_sub(1) as u64
}

/// The largest world total per window when shares follow demand: `limit × (1 + k·m·R/(R − 1))`
/// for `R` regions, `k = ⌈window / interval⌉` syncs of each region in one window and a step of
/// `m`; capped at `limit × R`. Rounded up.
pub fn over_admission_bound(
    limit: u64,
    window_secs: f64,
    interval_secs: f64,
    max_step: f64,
    regions: usize,
) -> u64 {
    let syncs = (window_secs / interval_secs.max(f64::MIN_POSITIVE)).ceil();
    let r = regions.max(2) as f64;
    let rises = syncs * max_step.clamp(0.0, 1.0) * r / (r - 1.0);
    let total = (limit as f64) * (1.0 + rises);
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

/// The fraction of its budget a region's demand must reach before it asks for more
/// ([`presses`]).
pub const PRESS: f64 = 0.5;

/// The largest share one region can hold: every other region keeps its `floor`
/// (`1 − (R − 1)·floor`, the floor capped at `1 / R` as in [`demand_shares`]).
pub fn alone(floor: f64, regions: usize) -> f64 {
    let n = regions.max(1) as f64;
    1.0 - (n - 1.0) * floor.clamp(0.0, 1.0 / n)
}

/// Whether a demand of `per_second` presses on `share` of a worldwide limit of `rate` requests
/// per second: it asks at least [`PRESS`] of the region's budget. Below that the region has no
/// use for more, so it need not tell the other regions about the key.
pub fn presses(per_second: f64, share: f64, rate: f64) -> bool {
    per_second > 0.0 && per_second >= PRESS * share * rate
}

/// A region's own share `from` moved toward `to`: down by at most `max_step`, up by at most
/// `max_step / (regions − 1)` (see the module's derivation of why rising slower bounds the sum).
pub fn step_own(from: f64, to: f64, max_step: f64, regions: usize) -> f64 {
    let up = max_step / regions.saturating_sub(1).max(1) as f64;
    if to >= from {
        from + (to - from).min(up)
    } else {
        from - (from - to).min(max_step)
    }
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

    /// Shares written with up to six decimals are enforced exactly, whatever float they read
    /// into: 0.57 of 100 is 57 (the float product is 56.999…), and what 0.5 and 0.3 leave is 0.2.
    #[test]
    fn a_share_written_in_decimals_is_enforced_exactly() {
        assert_eq!(effective(100, 0.57), 57);
        assert_eq!(effective(100, 0.29), 29);
        assert_eq!(effective(100, 1.0 - (0.5 + 0.3)), 20);
        assert_eq!(effective(10_000, 0.0001), 1);
        assert_eq!(effective(u64::MAX, 1.0), u64::MAX);
        for hundredths in 1..=100_u64 {
            let share: f64 = format!("0.{hundredths:02}").parse().unwrap_or(1.0);
            let share = if hundredths == 100 { 1.0 } else { share };
            assert_eq!(effective(100, share), hundredths, "{share}");
            assert_eq!(ppm(share), hundredths * 10_000);
            assert_eq!(ppm_up(share), hundredths * 10_000);
        }
        // Finer than a millionth is rounded down.
        assert_eq!(ppm(1.0 / 3.0), 333_333);
        assert_eq!(ppm_up(1.0 / 3.0), 333_334);
        assert_eq!(from_ppm(570_000), 0.57);
    }

    /// A region is granted what the others' recorded shares leave, counting each at least at its
    /// floor.
    #[test]
    fn a_rise_is_granted_what_the_others_leave() {
        assert_eq!(grant(600_000, &[500_000], 100_000), 500_000);
        assert_eq!(grant(600_000, &[300_000], 100_000), 600_000);
        assert_eq!(grant(900_000, &[0, 0], 50_000), 900_000);
        assert_eq!(grant(900_000, &[0, 200_000], 50_000), 750_000);
        assert_eq!(grant(900_000, &[700_000, 700_000], 50_000), 0);
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
    fn a_region_alone_holds_all_but_the_others_floors_and_asks_when_pressed() {
        assert!((alone(0.1, 2) - 0.9).abs() < 1e-9);
        assert!((alone(0.05, 3) - 0.9).abs() < 1e-9);
        assert!((alone(0.9, 2) - 0.5).abs() < 1e-9, "the floor is capped");
        // 200 a minute: 3.33 a second; a share of 0.3 is a budget of 1 a second.
        let rate = 200.0 / 60.0;
        assert!(presses(0.5, 0.3, rate) && presses(3.0, 0.3, rate));
        assert!(!presses(0.49, 0.3, rate) && !presses(0.0, 0.0, rate));
    }

    #[test]
    fn a_share_falls_by_the_step_and_rises_slower() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(step_own(0.9, 0.1, 0.2, 2), 0.7));
        assert!(close(step_own(0.1, 0.9, 0.2, 2), 0.3));
        assert!(
            close(step_own(0.1, 0.9, 0.2, 3), 0.2),
            "up by 0.2 / 2 with three regions"
        );
        assert!(
            close(step_own(0.45, 0.5, 0.2, 2), 0.5),
            "a small move is made whole"
        );
    }

    /// The sum of the shares in force never passes 1 while three regions follow one board whose
    /// demand jumps around, and a window's world total stays within the derived bound.
    #[test]
    fn shares_in_force_never_sum_above_one_and_the_window_stays_within_the_bound() {
        let (limit, window, interval, step) = (10_000u64, 10.0, 1.0, 0.05);
        let demands = [
            [100.0, 0.0, 0.0],
            [0.0, 0.0, 100.0],
            [0.0, 50.0, 50.0],
            [1.0, 0.0, 0.0],
        ];
        let mut shares = vec![1.0 / 3.0; 3];
        let mut largest = shares.clone();
        for round in 0..(window / interval) as usize {
            let target = demand_shares(&demands[round % demands.len()], 0.05);
            for (s, t) in shares.iter_mut().zip(&target) {
                *s = step_own(*s, *t, step, 3);
            }
            let sum: f64 = shares.iter().sum();
            assert!(sum <= 1.0 + 1e-9, "round {round}: {shares:?}");
            for (l, s) in largest.iter_mut().zip(&shares) {
                *l = f64::max(*l, *s);
            }
        }
        let world: u64 = largest.iter().map(|s| effective(limit, *s)).sum();
        let bound = over_admission_bound(limit, window, interval, step, 3);
        assert!(
            world > limit,
            "shares moved, so the world admitted more: {world}"
        );
        assert!(world <= bound, "world {world} above the bound {bound}");
        assert_eq!(over_admission_bound(limit, 3600.0, 1.0, 0.5, 2), 2 * limit);
    }
}
