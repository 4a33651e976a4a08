//! Rules from the policy database: checked on input, then written as YAML documents — one per
//! domain, the rules' descriptor paths merged into one tree — that the reload pipeline compiles
//! with the configuration files. The same validator therefore checks them, with the same texts.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::input::{descriptor, domain, object};
use super::model::{FieldError, PathEntry};
use ratelimitd_core::config::{self, CompileOptions, ConfigFile};

/// Prefix of the names of the generated documents (errors cite them).
pub(crate) const FILE_PREFIX: &str = "policy-db/";

/// One rule: a `rate_limit` (the YAML fields) on one descriptor path of one domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// Its id (from the URL).
    pub id: String,
    /// The domain.
    pub domain: String,
    /// The descriptor path its limit sits at.
    pub descriptor: Vec<PathEntry>,
    /// The `rate_limit` object, as in YAML.
    pub rate_limit: Map<String, Value>,
    /// A disabled rule is stored but not compiled.
    pub enabled: bool,
}

impl Rule {
    /// Its JSON form in API answers.
    pub fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "domain": self.domain,
            "descriptor": self.descriptor,
            "rate_limit": self.rate_limit,
            "enabled": self.enabled,
        })
    }
}

/// Checks a `PUT /v1/policies/{id}` body: its shape here, its `rate_limit` by compiling the rule
/// alone with the configuration validator (error paths become `rate_limit.<field>`).
pub fn parse_rule(id: &str, body: &[u8]) -> Result<Rule, Vec<FieldError>> {
    let mut errors = Vec::new();
    const KNOWN: [&str; 4] = ["domain", "descriptor", "rate_limit", "enabled"];
    let obj = object(body, &KNOWN, &mut errors)?;
    if !valid_id(id) {
        errors.push(FieldError::new(
            "id",
            "expected 1 to 128 letters, digits, '-', '_' or '.'",
        ));
    }
    let domain = domain(&obj, &mut errors);
    let path = descriptor(obj.get("descriptor"), &mut errors);
    let rate_limit = rate_limit(&obj, &mut errors);
    let enabled = enabled(&obj, &mut errors);
    let (Some(domain), Some(descriptor), Some(rate_limit), Some(enabled)) =
        (domain, path, rate_limit, enabled)
    else {
        return Err(errors);
    };
    let rule = Rule {
        id: id.to_string(),
        domain,
        descriptor,
        rate_limit,
        enabled: true,
    };
    compile_errors(&rule, &mut errors);
    if errors.is_empty() {
        Ok(Rule { enabled, ..rule })
    } else {
        Err(errors)
    }
}

/// A rule's id: 1 to 128 letters, digits, `-`, `_` or `.`.
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

/// `rate_limit`: a required object, as a configuration file's.
fn rate_limit(
    obj: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Map<String, Value>> {
    match obj.get("rate_limit") {
        Some(Value::Object(o)) => Some(o.clone()),
        Some(_) => {
            errors.push(FieldError::new("rate_limit", "expected an object"));
            None
        }
        None => {
            errors.push(FieldError::new("rate_limit", "is required"));
            None
        }
    }
}

/// `enabled`: true or false, true when absent.
fn enabled(obj: &Map<String, Value>, errors: &mut Vec<FieldError>) -> Option<bool> {
    match obj.get("enabled") {
        None => Some(true),
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            errors.push(FieldError::new("enabled", "expected true or false"));
            None
        }
    }
}

/// Compiles `rule` as the configuration would and adds its errors, each under the field it is
/// about (`rate_limit…`, else `descriptor`).
fn compile_errors(rule: &Rule, errors: &mut Vec<FieldError>) {
    let Err(found) = config::compile(
        &to_files(std::slice::from_ref(rule)),
        &CompileOptions::default(),
    ) else {
        return;
    };
    for e in found.0 {
        let field = match e.path.find("rate_limit") {
            Some(at) => e.path[at..].to_string(),
            None => "descriptor".to_string(),
        };
        errors.push(FieldError::new(field, e.message));
    }
}

/// One descriptor node of a generated document.
#[derive(Default)]
struct Node {
    key: String,
    value: String,
    rate_limit: Option<Map<String, Value>>,
    children: Vec<Node>,
}

impl Node {
    fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("key".into(), json!(self.key));
        if !self.value.is_empty() {
            o.insert("value".into(), json!(self.value));
        }
        if let Some(rl) = &self.rate_limit {
            o.insert("rate_limit".into(), Value::Object(rl.clone()));
        }
        if !self.children.is_empty() {
            let children: Vec<Value> = self.children.iter().map(Node::to_json).collect();
            o.insert("descriptors".into(), Value::Array(children));
        }
        Value::Object(o)
    }
}

