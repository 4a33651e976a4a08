//! Checks 1–3 of `docs/design/contract.md#validation` for one file: YAML syntax, the generic key
//! check (in `keys`), then a hand-written typed walk into raw descriptor types. Walking
//! `serde_yaml::Value` by hand (rather than `#[derive(Deserialize)]`) lets every type mismatch be
//! reported with its YAML path while the walk carries on, and lets scalars become strings the way
//! yaml.v2 does (`value: 123` → `"123"`).

use serde::Deserialize;
use serde_json::{Map, Value as Json};
use serde_yaml::{Mapping, Value};

use super::convert::{to_json, unmarshal_error, untag};
use super::error::{Sink, field_path};
use super::keys::check_keys;
use super::typed::Typed;

/// One file's document after the typed walk. Fields that failed to convert hold defaults; their
/// errors are already in the sink.
#[derive(Debug, Default)]
pub(crate) struct RawRoot {
    /// `None` when `domain` had the wrong type (already reported).
    pub(crate) domain: Option<String>,
    pub(crate) descriptors: Vec<RawDescriptor>,
    /// `default_limit` (ratelimitd extension): the limit of descriptors that match nothing.
    pub(crate) default_limit: Option<RawRateLimit>,
    /// `max_request_limit` (ratelimitd extension): the cap on a request's own `limit`.
    pub(crate) max_request_limit: Option<RawRateLimit>,
}

/// One `descriptors[]` entry.
#[derive(Debug, Default)]
pub(crate) struct RawDescriptor {
    /// YAML path of this descriptor, for later semantic errors.
    pub(crate) path: String,
    pub(crate) key: String,
    pub(crate) value: String,
    /// `value_regex` (ratelimitd extension): a pattern the whole value must match; `None` when
    /// absent or wrongly typed (reported).
    pub(crate) value_regex: Option<String>,
    /// `regex_key` (ratelimitd extension, with `value_regex`), as written.
    pub(crate) regex_key: Option<String>,
    /// `when` (ratelimitd extension): a CEL predicate the request must meet for this entry to
    /// match; `None` when absent or wrongly typed (reported).
    pub(crate) when: Option<String>,
    /// Whether `value` was written at all (even empty), so `value` beside `value_regex` is refused.
    pub(crate) value_given: bool,
    pub(crate) rate_limit: Option<RawRateLimit>,
    /// `rate_limits` (ratelimitd extension): several limits on this node; `None` when absent.
    pub(crate) rate_limits: Option<Vec<RawRateLimit>>,
    pub(crate) descriptors: Vec<RawDescriptor>,
    pub(crate) shadow_mode: bool,
    pub(crate) quota_mode: bool,
    /// `quota_group` (ratelimitd extension): the quota group this node's limit belongs to.
    pub(crate) quota_group: Option<String>,
    pub(crate) detailed_metric: bool,
    pub(crate) value_to_metric: bool,
    pub(crate) share_threshold: bool,
    pub(crate) metadata: Option<Map<String, Json>>,
}

