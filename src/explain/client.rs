//! `ratelimitd explain`: asks a running instance's admin API (`POST /v1/explain`) about one
//! request and prints the answer for a person: each descriptor's limits with their counters, the
//! stored overrides on it and its recent violations. Counts no hit.

use std::time::Duration;

use serde_json::{Value, json};

/// The arguments of `ratelimitd explain`.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct ExplainArgs {
    /// The request's domain
    #[arg(long)]
    pub domain: String,
    /// A descriptor as key=value[,key=value…]; repeat the flag for several descriptors
    #[arg(long = "descriptor", required = true)]
    pub descriptors: Vec<String>,
    /// The admin listener, host:port or a URL [default: `ADMIN_HOST:ADMIN_PORT`, 127.0.0.1:6071]
    #[arg(long)]
    pub admin: Option<String>,
    /// The bearer token [default: `ADMIN_TOKEN`]; prefer the variable (flags show in `ps`)
    #[arg(long)]
    pub token: Option<String>,
    /// Print the API's JSON answer instead of text
    #[arg(long)]
    pub json: bool,
}

/// Why the command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ClientError {
    /// A `--descriptor` is not `key=value[,key=value…]`.
    #[error(
        "--descriptor '{0}': expected key=value pairs separated by commas, such as client_key=alice,path=/login"
    )]
    Descriptor(String),
    /// The admin address is not a URL or `host:port`.
    #[error("admin address '{0}': expected host:port or http://host:port")]
    Address(String),
    /// The instance could not be reached.
    #[error("cannot reach the admin API at {url}: {source}")]
    Unreachable {
        /// The URL tried.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The instance refused the request.
    #[error("the admin API answered {status}: {body}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its body.
        body: String,
    },
}

/// Parses `key=value[,key=value…]` (a value may be empty; the first `=` splits).
pub(crate) fn parse_descriptor(text: &str) -> Result<Vec<(String, String)>, ClientError> {
    let bad = || ClientError::Descriptor(text.to_string());
    text.split(',')
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
            _ => Err(bad()),
        })
        .collect()
}

/// The explain URL of the admin listener at `addr` (`host:port`, or a URL).
pub(crate) fn explain_url(addr: &str) -> Result<String, ClientError> {
    let base = if addr.starts_with("http://") || addr.starts_with("https://") {
        addr.trim_end_matches('/').to_string()
    } else if addr.contains(':') && !addr.contains('/') {
        format!("http://{addr}")
    } else {
        return Err(ClientError::Address(addr.to_string()));
    };
    Ok(format!("{base}/v1/explain"))
}

/// Sends the request and returns the answer's JSON.
pub(crate) async fn ask(
    addr: &str,
    token: Option<&str>,
    domain: &str,
    descriptors: &[Vec<(String, String)>],
) -> Result<Value, ClientError> {
    let url = explain_url(addr)?;
    let body = json!({
        "domain": domain,
        "descriptors": descriptors.iter().map(|d| json!({
            "entries": d.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>()
        })).collect::<Vec<_>>(),
    });
    post(&url, token, &body, Duration::from_secs(10)).await
}

/// POSTs `body` to the admin listener's `url` with the bearer `token`; the answer's JSON when it
/// is 200, else the refusal with its status and body.
pub(crate) async fn post(
    url: &str,
    token: Option<&str>,
    body: &Value,
    timeout: Duration,
) -> Result<Value, ClientError> {
    let unreachable = |source| ClientError::Unreachable {
        url: url.to_string(),
        source,
    };
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(unreachable)?;
    let mut req = http.post(url).body(body.to_string());
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.map_err(unreachable)?;
    let status = resp.status().as_u16();
    let text = resp.text().await.map_err(unreachable)?;
    match serde_json::from_str::<Value>(&text) {
        Ok(v) if status == 200 => Ok(v),
        _ => Err(ClientError::Refused {
            status,
            body: text.trim().to_string(),
        }),
    }
}

/// The answer of `POST /v1/explain` as text for a person.
pub(crate) fn render(v: &Value) -> String {
    let mut out = format!("domain {}", text(&v["domain"]));
    match v["config_version"].as_u64() {
        Some(n) => out += &format!(" (configuration version {n})"),
        None => out += " (no configuration loaded)",
    }
    out += &format!(" at {}\n", text(&v["at"]));
    if v["domain_known"] == false {
        out += "  the configuration has no such domain: every descriptor is allowed\n";
    }
    for (i, d) in array(&v["descriptors"]).iter().enumerate() {
        let entries: Vec<String> = (array(&d["entries"]).iter())
            .map(|e| format!("{}={}", text(&e["key"]), text(&e["value"])))
            .collect();
        out += &format!("descriptor {}: {}\n", i + 1, entries.join(", "));
        match d["applies"].as_str() {
            Some("unlimited") => out += "  unlimited (never counted)\n",
            Some("no_limit") => out += "  no limit applies\n",
            _ => {}
        }
        for l in array(&d["limits"]) {
            limit(&mut out, l);
        }
        for o in array(&d["overrides"]) {
            out += &format!(
                "  override {}: {} per {} until {}{} ({})\n",
                text(&o["id"]),
                text(&o["requests_per_unit"]),
                text(&o["unit"]),
                text(&o["valid_until"]),
                if o["active"] == true { "" } else { ", expired" },
                text(&o["reason"]),
            );
        }
        violations(&mut out, &d["violations"]);
    }
    out
}

