//! The policy database's part of startup: open it (or log why the policy API is off and carry on
//! serving files), start its refresh task, and hand the limiter its override index and the debug
//! port its admin state.

use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::AppError;
use super::tasks::stopped;
use crate::clock::Clock;
use crate::http::admin::AdminState;
use crate::policy::{Overrides, Policy, Tokens};
use crate::settings::Settings;

/// The override index the limiter reads and the admin API's state. A database that cannot be
/// opened turns the policy API off (logged); only an unreadable token file stops startup, since
/// it is a mistake the operator must see.
pub(super) async fn start(
    settings: &Settings,
    clock: &Arc<dyn Clock>,
    tasks: &mut JoinSet<()>,
    stop: &watch::Receiver<bool>,
) -> Result<(Arc<Overrides>, AdminState), AppError> {
    let tokens = Tokens::from_settings(&settings.policy).map_err(AppError::AdminTokens)?;
    let overrides = Arc::new(Overrides::default());
    let policy = match Policy::open(&settings.policy, clock.clone(), overrides.clone()).await {
        Ok(p) => {
            let p = Arc::new(p);
            let interval = settings.policy.refresh_interval;
            tasks.spawn(p.clone().refresh_loop(interval, stopped(stop.clone())));
            tracing::info!(
                data_dir = %settings.policy.data_dir.display(),
                admin_tokens = tokens.any(),
                "policy API on (SQLite)"
            );
            Ok(p)
        }
        Err(why) => {
            tracing::warn!(reason = %why, "policy API is off; serving the configuration files only");
            Err(Arc::from(why.as_str()))
        }
    };
    let admin = AdminState {
        policy,
        tokens: Arc::new(tokens),
    };
    Ok((overrides, admin))
}
