//! The insight features' options: the hot-key rankings' size and the decision log's sample rate.

/// How the insight features run (read from `HOTKEYS_CAPACITY` and `DECISION_LOG_SAMPLE_RATE` by
/// `settings`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InsightOptions {
    /// `HOTKEYS_CAPACITY` (default 256, 8 to 65536): keys tracked per ranking and per half-minute;
    /// memory stays at this many entries whatever the number of distinct keys.
    pub hot_keys_capacity: usize,
    /// `DECISION_LOG_SAMPLE_RATE` (default 0, 0 to 1): the share of decisions written to the
    /// decision log; 0 turns it off.
    pub decision_log_sample_rate: f64,
}

impl Default for InsightOptions {
    fn default() -> InsightOptions {
        InsightOptions {
            hot_keys_capacity: 256,
            decision_log_sample_rate: 0.0,
        }
    }
}