/// A JSON value as text: a string as it is, null as nothing, anything else as JSON.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// A JSON array's items; none when it is not an array.
fn array(v: &Value) -> &[Value] {
    v.as_array().map_or(&[], Vec::as_slice)
}

/// One limit of a descriptor: its name, key, rate and algorithm, and where its counter stands.
fn limit(out: &mut String, l: &Value) {
    let name = match text(&l["name"]) {
        n if n.is_empty() => "(unnamed)".to_string(),
        n => n,
    };
    let per = match l["unit_multiplier"].as_u64() {
        Some(m) if m > 1 => format!("{m} {}", text(&l["unit"])),
        _ => text(&l["unit"]),
    };
    *out += &format!(
        "  limit {name} [{}]: {} per {per}, {}{}\n",
        text(&l["key"]),
        text(&l["requests_per_unit"]),
        text(&l["algorithm"]),
        if l["shadow"] == true {
            ", shadow mode"
        } else {
            ""
        },
    );
    let c = &l["counter"];
    if let Some(why) = c["unavailable"].as_str() {
        *out += &format!("    counter unavailable: {why}\n");
        return;
    }
    let debt = c["debt"].as_u64().unwrap_or(0);
    let in_debt = format!("in debt by {debt} (usage reported past the limit)");
    let state = if debt > 0 {
        in_debt.as_str()
    } else if c["over_limit"] == true {
        "at the limit"
    } else {
        "within the limit"
    };
    *out += &format!(
        "    counter: {} used, {} remaining, {state}, resets in {}s\n",
        text(&c["used"]),
        text(&c["remaining"]),
        c["reset_after_seconds"].as_f64().unwrap_or(0.0).ceil()
    );
    // A split limit: the counter above is the sum; each sub-key against its share.
    if let Some(parts) = l["sub_keys"].as_array().filter(|p| !p.is_empty()) {
        let each: Vec<String> = (parts.iter())
            .map(|p| format!("{}/{}", text(&p["used"]), text(&p["remaining"])))
            .collect();
        *out += &format!(
            "    split over {} sub-keys (used/remaining): {}\n",
            parts.len(),
            each.join(", ")
        );
    }
}

/// A descriptor's recent violations, or why they are not available.
fn violations(out: &mut String, vio: &Value) {
    match vio["recent"].as_array() {
        Some(rows) if rows.is_empty() => *out += "  no recent violations\n",
        Some(rows) => {
            for r in rows {
                *out += &format!(
                    "  violation at {}: {} over, {} requests ({} hits)\n",
                    text(&r["at"]),
                    text(&r["limit"]),
                    text(&r["requests"]),
                    text(&r["hits"]),
                );
            }
        }
        None => *out += &format!("  violations not available: {}\n", text(&vio["reason"])),
    }
}

/// Runs `ratelimitd explain` with `args`, the address and token defaulting to the `ADMIN_HOST`,
/// `ADMIN_PORT` and `ADMIN_TOKEN` of `env`; prints the answer to `out`, problems to `err`.
/// Returns the exit code: 0 answered, 1 refused or unreachable, 2 bad arguments.
pub async fn run(
    args: &ExplainArgs,
    env: impl Fn(&str) -> Option<String>,
    out: &mut impl std::io::Write,
    err: &mut impl std::io::Write,
) -> i32 {
    let descriptors: Result<Vec<_>, _> = args
        .descriptors
        .iter()
        .map(|d| parse_descriptor(d))
        .collect();
    let descriptors = match descriptors {
        Ok(d) => d,
        Err(e) => {
            let _ = writeln!(err, "ratelimitd explain: {e}");
            return 2;
        }
    };
    let addr = args.admin.clone().unwrap_or_else(|| {
        let host = match env("ADMIN_HOST").filter(|h| !h.is_empty()) {
            // A wildcard listen address is reached on loopback.
            Some(h) if h == "0.0.0.0" || h == "::" || h == "[::]" => "127.0.0.1".to_string(),
            Some(h) => h,
            None => "127.0.0.1".to_string(),
        };
        let port = env("ADMIN_PORT").unwrap_or_else(|| "6071".to_string());
        format!("{host}:{port}")
    });
    let token = args.token.clone().or_else(|| env("ADMIN_TOKEN"));
    match ask(&addr, token.as_deref(), &args.domain, &descriptors).await {
        Ok(v) if args.json => {
            let _ = writeln!(out, "{v:#}");
            0
        }
        Ok(v) => {
            let _ = write!(out, "{}", render(&v));
            0
        }
        Err(e) => {
            let _ = writeln!(err, "ratelimitd explain: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_and_addresses_parse_or_say_what_is_expected() {
        assert_eq!(
            parse_descriptor("client_key=alice,path=/a=b").unwrap(),
            vec![
                ("client_key".into(), "alice".into()),
                ("path".into(), "/a=b".into())
            ]
        );
        assert_eq!(
            parse_descriptor("k=").unwrap(),
            vec![("k".into(), String::new())]
        );
        for bad in ["", "alice", "=x", "a=1,,b=2"] {
            let e = parse_descriptor(bad).unwrap_err().to_string();
            assert!(e.contains("key=value pairs"), "{bad}: {e}");
        }
        assert_eq!(
            explain_url("127.0.0.1:6071").unwrap(),
            "http://127.0.0.1:6071/v1/explain"
        );
        assert_eq!(explain_url("http://h:1/").unwrap(), "http://h:1/v1/explain");
        assert!(explain_url("localhost").is_err());
    }
}
