//! The binary's commands other than serving: `validate`, `explain` and `reset`, which end the
//! process with their own exit code, and `dynamodb create-table`; and the environment they and
//! the settings read.

use crate::settings::Settings;
use crate::settings::{Cli, Command, SettingsError};

/// The process's environment variables, each read lossily: a variable that is not UTF-8 must not
/// panic the process.
pub fn env_vars() -> Vec<(String, String)> {
    std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect()
}

/// Runs a one-shot command (`validate`, `explain`, `reset`) on the real standard output and error:
/// its exit code, or `None` when the command line asks for another command (serving, or creating
/// the DynamoDB table), which needs the full settings. `vars` are the environment (`validate`
/// reads its load options from it); the error is those options' own.
pub async fn run_tool(cli: &Cli, vars: &[(String, String)]) -> Result<Option<i32>, SettingsError> {
    let env = |k: &str| std::env::var(k).ok();
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    Ok(Some(match cli.command() {
        Command::Validate {
            paths,
            merge_domains,
        } => {
            let load = Settings::validate_load_options(vars.iter().cloned())?;
            crate::validate::run(&paths, merge_domains, &load, &mut out, &mut err)
        }
        Command::Explain(args) => crate::explain::client::run(&args, env, &mut out, &mut err).await,
        Command::Reset(args) => {
            crate::explain::reset_client::run(&args, env, &mut out, &mut err).await
        }
        Command::Serve | Command::DynamodbCreateTable => return Ok(None),
    }))
}

/// `ratelimitd dynamodb create-table`: creates the table `DYNAMODB_TABLE` (in `DYNAMODB_REGION`,
/// at `DYNAMODB_ENDPOINT` when set) with the key and TTL the DynamoDB store uses, or makes sure
/// an existing one has TTL on; returns what was done, one line each.
pub async fn dynamodb_create_table(
    settings: &Settings,
) -> Result<String, ratelimitd_core::store::StoreError> {
    #[cfg(feature = "dynamodb")]
    return crate::store::dynamodb::create_table(&settings.dynamodb).await;
    #[cfg(not(feature = "dynamodb"))]
    {
        let _ = settings;
        Err(ratelimitd_core::store::StoreError::Unavailable(
            "this build has no DynamoDB store; build with `--features dynamodb`".into(),
        ))
    }
}