/// Inserts `rl` at `path` below `level`, sharing nodes with earlier rules. A second rule on the
/// same path gets a node of its own, so the validator reports the duplicate composite key.
fn insert(level: &mut Vec<Node>, path: &[PathEntry], rl: &Map<String, Value>) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    let at = level.iter().position(|n| {
        n.key == first.key && n.value == first.value && (!rest.is_empty() || n.rate_limit.is_none())
    });
    let at = at.unwrap_or_else(|| {
        level.push(Node {
            key: first.key.clone(),
            value: first.value.clone(),
            ..Node::default()
        });
        level.len() - 1
    });
    if rest.is_empty() {
        level[at].rate_limit = Some(rl.clone());
    } else {
        insert(&mut level[at].children, rest, rl);
    }
}

/// The enabled rules as YAML documents, one per domain (`policy-db/<domain>`), in domain order.
pub fn to_files(rules: &[Rule]) -> Vec<ConfigFile> {
    let mut domains: BTreeMap<&str, Vec<Node>> = BTreeMap::new();
    for r in rules.iter().filter(|r| r.enabled) {
        // An unnamed rule's limit is named after the rule, so the console, the violation log and
        // the hot keys can say which rule limited a client.
        let mut rate_limit = r.rate_limit.clone();
        rate_limit
            .entry("name")
            .or_insert_with(|| Value::String(r.id.clone()));
        insert(
            domains.entry(r.domain.as_str()).or_default(),
            &r.descriptor,
            &rate_limit,
        );
    }
    domains
        .into_iter()
        .map(|(domain, roots)| {
            let doc = json!({
                "domain": domain,
                "descriptors": roots.iter().map(Node::to_json).collect::<Vec<_>>(),
            });
            ConfigFile {
                name: format!("{FILE_PREFIX}{domain}"),
                // A JSON document is YAML; serde_json cannot fail on a Value.
                contents: doc.to_string(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_compile_into_one_tree_per_domain() {
        let a = parse_rule("a", br#"{"domain":"api","descriptor":[{"key":"client_key","value":"u1"},{"key":"endpoint"}],"rate_limit":{"unit":"minute","requests_per_unit":10}}"#).unwrap();
        let b = parse_rule("b", br#"{"domain":"api","descriptor":[{"key":"client_key","value":"u1"}],"rate_limit":{"unit":"second","requests_per_unit":3,"algorithm":"token_bucket"}}"#).unwrap();
        let files = to_files(&[a, b]);
        assert_eq!(files.len(), 1);
        let compiled = config::compile(&files, &CompileOptions::default()).unwrap();
        let limits = compiled.limits();
        assert_eq!(limits.len(), 2);
        assert_eq!(limits[0].full_key, "api.client_key_u1");
        assert_eq!(limits[1].full_key, "api.client_key_u1.endpoint");
        // Unnamed rules are named after their id.
        assert_eq!(
            (limits[0].name.as_str(), limits[1].name.as_str()),
            ("b", "a")
        );
    }

    #[test]
    fn a_named_rule_keeps_its_name() {
        let r = parse_rule("r1", br#"{"domain":"api","descriptor":[{"key":"k"}],"rate_limit":{"unit":"second","requests_per_unit":1,"name":"per-key"}}"#).unwrap();
        let compiled = config::compile(&to_files(&[r]), &CompileOptions::default()).unwrap();
        assert_eq!(compiled.limits()[0].name, "per-key");
    }

    #[test]
    fn the_validator_reports_rate_limit_errors_with_its_texts() {
        let errors = parse_rule("x", br#"{"domain":"api","descriptor":[{"key":"k"}],"rate_limit":{"unit":"fortnight","requests_per_unit":1,"colour":"red"}}"#).unwrap_err();
        let got: Vec<(&str, &str)> = errors
            .iter()
            .map(|e| (e.field.as_str(), e.message.as_str()))
            .collect();
        assert!(
            got.contains(&("rate_limit.unit", "invalid rate limit unit 'fortnight'")),
            "{got:?}"
        );
        assert!(
            got.iter()
                .any(|(f, m)| f.starts_with("rate_limit") && m.contains("unknown key 'colour'")),
            "{got:?}"
        );
        let bad_id = parse_rule("a b", br#"{"domain":"api","descriptor":[{"key":"k"}],"rate_limit":{"unit":"second","requests_per_unit":1}}"#).unwrap_err();
        assert_eq!(bad_id[0].field, "id");
    }
}
