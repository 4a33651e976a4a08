//! The traffic of the accuracy example: classes of clients that alternate between sending
//! (Poisson arrivals at a rate drawn once per client) and silent periods, both of exponential
//! length, and the mixes of them the example measures. Seeded by the caller, so a seed always
//! gives the same trace.

use super::WINDOW_MICROS;

/// One kind of client in a mix.
pub(crate) struct Class {
    pub(crate) name: &'static str,
    /// Share of the mix's clients.
    pub(crate) share: f64,
    /// Rate while sending, in multiples of the limit (`limit` per minute = 1×).
    pub(crate) level: (f64, f64),
    /// Mean seconds of a sending period and of a silent one; silent 0 means always sending.
    pub(crate) on_off: (f64, f64),
}

/// A traffic mix: its clients are drawn from `classes` by share.
pub(crate) struct Mix {
    pub(crate) name: &'static str,
    pub(crate) clients: usize,
    pub(crate) limit: u64,
    pub(crate) classes: Vec<Class>,
}

/// Far under the limit even while sending: most clients of real traffic.
const FAR_UNDER: Class = Class {
    name: "far under (0.01–0.3×, bursts)",
    share: 0.0,
    level: (0.01, 0.3),
    on_off: (60.0, 240.0),
};
/// Over the limit while sending, in bursts of about two minutes.
const OVER: Class = Class {
    name: "over (1–3×, bursts)",
    share: 0.0,
    level: (1.0, 3.0),
    on_off: (120.0, 300.0),
};
/// The adversarial clients of the earlier traces: idle for ~5 minutes, then ~20 s at 2–10×.
const SPIKY: Class = Class {
    name: "spiky (2–10×, 20 s bursts)",
    share: 0.0,
    level: (2.0, 10.0),
    on_off: (20.0, 300.0),
};

fn with_share(class: &Class, share: f64) -> Class {
    Class { share, ..*class }
}

/// A client sending steadily (always on) at `lo`–`hi`× the limit.
fn steady(name: &'static str, share: f64, hi: f64) -> Class {
    Class {
        name,
        share,
        level: (0.1, hi),
        on_off: (1.0, 0.0),
    }
}

pub(crate) fn mixes() -> Vec<Mix> {
    let realistic = |name, over: f64| Mix {
        name,
        clients: 10_000,
        limit: 60,
        classes: vec![with_share(&FAR_UNDER, 1.0 - over), with_share(&OVER, over)],
    };
    let adversarial = |name, spiky: f64, hi: f64, steady_name| Mix {
        name,
        clients: 1_000,
        limit: 60,
        classes: vec![
            steady(steady_name, 1.0 - spiky, hi),
            with_share(&SPIKY, spiky),
        ],
    };
    vec![
        realistic("realistic, 1% of clients over", 0.01),
        realistic("realistic, 0.1% of clients over", 0.001),
        adversarial("adversarial A", 0.01, 0.5, "steady (0.1–0.5×)"),
        adversarial("adversarial B", 0.05, 1.2, "steady (0.1–1.2×)"),
        adversarial("adversarial C", 0.6, 1.2, "steady (0.1–1.2×)"),
    ]
}

/// Exponentially distributed waiting time with `mean` microseconds.
fn exp(rng: &mut fastrand::Rng, mean: f64) -> u64 {
    (-(1.0 - rng.f64()).ln() * mean) as u64
}

/// Every request time of one client of `class`, in microseconds from 0 to `end`.
pub(crate) fn client_trace(
    rng: &mut fastrand::Rng,
    class: &Class,
    limit: u64,
    end: u64,
) -> Vec<u64> {
    let level = class.level.0 + (class.level.1 - class.level.0) * rng.f64();
    let gap = WINDOW_MICROS as f64 / (limit as f64 * level); // mean µs between requests
    let (on, off) = (class.on_off.0 * 1e6, class.on_off.1 * 1e6);
    let mut out = Vec::new();
    let mut t = if off > 0.0 { exp(rng, off) } else { 0 };
    while t < end {
        let on_end = if off > 0.0 { t + exp(rng, on) } else { end };
        t += exp(rng, gap);
        while t < on_end.min(end) {
            out.push(t);
            t += exp(rng, gap).max(1);
        }
        t = on_end + exp(rng, off);
    }
    out
}
