//! `STRICT_DOMAINS`: with it on, `POST /check` and `/json` refuse a request for a domain the
//! configuration does not define (400, naming it and the domains loaded) instead of allowing it
//! with no limit, which is the Go service's behaviour and the default: a misspelt domain in a
//! client is otherwise only visible as a counter. gRPC keeps Go's answer either way (Envoy cannot
//! act on a refusal other than by its failure mode).

use super::HttpState;

/// Domains named in a refusal, at most (the rest are counted).
const LISTED: usize = 10;

/// Characters of the requested domain echoed back, at most.
const ECHOED: usize = 128;

/// Why `domain` is refused, when strict mode is on and no domain of the current configuration
/// has that name. `None` when the request may go on (also with no configuration loaded: that
/// answer is the service's own).
pub(super) fn refusal(s: &HttpState, domain: &str) -> Option<String> {
    if !s.edges.strict_domains {
        return None;
    }
    let snapshot = s.service.config.snapshot()?;
    let config = &snapshot.config;
    if config.domain(domain).is_some() {
        return None;
    }
    let mut loaded: Vec<&str> = config
        .domains()
        .take(LISTED)
        .map(|d| d.name.as_str())
        .collect();
    let more = config.domain_count().saturating_sub(LISTED);
    let more = (more > 0).then(|| format!(" and {more} more"));
    if loaded.is_empty() {
        loaded.push("none");
    }
    let shown: String = domain.chars().take(ECHOED).collect();
    Some(format!(
        "unknown domain '{}' (STRICT_DOMAINS=true refuses domains the configuration does not \
         define); loaded: {}{}",
        shown.escape_debug(),
        loaded.join(", "),
        more.unwrap_or_default()
    ))
}
