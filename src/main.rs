//! The `ratelimitd` binary: settings → logging → serve until SIGTERM/SIGINT, reloading on SIGHUP
//! (or `validate` configs, `explain` a request to a running instance, or create the DynamoDB
//! store's table).

use std::process::ExitCode;

use anyhow::Context;
use ratelimitd::{Cli, Command, Settings};

/// mimalloc instead of the system allocator: each decision allocates a handful of small, short-lived
/// buffers (HTTP/2 frames, protobuf messages, keys), and glibc malloc spent about 12% of the
/// server's CPU on them under load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Runs [`serve`]; an error is printed with its causes and the process exits 1. (Returning the
/// error from `main` would print its `Debug` form, which ends in a backtrace whenever
/// `RUST_BACKTRACE` is set, as it often is on hosts and in CI: a stack of this function's frames
/// says nothing to whoever set a wrong variable.)
#[tokio::main]
async fn main() -> ExitCode {
    match serve().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", ratelimitd::report(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// Settings → logging → the command asked for.
async fn serve() -> anyhow::Result<()> {
    let cli = Cli::from_args();
    let vars = ratelimitd::env_vars();
    let tool = ratelimitd::run_tool(&cli, &vars).await;
    if let Some(code) = tool.context("invalid settings")? {
        std::process::exit(code);
    }
    let settings = Settings::load(&cli, vars).context("invalid settings")?;
    if cli.command() == Command::DynamodbCreateTable {
        println!("{}", ratelimitd::dynamodb_create_table(&settings).await?);
        return Ok(());
    }
    let telemetry = ratelimitd::init_telemetry(&settings.telemetry())?;
    let result = ratelimitd::run(&settings).await;
    // The exporter blocks while it sends the last spans: keep that off the async workers.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    Ok(result?)
}
