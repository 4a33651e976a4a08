//! One `ShouldRateLimit` call from the command line, as Envoy would make it, and the decision:
//!
//! ```sh
//! cargo run --example client -- --addr 127.0.0.1:8081 example remote_address=10.0.0.1 --hits 3
//! # overall: OK
//! # [remote_address=10.0.0.1]: OK, limit 10/SECOND, remaining 7, resets in 1s
//! ```
//! Each argument after the domain is one descriptor; entries within it are separated by commas
//! (`plan=free,user=bob` is one descriptor of two entries, `plan=free user=bob` two descriptors).
//! The exit code is 0 for OK and 2 for `OVER_LIMIT`, so scripts can branch on it; 1 is a usage,
//! connection or gRPC error.

use std::time::Duration;

use clap::Parser;
use ratelimitd::pb::envoy::extensions::common::ratelimit::v3::{
    RateLimitDescriptor, rate_limit_descriptor::Entry,
};
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, rate_limit};
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use ratelimitd::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Endpoint;

/// Command line.
#[derive(Parser)]
#[command(about = "Sends one ShouldRateLimit request to ratelimitd and prints the decision")]
struct Args {
    /// ratelimitd's gRPC address (`--target` as in the loadgen example also works).
    #[arg(long, visible_alias = "target", default_value = "127.0.0.1:8081")]
    addr: String,
    /// Hits this request adds (the request-level `hits_addend`; 0 means 1 as in Envoy).
    #[arg(long, default_value_t = 1)]
    hits: u32,
    /// The rate limit domain.
    domain: String,
    /// Descriptors: `key=value[,key=value...]`, one argument each.
    #[arg(required = true)]
    descriptors: Vec<String>,
}

/// Parses `k=v,k2=v2` into a descriptor.
fn descriptor(arg: &str) -> Result<RateLimitDescriptor, String> {
    let entries = arg
        .split(',')
        .map(|kv| {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("'{kv}' is not key=value"))?;
            Ok(Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(RateLimitDescriptor {
        entries,
        limit: None,
        hits_addend: None,
        is_negative_hits: false,
    })
}

/// Prints one line per descriptor status.
fn print(args: &Args, resp: &RateLimitResponse) {
    let overall = Code::try_from(resp.overall_code).unwrap_or(Code::Unknown);
    println!("overall: {}", overall.as_str_name());
    for (arg, s) in args.descriptors.iter().zip(&resp.statuses) {
        let code = Code::try_from(s.code)
            .unwrap_or(Code::Unknown)
            .as_str_name();
        let limit = match &s.current_limit {
            Some(l) => {
                let unit = rate_limit::Unit::try_from(l.unit).unwrap_or(rate_limit::Unit::Unknown);
                format!("limit {}/{}", l.requests_per_unit, unit.as_str_name())
            }
            None => "no limit".to_string(),
        };
        let reset = s
            .duration_until_reset
            .as_ref()
            .map(|d| format!(", resets in {}s", d.seconds))
            .unwrap_or_default();
        println!(
            "[{arg}]: {code}, {limit}, remaining {}{reset}",
            s.limit_remaining
        );
    }
}

#[tokio::main]
async fn main() {
    // clap exits with 2 on a usage error, which here means OVER_LIMIT: usage errors exit with 1.
    let args = Args::try_parse().unwrap_or_else(|e| {
        let _ = e.print();
        std::process::exit(i32::from(e.use_stderr()));
    });
    let descriptors = match args.descriptors.iter().map(|d| descriptor(d)).collect() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    let request = RateLimitRequest {
        domain: args.domain.clone(),
        descriptors,
        hits_addend: args.hits,
    };
    let result = async {
        // Bounded, so that a wrong address or a stopped server is an error, not a hang.
        let channel = Endpoint::from_shared(format!("http://{}", args.addr))?
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(5))
            .connect()
            .await?;
        let mut client = RateLimitServiceClient::new(channel);
        let resp = client.should_rate_limit(request).await?.into_inner();
        Ok::<_, Box<dyn std::error::Error>>(resp)
    }
    .await;
    match result {
        Ok(resp) => {
            print(&args, &resp);
            let over = resp.overall_code == Code::OverLimit as i32;
            std::process::exit(if over { 2 } else { 0 });
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
