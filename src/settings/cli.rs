//! Command-line flags. Each flag overrides one environment variable and goes through the same
//! parser, so `--port x` and `PORT=x` fail the same way.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

pub use crate::explain::client::ExplainArgs;
pub use crate::explain::reset_client::ResetArgs;

/// ratelimitd: a global rate limit service for Envoy (drop-in for envoyproxy/ratelimit).
#[derive(Debug, Parser)]
#[command(name = "ratelimitd", version)]
pub struct Cli {
    /// Address for /json and /healthcheck [env: HOST, default 0.0.0.0]
    #[arg(long)]
    pub host: Option<String>,
    /// Port for /json and /healthcheck [env: PORT, default 8080]
    #[arg(long)]
    pub port: Option<String>,
    /// Address for gRPC [env: `GRPC_HOST`, default 0.0.0.0]
    #[arg(long)]
    pub grpc_host: Option<String>,
    /// Port for gRPC (RLS v3 and health) [env: `GRPC_PORT`, default 8081]
    #[arg(long)]
    pub grpc_port: Option<String>,
    /// Address for the debug endpoints [env: `DEBUG_HOST`, default 0.0.0.0]
    #[arg(long)]
    pub debug_host: Option<String>,
    /// Port for the debug endpoints (/rlconfig) [env: `DEBUG_PORT`, default 6070]
    #[arg(long)]
    pub debug_port: Option<String>,
    /// Address for the admin API and status page [env: `ADMIN_HOST`, default 127.0.0.1]
    #[arg(long)]
    pub admin_host: Option<String>,
    /// Port for the admin API and status page; without it (and `ADMIN_PORT`) the admin listener
    /// opens only when an admin token is configured or `ADMIN_TRUST_LOOPBACK` is on [env: `ADMIN_PORT`, default 6071]
    #[arg(long)]
    pub admin_port: Option<String>,
    /// Config file or directory; overrides the RUNTIME_* discovery [env: `RATELIMITD_CONFIG`]
    #[arg(long)]
    pub config: Option<String>,
    /// Where counters live: memory or redis [env: `BACKEND_TYPE`, default memory unless `REDIS_URL` is set]
    #[arg(long)]
    pub backend: Option<String>,
    /// Log level: trace, debug, info, warn, error [env: `LOG_LEVEL`, default warn]
    #[arg(long)]
    pub log_level: Option<String>,
    /// Log format: text or json [env: `LOG_FORMAT`, default text]
    #[arg(long)]
    pub log_format: Option<String>,
    /// Bound on live keys in the embedded store [env: `MEMORY_MAX_KEYS`, default 1000000]
    #[arg(long)]
    pub memory_max_keys: Option<String>,
    /// What to do (default: serve).
    #[command(subcommand)]
    pub command: Option<Subcmd>,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Subcmd {
    /// Check config files or directories; prints every error and exits 1 if there is any.
    Validate {
        /// Files or directories to check (as one configuration).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Merge files that share a domain instead of rejecting them [as `MERGE_DOMAIN_CONFIG`]
        #[arg(long)]
        merge_domain_config: bool,
    },
    /// Ask a running instance which limits, overrides and counters apply to a request, and its
    /// recent violations (POST /v1/explain on the admin listener; counts no hit).
    Explain(ExplainArgs),
    /// Reset what a client has used on a running instance: the counters of a descriptor, or the
    /// keys under a prefix (POST /v1/counters/reset on the admin listener).
    Reset(ResetArgs),
    /// Set up the DynamoDB store's table (`BACKEND_TYPE=dynamodb`).
    Dynamodb {
        /// What to do.
        #[command(subcommand)]
        action: DynamodbAction,
    },
}

/// `ratelimitd dynamodb ...`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Subcommand)]
pub enum DynamodbAction {
    /// Create the table `DYNAMODB_TABLE` (key `k`, on-demand billing) in `DYNAMODB_REGION` (or
    /// at `DYNAMODB_ENDPOINT`) and enable TTL on its attribute `e`; on an existing table, only
    /// make sure TTL is on.
    CreateTable,
}

/// What the binary should do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the service.
    Serve,
    /// Validate config paths.
    Validate {
        /// Files or directories.
        paths: Vec<PathBuf>,
        /// Merge same-domain files.
        merge_domains: bool,
    },
    /// Explain a request on a running instance.
    Explain(ExplainArgs),
    /// Reset counters on a running instance.
    Reset(ResetArgs),
    /// Create the DynamoDB store's table.
    DynamodbCreateTable,
}

