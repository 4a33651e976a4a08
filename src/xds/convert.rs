//! One `RateLimitConfig` resource → one configuration "file", so xDS configuration goes through the
//! same parse → validate → compile pipeline as files (same errors, the resource `name` standing in
//! for the file name), as the Go service converts each resource to its YAML model.
//!
//! The document is written as JSON (a subset of YAML): quoting is then unambiguous, so a value such
//! as `yes`, `123` or `*` stays the string it was in the proto.

use prost::Message;
use prost_types::value::Kind;
use serde_json::{Map, Value as Json, json};

use ratelimitd_core::config::ConfigFile;

use super::pb::ratelimit::config::ratelimit::v3::{
    RateLimitConfig, RateLimitDescriptor, RateLimitPolicy, RateLimitUnit,
};

/// The type URL of the resources this client asks for.
pub(crate) const TYPE_URL: &str =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// Decodes one resource of a response into a configuration file named after the resource.
pub(crate) fn resource_to_file(resource: &prost_types::Any) -> Result<ConfigFile, String> {
    if resource.type_url != TYPE_URL {
        return Err(format!(
            "unexpected resource type {:?} (expected {TYPE_URL})",
            resource.type_url
        ));
    }
    let config = RateLimitConfig::decode(resource.value.as_slice())
        .map_err(|e| format!("cannot decode RateLimitConfig: {e}"))?;
    Ok(config_to_file(&config))
}

/// The configuration file equivalent to `config`.
pub(crate) fn config_to_file(config: &RateLimitConfig) -> ConfigFile {
    let doc = json!({
        "domain": config.domain,
        "descriptors": config.descriptors.iter().map(descriptor).collect::<Vec<_>>(),
    });
    ConfigFile {
        name: config.name.clone(),
        // Serialising a `serde_json::Value` cannot fail.
        contents: serde_json::to_string_pretty(&doc).unwrap_or_default(),
    }
}

fn descriptor(d: &RateLimitDescriptor) -> Json {
    let mut m = Map::new();
    m.insert("key".into(), json!(d.key));
    m.insert("value".into(), json!(d.value));
    if let Some(rl) = &d.rate_limit {
        m.insert("rate_limit".into(), policy(rl));
    }
    if !d.descriptors.is_empty() {
        let children = d.descriptors.iter().map(descriptor).collect();
        m.insert("descriptors".into(), Json::Array(children));
    }
    for (name, on) in [
        ("shadow_mode", d.shadow_mode),
        ("detailed_metric", d.detailed_metric),
        ("quota_mode", d.quota_mode),
    ] {
        if on {
            m.insert(name.into(), Json::Bool(true));
        }
    }
    if let Some(meta) = &d.metadata {
        m.insert("metadata".into(), structure(meta));
    }
    Json::Object(m)
}

fn policy(p: &RateLimitPolicy) -> Json {
    // Go writes the enum's name (`SECOND`, `UNKNOWN`); the validator reads units case-insensitively
    // and refuses `UNKNOWN` (and an undeclared number) as it refuses a bad unit in a file.
    let unit = RateLimitUnit::try_from(p.unit)
        .map_or_else(|_| p.unit.to_string(), |u| u.as_str_name().to_string());
    let replaces: Vec<Json> = p.replaces.iter().map(|r| json!({"name": r.name})).collect();
    json!({
        "unit": unit,
        "requests_per_unit": p.requests_per_unit,
        "unlimited": p.unlimited,
        "name": p.name,
        "replaces": replaces,
    })
}

fn structure(s: &prost_types::Struct) -> Json {
    Json::Object(
        s.fields
            .iter()
            .map(|(k, v)| (k.clone(), value(v)))
            .collect(),
    )
}

fn value(v: &prost_types::Value) -> Json {
    match &v.kind {
        None | Some(Kind::NullValue(_)) => Json::Null,
        Some(Kind::BoolValue(b)) => Json::Bool(*b),
        Some(Kind::StringValue(s)) => Json::String(s.clone()),
        // Whole numbers stay integers (a YAML int); NaN and infinities have no JSON form.
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.0e15 => json!(*n as i64),
        Some(Kind::NumberValue(n)) => {
            serde_json::Number::from_f64(*n).map_or(Json::Null, Json::Number)
        }
        Some(Kind::StructValue(s)) => structure(s),
        Some(Kind::ListValue(l)) => Json::Array(l.values.iter().map(value).collect()),
    }
}

#[cfg(test)]
mod tests;
