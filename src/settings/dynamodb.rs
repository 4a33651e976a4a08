//! DynamoDB settings (`DYNAMODB_*`, `BACKEND_TYPE=dynamodb`): the table, region, endpoint override
//! and call timeout. Credentials are not settings here: the standard AWS chain supplies them
//! (`AWS_ACCESS_KEY_ID`, `AWS_PROFILE`, web identity, the container or instance role), and no
//! log line shows them.

use super::{SettingsError, Vars, parse};

pub(crate) use crate::store::dynamodb::DynamoSettings;

/// A table name as DynamoDB accepts it: 3 to 255 of `a-z A-Z 0-9 _ - .`.
fn table(s: &str) -> Result<String, String> {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    if (3..=255).contains(&s.len()) && s.chars().all(ok_char) {
        Ok(s.to_string())
    } else {
        Err("expected a DynamoDB table name: 3 to 255 of a-z, A-Z, 0-9, '_', '-', '.'".into())
    }
}

/// A region name such as `eu-west-1`: lowercase letters, digits and dashes.
fn region(s: &str) -> Result<Option<String>, String> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    if s.is_empty() {
        Ok(None)
    } else if s.chars().all(ok_char) {
        Ok(Some(s.to_string()))
    } else {
        Err("expected an AWS region such as us-east-1 (lowercase letters, digits, '-')".into())
    }
}

/// An endpoint URL: `http://host[:port]` or `https://...`; empty is the region's own.
fn endpoint(s: &str) -> Result<Option<String>, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"));
    match rest {
        _ if s.is_empty() => Ok(None),
        Some(host) if !host.is_empty() && !host.starts_with('/') && !host.contains(' ') => {
            Ok(Some(s.to_string()))
        }
        _ => Err("expected an http:// or https:// URL, e.g. http://127.0.0.1:8000".into()),
    }
}

/// Reads the DynamoDB settings; `used` (the backend is dynamodb) refuses what this store cannot
/// honour instead of ignoring it.
pub(super) fn from_vars(v: &Vars, used: bool) -> Result<DynamoSettings, SettingsError> {
    let d = DynamoSettings::default();
    let table = v.parse("DYNAMODB_TABLE", d.table, table)?;
    let region = v.parse("DYNAMODB_REGION", None, region)?;
    let endpoint = v.parse("DYNAMODB_ENDPOINT", None, endpoint)?;
    let response_timeout = v.parse("DYNAMODB_RESPONSE_TIMEOUT", d.response_timeout, |s| {
        parse::call_timeout(s, "DynamoDB")
    })?;
    // A transaction per request would double its write cost. Refused, not ignored.
    if used {
        v.refuse_stop_increment(
            "BACKEND_TYPE=dynamodb (each key of a request is its own atomic update)",
        );
    }
    Ok(DynamoSettings {
        table,
        region,
        endpoint,
        response_timeout,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::settings::Settings;
    use crate::settings::tests::env;

    #[test]
    fn defaults_and_values() {
        let s = Settings::from_env(env(&[])).unwrap();
        assert_eq!(s.dynamodb.table, "ratelimitd");
        assert_eq!(s.dynamodb.region, None);
        assert_eq!(s.dynamodb.endpoint, None);
        assert_eq!(s.dynamodb.response_timeout, Duration::from_millis(500));
        let s = Settings::from_env(env(&[
            ("DYNAMODB_TABLE", "limits.prod-1"),
            ("DYNAMODB_REGION", "eu-west-1"),
            ("DYNAMODB_ENDPOINT", "http://127.0.0.1:4567"),
            ("DYNAMODB_RESPONSE_TIMEOUT", "2s"),
        ]))
        .unwrap();
        assert_eq!(s.dynamodb.table, "limits.prod-1");
        assert_eq!(s.dynamodb.region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            s.dynamodb.endpoint.as_deref(),
            Some("http://127.0.0.1:4567")
        );
        assert_eq!(s.dynamodb.response_timeout, Duration::from_secs(2));
    }

    #[test]
    fn bad_values_are_refused_by_name_with_the_valid_choices() {
        for (name, value, says) in [
            ("DYNAMODB_TABLE", "a b", "3 to 255"),
            ("DYNAMODB_TABLE", "ab", "3 to 255"),
            ("DYNAMODB_REGION", "EU_WEST", "us-east-1"),
            ("DYNAMODB_ENDPOINT", "127.0.0.1:8000", "http://"),
            ("DYNAMODB_ENDPOINT", "ftp://x", "http://"),
            ("DYNAMODB_RESPONSE_TIMEOUT", "0s", "more than 0"),
            ("DYNAMODB_RESPONSE_TIMEOUT", "soon", ""),
        ] {
            let e = Settings::from_env(env(&[(name, value)])).unwrap_err();
            assert_eq!(e.name, name, "{e}");
            assert!(e.reason.contains(says), "{e}");
        }
    }

    #[test]
    fn the_backend_is_named_among_the_choices() {
        let e = Settings::from_env(env(&[("BACKEND_TYPE", "dynamo")])).unwrap_err();
        assert_eq!(e.name, "BACKEND_TYPE");
        assert!(e.reason.contains("dynamodb"), "{e}");
    }

    #[cfg(feature = "dynamodb")]
    #[test]
    fn stop_increment_is_refused_with_dynamodb() {
        let e = Settings::from_env(env(&[
            ("BACKEND_TYPE", "dynamodb"),
            ("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"),
        ]))
        .unwrap_err();
        assert_eq!(e.name, "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT");
        assert!(e.reason.contains("dynamodb"), "{e}");
    }

    #[cfg(not(feature = "dynamodb"))]
    #[test]
    fn a_build_without_the_store_says_how_to_get_it() {
        let e = Settings::from_env(env(&[("BACKEND_TYPE", "dynamodb")])).unwrap_err();
        assert_eq!(e.name, "BACKEND_TYPE");
        assert!(e.reason.contains("--features dynamodb"), "{e}");
    }
}