impl Cli {
    /// Parses the process's arguments; `--help` ends with every variable of the settings
    /// reference (`super::reference`). Exits with clap's message on bad arguments.
    pub fn from_args() -> Cli {
        Cli::from_arg_matches(&Cli::help_command().get_matches()).unwrap_or_else(|e| e.exit())
    }

    /// The command line as `--help` shows it: the flags, in plain text (their doc comments
    /// without Markdown's backticks), then the variables of the settings reference.
    pub fn help_command() -> clap::Command {
        plain(<Cli as CommandFactory>::command()).after_help(super::reference::help())
    }

    /// The command asked for.
    pub fn command(&self) -> Command {
        match &self.command {
            None => Command::Serve,
            Some(Subcmd::Validate {
                paths,
                merge_domain_config,
            }) => Command::Validate {
                paths: paths.clone(),
                merge_domains: *merge_domain_config,
            },
            Some(Subcmd::Explain(args)) => Command::Explain(args.clone()),
            Some(Subcmd::Reset(args)) => Command::Reset(args.clone()),
            Some(Subcmd::Dynamodb {
                action: DynamodbAction::CreateTable,
            }) => Command::DynamodbCreateTable,
        }
    }

    /// The given flags as `(flag, variable, value)`, to lay over the environment.
    pub fn overrides(&self) -> Vec<(&'static str, &'static str, String)> {
        let flags = [
            ("--host", "HOST", &self.host),
            ("--port", "PORT", &self.port),
            ("--grpc-host", "GRPC_HOST", &self.grpc_host),
            ("--grpc-port", "GRPC_PORT", &self.grpc_port),
            ("--debug-host", "DEBUG_HOST", &self.debug_host),
            ("--debug-port", "DEBUG_PORT", &self.debug_port),
            ("--admin-host", "ADMIN_HOST", &self.admin_host),
            ("--admin-port", "ADMIN_PORT", &self.admin_port),
            ("--config", "RATELIMITD_CONFIG", &self.config),
            ("--backend", "BACKEND_TYPE", &self.backend),
            ("--log-level", "LOG_LEVEL", &self.log_level),
            ("--log-format", "LOG_FORMAT", &self.log_format),
            (
                "--memory-max-keys",
                "MEMORY_MAX_KEYS",
                &self.memory_max_keys,
            ),
        ];
        flags
            .into_iter()
            .filter_map(|(flag, var, v)| v.clone().map(|v| (flag, var, v)))
            .collect()
    }
}

/// `cmd` with its help texts, and those of its flags and subcommands, as plain text. They come
/// from doc comments, which rustdoc and the lints read as Markdown (a variable name is written
/// `` `GRPC_HOST` ``), while `--help` prints them as they are: the backticks are dropped here.
fn plain(cmd: clap::Command) -> clap::Command {
    fn unquoted(text: Option<&clap::builder::StyledStr>) -> Option<String> {
        text.map(|t| t.to_string().replace('`', ""))
    }
    let (about, long_about) = (unquoted(cmd.get_about()), unquoted(cmd.get_long_about()));
    let mut cmd = cmd
        .mut_args(|arg| {
            let (help, long_help) = (unquoted(arg.get_help()), unquoted(arg.get_long_help()));
            let arg = match help {
                Some(h) => arg.help(h),
                None => arg,
            };
            match long_help {
                Some(h) => arg.long_help(h),
                None => arg,
            }
        })
        .mut_subcommands(plain);
    if let Some(a) = about {
        cmd = cmd.about(a);
    }
    if let Some(a) = long_about {
        cmd = cmd.long_about(a);
    }
    cmd
}
