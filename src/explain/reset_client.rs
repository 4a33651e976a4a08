//! `ratelimitd reset`: asks a running instance's admin API (`POST /v1/counters/reset`) to forget
//! what a client has used — the counters of one descriptor, or the keys under a prefix of one
//! domain — and prints what was reset.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use super::client::{ClientError, parse_descriptor, post};

/// The arguments of `ratelimitd reset`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ResetArgs {
    /// The admin listener's URL, such as `http://127.0.0.1:6071`
    #[arg(long)]
    pub url: String,
    /// A file holding the bearer token (trimmed) [default: `ADMIN_TOKEN`]
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// The domain
    #[arg(long)]
    pub domain: String,
    /// The descriptor whose counters to reset, as key=value[,key=value…]
    #[arg(long, conflicts_with = "prefix", required_unless_present = "prefix")]
    pub descriptor: Option<String>,
    /// Reset every key starting with this text instead (Redis and Valkey only)
    #[arg(long)]
    pub prefix: Option<String>,
    /// With --prefix: the most keys to reset in this call [default: 1000]
    #[arg(long, requires = "prefix")]
    pub max_keys: Option<usize>,
    /// Print the API's JSON answer instead of text
    #[arg(long)]
    pub json: bool,
}

/// The request body `args` ask for.
fn body(args: &ResetArgs) -> Result<Value, ClientError> {
    let mut body = json!({ "domain": args.domain });
    if let Some(d) = &args.descriptor {
        let entries: Vec<Value> = (parse_descriptor(d)?.into_iter())
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        body["descriptor"] = Value::Array(entries);
    }
    if let Some(p) = &args.prefix {
        body["prefix"] = json!(p);
    }
    if let Some(n) = args.max_keys {
        body["max_keys"] = json!(n);
    }
    Ok(body)
}

/// The answer as text for a person.
fn render(v: &Value) -> String {
    let target = v["target"].as_str().unwrap_or("");
    let mut out = format!(
        "domain {}: {target}: {} key(s) reset\n",
        v["domain"].as_str().unwrap_or(""),
        v["reset"]
    );
    if v["more"] == true {
        out += "more keys remain under the prefix: run the command again\n";
    }
    out
}

/// Runs `ratelimitd reset` with `args`, the token defaulting to `ADMIN_TOKEN` of `env`; prints the
/// answer to `out`, problems to `err`. Returns the exit code: 0 reset, 1 refused or unreachable,
/// 2 bad arguments.
pub async fn run(
    args: &ResetArgs,
    env: impl Fn(&str) -> Option<String>,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let fail = |err: &mut dyn std::io::Write, e: &dyn std::fmt::Display, code| {
        let _ = writeln!(err, "ratelimitd reset: {e}");
        code
    };
    let body = match body(args) {
        Ok(b) => b,
        Err(e) => return fail(err, &e, 2),
    };
    let token = match &args.token_file {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(t) => Some(t.trim().to_string()),
            Err(e) => return fail(err, &format!("--token-file {}: {e}", path.display()), 2),
        },
        None => env("ADMIN_TOKEN"),
    };
    let base = args.url.trim_end_matches('/');
    if !base.starts_with("http://") && !base.starts_with("https://") {
        return fail(err, &ClientError::Address(args.url.clone()), 2);
    }
    let url = format!("{base}/v1/counters/reset");
    match post(&url, token.as_deref(), &body, Duration::from_secs(30)).await {
        Ok(v) if args.json => {
            let _ = writeln!(out, "{v:#}");
            0
        }
        Ok(v) => {
            let _ = write!(out, "{}", render(&v));
            0
        }
        Err(e) => fail(err, &e, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(descriptor: Option<&str>, prefix: Option<&str>) -> ResetArgs {
        ResetArgs {
            url: "http://127.0.0.1:1".into(),
            token_file: None,
            domain: "api".into(),
            descriptor: descriptor.map(str::to_string),
            prefix: prefix.map(str::to_string),
            max_keys: prefix.map(|_| 5),
            json: false,
        }
    }

    #[test]
    fn the_body_names_a_descriptor_or_a_prefix() {
        let b = body(&args(Some("user=alice,path=/a"), None)).unwrap();
        assert_eq!(
            b,
            json!({"domain": "api", "descriptor": [
                {"key": "user", "value": "alice"}, {"key": "path", "value": "/a"}]})
        );
        let b = body(&args(None, Some("{3:api|"))).unwrap();
        assert_eq!(
            b,
            json!({"domain": "api", "prefix": "{3:api|", "max_keys": 5})
        );
        assert!(body(&args(Some("alice"), None)).is_err());
        let shown =
            render(&json!({"domain": "api", "target": "prefix x", "reset": 3, "more": true}));
        assert!(shown.contains("3 key(s) reset") && shown.contains("run the command again"));
    }
}
