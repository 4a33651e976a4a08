//! Step 1 of a decision: find the limit of every descriptor (config match or override), then apply
//! `replaces` and `unlimited` across the whole request (SPEC §B.3, §B.4, §C.2).

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use super::RequestError;
use super::request::{Descriptor, Request};
use super::stats_key;
use crate::algorithm::Algorithm;
use crate::config::{Domain, Limit, MatchKind};

/// What applies to one descriptor after replaces and unlimited are settled.
#[derive(Debug, Clone)]
pub enum Resolved<'a> {
    /// No limit: none configured, unknown domain, or replaced by another limit of the request.
    NoLimit,
    /// `unlimited: true`: always OK, never counted.
    Unlimited,
    /// A limit to apply, with the entries its counter is keyed on.
    Limited {
        /// The limit (configured, or built from the override).
        limit: Arc<Limit>,
        /// (key, value) per entry; the value is the wildcard pattern on share_threshold levels.
        key_entries: Vec<(&'a str, &'a str)>,
        /// The (sanitised) stats key its counters are reported under ([`super::stats_key`]).
        stats_key: Cow<'a, str>,
    },
}

/// Resolves every descriptor of `req` against its `domain` of the config (`None`: not configured).
pub fn resolve<'a>(
    domain: Option<&'a Domain>,
    req: &'a Request,
) -> Result<Vec<Resolved<'a>>, RequestError> {
    let Some(domain) = domain else {
        // An unknown domain is not an error: every descriptor is OK with no limit.
        return Ok(vec![Resolved::NoLimit; req.descriptors.len()]);
    };
    let mut found = Vec::with_capacity(req.descriptors.len());
    for (i, d) in req.descriptors.iter().enumerate() {
        found.push(match &d.limit {
            Some(o) => {
                let unit = o
                    .unit
                    .ok_or(RequestError::InvalidOverrideUnit { descriptor: i })?;
                // The override replaces the rate; the algorithm is the matched limit's, so an
                // override on a token bucket descriptor is still a token bucket.
                let algorithm = domain
                    .get_limit(&d.entries)
                    .filter(|m| !m.limit.unlimited)
                    .map_or(Algorithm::FixedWindow, |m| m.limit.algorithm);
                let rate = (o.requests_per_unit, unit, algorithm);
                let limit = Arc::new(override_limit(&req.domain, d, rate));
                let stats_key = Cow::Owned(limit.stats_key.clone());
                Some((limit, plain_entries(d), stats_key))
            }
            None => domain.get_limit(&d.entries).map(|m| {
                let entries = d
                    .entries
                    .iter()
                    .zip(&m.path)
                    .map(|(e, level)| {
                        let shared =
                            level.kind == MatchKind::Wildcard && level.node.share_threshold;
                        let value = if shared {
                            level.node.value.as_str()
                        } else {
                            e.value.as_str()
                        };
                        (e.key.as_str(), value)
                    })
                    .collect();
                let stats_key = stats_key::for_match(&req.domain, m.limit, &d.entries, &m.path);
                (Arc::clone(m.limit), entries, stats_key)
            }),
        });
    }
    // Names any matched limit (unlimited ones included) replaces, across the whole request.
    let replaced: HashSet<String> = found
        .iter()
        .flatten()
        .flat_map(|(l, _, _)| l.replaces.iter().cloned())
        .collect();
    Ok(found
        .into_iter()
        .map(|f| match f {
            None => Resolved::NoLimit,
            // Unlimited wins over replaced, as in the Go service (it marks unlimited first).
            Some((limit, _, _)) if limit.unlimited || limit.unit.is_none() => Resolved::Unlimited,
            Some((limit, _, _))
                if limit
                    .all()
                    .any(|l| !l.name.is_empty() && replaced.contains(&l.name)) =>
            {
                Resolved::NoLimit
            }
            Some((limit, key_entries, stats_key)) => Resolved::Limited {
                limit,
                key_entries,
                stats_key,
            },
        })
        .collect())
}

fn plain_entries(d: &Descriptor) -> Vec<(&str, &str)> {
    d.entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect()
}

/// The limit a request override stands for; its stats key always carries the values (SPEC §B.3.2).
fn override_limit(
    domain: &str,
    d: &Descriptor,
    (requests_per_unit, unit, algorithm): (u32, crate::config::Unit, Algorithm),
) -> Limit {
    let mut full_key = domain.to_string();
    for e in &d.entries {
        full_key.push('.');
        full_key.push_str(&e.key);
        if !e.value.is_empty() {
            full_key.push('_');
            full_key.push_str(&e.value);
        }
    }
    Limit {
        stats_key: crate::config::sanitize(full_key.as_str().into()).into_owned(),
        full_key,
        name: String::new(),
        requests_per_unit,
        unit: Some(unit),
        unlimited: false,
        replaces: Vec::new(),
        shadow_mode: false,
        quota_mode: false,
        detailed_metric: false,
        metadata: None,
        failure_mode: crate::config::FailureMode::Error,
        algorithm,
        // A bucket's capacity is the overridden rate (the config's burst belongs to its rate).
        burst: None,
        unit_multiplier: 1,
        also: Vec::new(),
    }
}
