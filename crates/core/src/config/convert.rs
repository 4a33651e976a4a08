//! Rendering and converting YAML values the way the Go reference sees them: `%v` text for error
//! messages, yaml.v2's unmarshal-error wording, YAML 1.1 booleans, and metadata → JSON.

use serde_json::{Map, Value as Json};
use serde_yaml::Value;

/// Strips YAML tags: `!foo x` is treated as `x` (`serde_yaml` keeps custom tags; Go resolves them).
pub(crate) fn untag(mut v: &Value) -> &Value {
    while let Value::Tagged(t) = v {
        v = &t.value;
    }
    v
}

/// True for the leaf types Go's check accepts: string, `int` (i64 on 64-bit), bool and null.
/// Floats and integers beyond i64 (Go decodes those as uint64/float64) are refused.
pub(crate) fn is_go_leaf(v: &Value) -> bool {
    match untag(v) {
        Value::Null | Value::Bool(_) | Value::String(_) => true,
        Value::Number(n) => n.is_i64(),
        Value::Sequence(_) | Value::Mapping(_) | Value::Tagged(_) => false,
    }
}

/// Renders a value the way Go's `%v` prints what yaml.v2 decoded, for error texts.
pub(crate) fn go_fmt(v: &Value) -> String {
    match untag(v) {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => go_float(f),
            _ => n.to_string(),
        },
        Value::Sequence(items) => {
            let parts: Vec<String> = items.iter().map(go_fmt).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Mapping(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}:{}", go_fmt(k), go_fmt(v)))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        Value::Tagged(t) => go_fmt(&t.value),
    }
}

/// Go's `%v` for a float64: shortest digits, exponent form when the decimal exponent is
/// < -4 or >= 6 (strconv's `'g'` with shortest precision, as `fmt.Println(1e6)` prints `1e+06`).
fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    // `{:e}` gives the shortest round-trip digits, e.g. `2.5e-1`, `1e21`.
    let sci = format!("{f:e}");
    let Some((mantissa, exp)) = sci.split_once('e') else {
        return f.to_string();
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        f.to_string()
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.unsigned_abs())
    }
}

/// The YAML tag Go names in unmarshal errors (`!!int`, `!!seq`...).
pub(crate) fn yaml_tag(v: &Value) -> &'static str {
    match untag(v) {
        Value::Null => "!!null",
        Value::Bool(_) => "!!bool",
        Value::Number(n) if n.is_f64() => "!!float",
        Value::Number(_) => "!!int",
        Value::String(_) => "!!str",
        Value::Sequence(_) => "!!seq",
        Value::Mapping(_) | Value::Tagged(_) => "!!map",
    }
}

/// yaml.v2's wording, with the field name where yaml.v2 puts a line number (`serde_yaml` values
/// carry no positions; the error's path says where).
pub(crate) fn unmarshal_error(v: &Value, field: Option<&str>, go_type: &str) -> String {
    let shown = match untag(v) {
        Value::Sequence(_) | Value::Mapping(_) => yaml_tag(v).to_owned(),
        scalar => {
            let text: String = go_fmt(scalar).chars().take(64).collect();
            format!("{} `{text}`", yaml_tag(scalar))
        }
    };
    let field = field.map(|f| format!("field {f}: ")).unwrap_or_default();
    format!(
        "error loading config file: yaml: unmarshal errors: {field}cannot unmarshal {shown} into {go_type}"
    )
}

/// YAML 1.1 boolean words (yaml.v2's resolver table).
pub(crate) fn yaml11_bool(s: &str) -> Option<bool> {
    match s {
        "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On" | "ON" => Some(true),
        "n" | "N" | "no" | "No" | "NO" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

/// Converts a YAML value to JSON; fails on what a protobuf Struct cannot hold.
pub(crate) fn to_json(v: &Value) -> Result<Json, String> {
    Ok(match untag(v) {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::String(s) => Json::String(s.clone()),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => Json::from(i),
            (None, Some(u), _) => Json::from(u),
            (_, _, Some(f)) => serde_json::Number::from_f64(f)
                .map(Json::Number)
                .ok_or_else(|| format!("invalid number {}", go_fmt(v)))?,
            _ => return Err(format!("invalid number {n}")),
        },
        Value::Sequence(items) => Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Mapping(m) => {
            let mut obj = Map::new();
            for (k, v) in m {
                let Value::String(key) = untag(k) else {
                    return Err(format!("invalid key {}: keys must be strings", go_fmt(k)));
                };
                obj.insert(key.clone(), to_json(v)?);
            }
            Json::Object(obj)
        }
        Value::Tagged(t) => to_json(&t.value)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_fmt_matches_go_percent_v() {
        let v: Value =
            serde_yaml::from_str("[0.25, 1.0e6, 1.0e21, 1.0e-5, 7, a, ~, true]").unwrap();
        let Value::Sequence(items) = v else { panic!() };
        let got: Vec<String> = items.iter().map(go_fmt).collect();
        assert_eq!(
            got,
            ["0.25", "1e+06", "1e+21", "1e-05", "7", "a", "<nil>", "true"]
        );
    }
}