/// One `rate_limit` map.
#[derive(Debug, Default)]
pub(crate) struct RawRateLimit {
    pub(crate) path: String,
    pub(crate) requests_per_unit: u32,
    /// Whether `requests_per_unit` was written at all: a missing one is 0 (blocks everything), as
    /// in Go, but is worth a warning; a deliberate `requests_per_unit: 0` is not.
    pub(crate) requests_per_unit_given: bool,
    /// `None` when `unit` had the wrong type: the unit checks are then skipped, not doubled up.
    pub(crate) unit: Option<String>,
    /// `None` when `unlimited` had the wrong type, for the same reason.
    pub(crate) unlimited: Option<bool>,
    pub(crate) name: String,
    /// `(path, name)` of each `replaces[]` entry.
    pub(crate) replaces: Vec<(String, String)>,
    /// `failure_mode` (ratelimitd extension), as written.
    pub(crate) failure_mode: Option<String>,
    /// `local_share` (ratelimitd extension); `None` when absent or not a number (reported).
    pub(crate) local_share: Option<f64>,
    /// `algorithm` (ratelimitd extension), as written.
    pub(crate) algorithm: Option<String>,
    /// `burst` (ratelimitd extension); `None` when absent or wrongly typed (reported).
    pub(crate) burst: Option<u32>,
    /// `unit_multiplier` (ratelimitd extension); `None` when absent or wrongly typed (reported).
    pub(crate) unit_multiplier: Option<u32>,
    /// `lease` (ratelimitd extension); `None` when absent or wrongly typed (reported).
    pub(crate) lease: Option<u32>,
    /// `split` (ratelimitd extension); `None` when absent or wrongly typed (reported).
    pub(crate) split: Option<u32>,
    /// `calendar` (ratelimitd extension); `None` when absent or wrongly typed (reported).
    pub(crate) calendar: Option<bool>,
    /// `usage` (ratelimitd extension): its mode as written (`usage: report`, or the map's
    /// `mode`).
    pub(crate) usage: Option<String>,
    /// `usage.estimate` (ratelimitd extension); `None` when absent or wrongly typed (reported).
    pub(crate) usage_estimate: Option<u32>,
    /// `time_zone` (ratelimitd extension, with `calendar`), as written.
    pub(crate) time_zone: Option<String>,
    /// `when` (ratelimitd extension): a CEL predicate the request must meet for this limit to
    /// apply; `None` when absent or wrongly typed (reported).
    pub(crate) when: Option<String>,
    /// `regions` (ratelimitd extension); `None` when absent or invalid (reported).
    pub(crate) regions: Option<crate::region::Regions>,
    /// `priority_key`, `priorities` and `soft` (ratelimitd extensions, `config::shedding`).
    pub(crate) shedding: super::shedding::RawShedding,
}

/// Parses one file. `None` when the whole file is unusable (syntax error, non-map top level).
pub(crate) fn parse_file(contents: &str, sink: &mut Sink<'_>) -> Option<RawRoot> {
    // Only the first document counts, as with yaml.v2's Unmarshal; an empty file is an empty map.
    let mut doc = match serde_yaml::Deserializer::from_str(contents).next() {
        None => Value::Null,
        Some(de) => match Value::deserialize(de) {
            Ok(v) => v,
            Err(e) => {
                sink.push("", format!("error loading config file: {e}"));
                return None;
            }
        },
    };
    // yaml.v2 honours `<<` merge keys; serde_yaml needs asking.
    if let Err(e) = doc.apply_merge() {
        sink.push("", format!("error loading config file: {e}"));
        return None;
    }
    let empty = Mapping::new();
    let map = match untag(&doc) {
        Value::Null => &empty,
        Value::Mapping(m) => m,
        other => {
            sink.push(
                "",
                unmarshal_error(other, None, "map[interface {}]interface {}"),
            );
            return None;
        }
    };
    check_keys(map, "", sink);
    let mut t = Typed { sink };
    Some(RawRoot {
        domain: match map.get("domain") {
            None => Some(String::new()),
            Some(_) => t.string(map, "", "domain"),
        },
        descriptors: t.descriptors(map, ""),
        default_limit: t.rate_limit(map, "", "default_limit"),
        max_request_limit: t.rate_limit(map, "", "max_request_limit"),
    })
}

impl Typed<'_, '_> {
    fn descriptors(&mut self, map: &Mapping, parent: &str) -> Vec<RawDescriptor> {
        let items = self.list(map, parent, "descriptors", "[]config.YamlDescriptor");
        items
            .into_iter()
            .map(|(path, m)| self.descriptor(m, path))
            .collect()
    }

    fn descriptor(&mut self, m: &Mapping, path: String) -> RawDescriptor {
        let flag = |t: &mut Self, name: &str| t.bool(m, &path, name).unwrap_or(false);
        for field in ["default_limit", "max_request_limit"] {
            if m.get(field).is_some() {
                self.sink.push(
                    &field_path(&path, field),
                    format!("{field} belongs at the top of the file, beside domain (it applies to the whole domain)"),
                );
            }
        }
        RawDescriptor {
            key: self.string(m, &path, "key").unwrap_or_default(),
            value: self.string(m, &path, "value").unwrap_or_default(),
            value_regex: self.string(m, &path, "value_regex"),
            regex_key: self.string(m, &path, "regex_key"),
            when: self.string(m, &path, "when"),
            value_given: m.get("value").is_some(),
            rate_limit: self.rate_limit(m, &path, "rate_limit"),
            rate_limits: self.rate_limits(m, &path),
            descriptors: self.descriptors(m, &path),
            shadow_mode: flag(self, "shadow_mode"),
            quota_mode: flag(self, "quota_mode"),
            quota_group: self.string(m, &path, "quota_group"),
            detailed_metric: flag(self, "detailed_metric"),
            value_to_metric: flag(self, "value_to_metric"),
            share_threshold: flag(self, "share_threshold"),
            metadata: self.metadata(m, &path),
            path,
        }
    }

