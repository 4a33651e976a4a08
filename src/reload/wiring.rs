//! The file configuration source's part of startup (`CONFIG_TYPE=FILE`): the first load, the
//! refusal of an empty start, and the watcher that reloads the files when they change. (The xDS
//! source's part is `xds::start`.)

use super::{ConfigHandle, ConfigSource, Reloading, WatchOptions, watch_loop};
use crate::background::Background;

/// Loads the files once, before any port opens (the Go service waits for its first configuration
/// event too).
pub(crate) async fn start(reloading: &Reloading) {
    reloading.reload(true).await;
}

/// Watches the configuration files and reloads them when they change (and every
/// `watch.poll`, in case a change event was missed), until shutdown. Once the watches are in
/// place the files are read again, so a change made since the first load is not missed.
pub(crate) fn watch_files(reloading: &Reloading, watch: WatchOptions, bg: &mut Background<'_>) {
    let r = reloading.clone();
    bg.spawn(watch_loop(
        r.watch_targets(),
        watch,
        bg.stopped(),
        move || {
            let r = r.clone();
            async move {
                r.reload(false).await;
            }
        },
    ));
}

/// After the first load from `source` (the files and the policy database's rules): with no
/// domain at all, every request would be allowed without a trace, which is how a misnamed
/// variable or a wrong path fails open. That refuses to start, naming what was searched, unless
/// `allowed` (`ALLOW_EMPTY_CONFIG`, or a policy database the API can write to, which fills in
/// later); then it is a warning at the default log level. `Err` is the refusal, for the operator.
pub(crate) fn refuse_empty(
    config: &ConfigHandle,
    source: &ConfigSource,
    allowed: bool,
) -> Result<(), String> {
    if config
        .snapshot()
        .is_some_and(|s| s.config.domain_count() > 0)
    {
        return Ok(());
    }
    let searched = source.describe_searched();
    let failure = config.last_failure();
    if allowed {
        // A log line stays one line: the errors joined, as in every round's error.
        let failure = failure
            .map(|f| format!("; the load failed: {}", super::one_line(&f.errors)))
            .unwrap_or_default();
        tracing::warn!(
            "no rate limit domain loaded; searched {searched}; every request is allowed until one is{failure}"
        );
        return Ok(());
    }
    let failure = failure
        .map(|f| format!("; the load failed:\n{}", f.errors))
        .unwrap_or_default();
    Err(format!(
        "no rate limit domain loaded; searched {searched}{failure}\n\
         Point RATELIMITD_CONFIG (or --config) at a config file or a directory of *.yaml files, \
         or set ALLOW_EMPTY_CONFIG=true to start with none (every request is then allowed)"
    ))
}
