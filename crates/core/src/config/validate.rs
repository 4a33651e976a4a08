//! Checks 4–5 of `docs/design/contract.md#validation` and compilation: raw descriptors → the
//! indexed tree, checking domains, keys, units and replaces on the way. Every file and every
//! descriptor is checked even after an error (into a scratch tree), so one load reports all
//! problems; any error rejects the whole load.

use crate::algorithm::calendar::Zone;
use std::collections::HashMap;
use std::sync::Arc;

use super::compiled::{Domain, Level, Map, Node, RateLimitConfig, RequestLimitCap};
use super::error::{ConfigError, ConfigErrors, Sink, field_path};
use super::limit::build_limit;
use super::model::{RawDescriptor, RawRateLimit, parse_file};
use super::unit::Unit;

/// One config file to compile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile {
    /// The name errors cite: the goruntime key (e.g. `config.basic.yaml`), a path, or an xDS name.
    pub name: String,
    /// The YAML text.
    pub contents: String,
}

/// Options that change how files combine.
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// `MERGE_DOMAIN_CONFIG`: a domain seen again adds its top-level descriptors to the first one
    /// instead of being a `duplicate domain` error.
    pub merge_domains: bool,
    /// `CALENDAR_TIME_ZONE`: the zone of the calendar windows (`calendar: true`) that name no
    /// `time_zone`; `None` = UTC.
    pub calendar_time_zone: Option<&'static Zone>,
}

/// Parses, validates and compiles `files`, in order. Returns every error found, or the config.
pub fn compile(
    files: &[ConfigFile],
    opts: &CompileOptions,
) -> Result<RateLimitConfig, ConfigErrors> {
    let mut errors: Vec<ConfigError> = Vec::new();
    let mut warnings: Vec<ConfigError> = Vec::new();
    let mut domains: Map<Domain> = Map::default();
    // The file that first defined each domain, for the duplicate error.
    let mut first_file: HashMap<String, String> = HashMap::new();
    for file in files {
        let mut sink = Sink::new(&file.name, &mut errors, &mut warnings)
            .with_default_zone(opts.calendar_time_zone);
        let Some(root) = parse_file(&file.contents, &mut sink) else {
            continue;
        };
        // Descriptors of a rejected file are still checked, into a tree that is then dropped.
        let mut scratch = Level::default();
        let domain_name = root.domain.clone().unwrap_or_default();
        let level = if root.domain.is_none() {
            &mut scratch
        } else if domain_name.is_empty() {
            sink.push("domain", "config file cannot have empty domain");
            &mut scratch
        } else if let Some(first) = first_file.get(&domain_name).filter(|_| !opts.merge_domains) {
            // Go names neither file; naming the first one finds a stray backup copy at once.
            sink.push_hinted(
                "domain",
                format!("duplicate domain '{domain_name}' in config file"),
                Some(format!("already defined in {first}")),
            );
            &mut scratch
        } else {
            first_file
                .entry(domain_name.clone())
                .or_insert_with(|| file.name.clone());
            let domain = domains
                .entry(domain_name.clone())
                .or_insert_with(|| Domain {
                    name: domain_name.clone(),
                    root: Level::default(),
                    priority_keys: Vec::new(),
                    default_limit: None,
                    max_request_limit: None,
                    has_predicates: false,
                });
            if let Some(rl) = &root.default_limit {
                set_default_limit(domain, rl, &mut sink);
            }
            if let Some(rl) = &root.max_request_limit {
                set_request_limit_cap(domain, rl, &mut sink);
            }
            &mut domain.root
        };
        // With merging, a later file's top-level descriptors land beside the earlier ones, and
        // the per-level duplicate check below rejects a repeated composite key.
        load_level(
            level,
            &format!("{domain_name}."),
            root.descriptors,
            &mut sink,
        );
    }
    for domain in domains.values_mut() {
        domain.priority_keys = super::shedding::priority_keys(&domain.root);
        domain.has_predicates = domain.root.has_predicates();
    }
    if errors.is_empty() {
        Ok(RateLimitConfig { domains, warnings })
    } else {
        Err(ConfigErrors(errors))
    }
}

/// Validates `descriptors` and adds them to `level`. `parent_key` is the stats key of the level,
/// ending in `.` (e.g. `test-domain.key1_value1.`).
fn load_level(
    level: &mut Level,
    parent_key: &str,
    descriptors: Vec<RawDescriptor>,
    sink: &mut Sink<'_>,
) {
    for d in descriptors {
        if d.key.is_empty() {
            sink.push(&field_path(&d.path, "key"), "descriptor has empty key");
            continue;
        }
        // A refused pattern (reported) still names its node, and its descriptors are checked.
        let checked = super::value_regex::check(&d, sink);
        let refused = checked.is_err();
        let value_regex = checked.unwrap_or(None);
        let composite = match &d.value_regex {
            Some(pattern) => super::value_regex::name(&d.key, pattern),
            None if d.value.is_empty() => d.key.clone(),
            None => format!("{}_{}", d.key, d.value),
        };
        let full_key = format!("{parent_key}{composite}");
        // `a`/`b_c` and `a_b`/`c` both give `a_b_c`: Go's collision, kept on purpose
        // (`docs/design/contract.md#validation`). Two regex entries are the same when key and
        // pattern are: the second could never match.
        let duplicate = match &value_regex {
            Some(_) => (level.regexes.iter())
                .any(|n| (n.value_regex.as_ref()).is_some_and(|r| r.name == composite)),
            None => level.by_key.contains_key(&composite),
        };
        if duplicate {
            sink.push(
                &d.path,
                format!("duplicate descriptor composite key '{full_key}'"),
            );
        }
        let limit = super::multi::node_limit(&d, &full_key, sink);
        if d.share_threshold && d.value_regex.is_none() && !composite.contains('*') {
            sink.push(
                &field_path(&d.path, "share_threshold"),
                format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key '{composite}'"
                ),
            );
        }
        check_quota_group(&d, sink);
        // The entry's predicate answers a failure by the failure_mode of the node's limit.
        let when = d.when.as_deref().and_then(|source| {
            let mode = limit.as_ref().and_then(|l| l.failure_mode);
            super::predicate::check(source, &field_path(&d.path, "when"), mode, sink)
        });
        let mut node = Node {
            key: d.key,
            value: d.value,
            limit: limit.map(Arc::new),
            share_threshold: d.share_threshold,
            value_to_metric: d.value_to_metric,
            value_regex,
            when,
            children: Level::default(),
        };
        load_level(
            &mut node.children,
            &format!("{full_key}."),
            d.descriptors,
            sink,
        );
        if duplicate || refused {
            continue;
        }
        if node.value_regex.is_some() {
            level.insert_regex(node);
        } else {
            level.insert(composite, node);
        }
    }
}