    /// The `rate_limit` map under `name` (`rate_limit`, or a file's `default_limit`).
    fn rate_limit(&mut self, m: &Mapping, parent: &str, name: &str) -> Option<RawRateLimit> {
        let path = field_path(parent, name);
        let v = m.get(name)?;
        match untag(v) {
            Value::Null => None,
            Value::Mapping(rl) => Some(self.rate_limit_map(rl, path)),
            _ => {
                self.mismatch(&path, v, "config.YamlRateLimit");
                None
            }
        }
    }

    /// `rate_limits`: a list of `rate_limit` maps. An empty list is kept (validation refuses it).
    fn rate_limits(&mut self, m: &Mapping, parent: &str) -> Option<Vec<RawRateLimit>> {
        let v = untag(m.get("rate_limits")?);
        let items = self.list(m, parent, "rate_limits", "[]config.YamlRateLimit");
        // Null is absent; a wrong type was just reported and is not also "an empty list".
        if !v.is_sequence() {
            return None;
        }
        Some(
            items
                .into_iter()
                .map(|(path, rl)| self.rate_limit_map(rl, path))
                .collect(),
        )
    }

    /// One `rate_limit` map found at `path`.
    fn rate_limit_map(&mut self, rl: &Mapping, path: String) -> RawRateLimit {
        let replaces = self
            .list(rl, &path, "replaces", "[]config.yamlReplaces")
            .into_iter()
            .map(|(p, r)| {
                let name = self.string(r, &p, "name").unwrap_or_default();
                (p, name)
            })
            .collect();
        RawRateLimit {
            requests_per_unit: self.uint32(rl, &path, "requests_per_unit").unwrap_or(0),
            requests_per_unit_given: rl.get("requests_per_unit").is_some(),
            unit: match rl.get("unit") {
                None => Some(String::new()),
                Some(_) => self.string(rl, &path, "unit"),
            },
            unlimited: match rl.get("unlimited") {
                None => Some(false),
                Some(_) => self.bool(rl, &path, "unlimited"),
            },
            name: self.string(rl, &path, "name").unwrap_or_default(),
            replaces,
            failure_mode: self.string(rl, &path, "failure_mode"),
            local_share: self.number(rl, &path, "local_share"),
            algorithm: self.string(rl, &path, "algorithm"),
            burst: self.uint32(rl, &path, "burst"),
            unit_multiplier: self.uint32(rl, &path, "unit_multiplier"),
            lease: self.uint32(rl, &path, "lease"),
            split: self.uint32(rl, &path, "split"),
            calendar: self.bool(rl, &path, "calendar"),
            usage: self.usage_mode(rl, &path),
            usage_estimate: self.usage_estimate(rl, &path),
            time_zone: self.string(rl, &path, "time_zone"),
            when: self.string(rl, &path, "when"),
            regions: self.regions(rl, &path),
            shedding: self.shedding(rl, &path),
            path,
        }
    }

    /// `metadata` becomes a JSON object (it is returned as a protobuf Struct,
    /// `docs/design/contract.md#dynamic-metadata`).
    fn metadata(&mut self, m: &Mapping, parent: &str) -> Option<Map<String, Json>> {
        let path = field_path(parent, "metadata");
        let v = m.get("metadata")?;
        match untag(v) {
            Value::Null => None,
            Value::Mapping(_) => match to_json(v) {
                Ok(Json::Object(obj)) => Some(obj),
                Ok(_) => None,
                Err(e) => {
                    self.sink
                        .push(&path, format!("error parsing metadata: {e}"));
                    None
                }
            },
            _ => {
                let error = unmarshal_error(v, Some("metadata"), "map[string]interface {}");
                self.sink.push(&path, error);
                None
            }
        }
    }
}
