//! The `HOTKEYS_CAPACITY` and `DECISION_LOG_SAMPLE_RATE` variables, translated into the insight
//! features' options ([`crate::insight::InsightOptions`]): how many keys each hot-key ranking
//! tracks and which share of decisions the sampled decision log writes.

use super::{SettingsError, Vars, parse};
use crate::insight::InsightOptions;

/// Reads the insight settings; a capacity or rate out of range is refused with its name.
pub(super) fn from_vars(v: &Vars) -> Result<InsightOptions, SettingsError> {
    let d = InsightOptions::default();
    let rate = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| "expected a number from 0 to 1 (the share of decisions logged)".into())
    };
    Ok(InsightOptions {
        hot_keys_capacity: v.parse("HOTKEYS_CAPACITY", d.hot_keys_capacity, |s| {
            parse::uint_in(s, 8, 65_536).map(|n| n as usize)
        })?,
        decision_log_sample_rate: v.parse(
            "DECISION_LOG_SAMPLE_RATE",
            d.decision_log_sample_rate,
            rate,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::settings_of as env;

    #[test]
    fn defaults_values_and_refusals() {
        let d = env(&[]).unwrap().insight;
        assert_eq!(
            (d.hot_keys_capacity, d.decision_log_sample_rate),
            (256, 0.0)
        );
        let s = env(&[
            ("HOTKEYS_CAPACITY", "64"),
            ("DECISION_LOG_SAMPLE_RATE", "0.25"),
        ])
        .unwrap()
        .insight;
        assert_eq!(
            (s.hot_keys_capacity, s.decision_log_sample_rate),
            (64, 0.25)
        );
        for bad in ["1.5", "-0.1", "half", "NaN"] {
            let e = env(&[("DECISION_LOG_SAMPLE_RATE", bad)]).unwrap_err();
            assert!(e.contains("DECISION_LOG_SAMPLE_RATE"), "{e}");
            assert!(e.contains("from 0 to 1"), "{e}");
        }
        let e = env(&[("HOTKEYS_CAPACITY", "0")]).unwrap_err();
        assert!(e.contains("HOTKEYS_CAPACITY"), "{e}");
    }
}