/// Checks a file's `default_limit` and makes it its domain's. With `MERGE_DOMAIN_CONFIG` only
/// one of a domain's files may set it: two would leave the winner to file order.
fn set_default_limit(domain: &mut Domain, rl: &RawRateLimit, sink: &mut Sink<'_>) {
    let full_key = format!("{}.default_limit", domain.name);
    let limit = build_limit(rl, &RawDescriptor::default(), &full_key, sink);
    if rl.when.is_some() {
        sink.push(
            &field_path(&rl.path, "when"),
            "when does not apply to default_limit (it counts the descriptors no node matched; put the condition on a descriptor)",
        );
    }
    if !rl.replaces.is_empty() {
        sink.push(
            &field_path(&rl.path, "replaces"),
            "replaces does not apply to default_limit (it only counts descriptors no other limit matched)",
        );
    }
    if let Some(other) = &domain.default_limit {
        sink.push(
            &rl.path,
            format!(
                "default_limit of domain '{}' is already set in {}",
                domain.name, other.file
            ),
        );
        return;
    }
    domain.default_limit = Some(Arc::new(limit));
}

/// Checks a file's `max_request_limit` and makes it its domain's: only a rate (`unit` and
/// `requests_per_unit`), since it caps the rate a request sets and nothing else.
fn set_request_limit_cap(domain: &mut Domain, rl: &RawRateLimit, sink: &mut Sink<'_>) {
    let others = [
        ("unlimited", rl.unlimited == Some(true)),
        ("name", !rl.name.is_empty()),
        ("replaces", !rl.replaces.is_empty()),
        ("failure_mode", rl.failure_mode.is_some()),
        ("local_share", rl.local_share.is_some()),
        ("algorithm", rl.algorithm.is_some()),
        ("burst", rl.burst.is_some()),
        ("unit_multiplier", rl.unit_multiplier.is_some()),
        ("lease", rl.lease.is_some()),
        ("split", rl.split.is_some()),
        ("calendar", rl.calendar.is_some()),
        ("time_zone", rl.time_zone.is_some()),
        ("regions", rl.regions.is_some()),
        ("when", rl.when.is_some()),
    ];
    let mut ok = true;
    for (field, _) in others.iter().filter(|(_, set)| *set) {
        sink.push(
            &field_path(&rl.path, field),
            format!("max_request_limit takes only unit and requests_per_unit, not {field}"),
        );
        ok = false;
    }
    if !rl.requests_per_unit_given {
        sink.push(
            &field_path(&rl.path, "requests_per_unit"),
            "max_request_limit needs requests_per_unit (the most a request may ask for per unit)",
        );
        ok = false;
    }
    let text = rl.unit.as_deref().unwrap_or_default();
    let Some(unit) = Unit::parse(text) else {
        sink.push_hinted(
            &field_path(&rl.path, "unit"),
            format!("invalid rate limit unit '{text}'"),
            Some(Unit::EXPECTED.to_string()),
        );
        return;
    };
    if domain.max_request_limit.is_some() {
        sink.push(
            &rl.path,
            format!(
                "max_request_limit of domain '{}' is already set in another file",
                domain.name
            ),
        );
    } else if ok {
        domain.max_request_limit = Some(RequestLimitCap {
            requests_per_unit: rl.requests_per_unit,
            unit,
        });
    }
}

/// `quota_group` names a group of quota descriptors, so it means something only next to
/// `quota_mode: true` and a limit on the same node; anything else is refused rather than ignored.
fn check_quota_group(d: &RawDescriptor, sink: &mut Sink<'_>) {
    let Some(group) = &d.quota_group else { return };
    let path = field_path(&d.path, "quota_group");
    if group.is_empty() {
        sink.push(
            &path,
            "quota_group must not be empty (name the group, e.g. the model)",
        );
    } else if !d.quota_mode {
        sink.push(
            &path,
            format!("quota_group '{group}' needs quota_mode: true on the same descriptor"),
        );
    } else if d.rate_limit.is_none() && d.rate_limits.is_none() {
        sink.push(
            &path,
            format!(
                "quota_group '{group}' needs a rate_limit (or rate_limits) on the same descriptor"
            ),
        );
    }
}
