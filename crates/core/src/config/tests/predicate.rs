//! `when:` predicates: what they see (entries, domain, hits), how a false one passes a node over
//! for the next candidate of its level or leaves a limit out, how a failing one answers by its
//! limit's `failure_mode`, and every way an expression is refused at load, with its position.

use crate::config::predicate::{Judge, Verdict};
use crate::config::*;
use crate::test_support::{E, config, errors};

/// The full key of the node matched for `entries` asking `hits`, with predicates evaluated.
fn matched(cfg: &RateLimitConfig, entries: &[E], hits: u64) -> Option<String> {
    let domain = cfg.domain("api")?;
    let mut judge = Judge::new(entries, "api", hits, FailureMode::Error);
    match domain.lookup_gated(entries, &mut judge) {
        Lookup::Limit(m) => Some(m.limit.full_key.clone()),
        _ => None,
    }
}

const TIERS: &str = r#"
domain: api
descriptors:
  - key: tenant
    value: acme
    when: 'descriptor.plan == "gold"'
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: tenant
    value_regex: "ac.*"
    when: 'hits_addend > 5 && domain == "api"'
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: tenant
    rate_limit: {unit: second, requests_per_unit: 1}
"#;

#[test]
fn a_false_entry_predicate_passes_the_node_over_for_the_next_candidate() {
    let cfg = config(TIERS);
    assert!(cfg.domain("api").unwrap().has_predicates);
    let gold = [E("tenant", "acme"), E("plan", "gold")];
    // `plan` is not part of the tree: a descriptor of two entries matches nothing at depth 2.
    assert_eq!(matched(&cfg, &gold, 1), None);
    assert_eq!(
        matched(&cfg, &[E("tenant", "acme")], 1).as_deref(),
        Some("api.tenant"),
        "descriptor.plan is absent: under failure_mode error the request would fail, so check the judge"
    );
}

#[test]
fn variables_are_the_entries_the_domain_and_the_hits() {
    let cfg = config(TIERS);
    // The exact node's predicate reads a missing key: an error, counted, under the default mode
    // (error) fatal; the regex node's predicate holds for 6 hits.
    let entries = [E("tenant", "acme")];
    let domain = cfg.domain("api").unwrap();
    let mut judge = Judge::new(&entries, "api", 6, FailureMode::Allow);
    let Lookup::Limit(m) = domain.lookup_gated(&entries, &mut judge) else {
        panic!("no limit")
    };
    assert_eq!(m.limit.full_key, "api.tenant=~ac.*");
    assert_eq!(judge.errors, 1, "descriptor.plan has no such key");
    assert_eq!(judge.fatal, None, "failure_mode allow skips the node");
    // Under the default (error) the same request fails.
    let mut judge = Judge::new(&entries, "api", 6, FailureMode::Error);
    domain.lookup_gated(&entries, &mut judge);
    let fatal = judge.fatal.expect("fatal under error");
    assert!(fatal.contains("descriptor.plan"), "{fatal}");
    // With the key present: gold matches the exact node, anything else falls through.
    let cfg = config(&TIERS.replace(
        "descriptor.plan == \"gold\"",
        "\"plan\" in descriptor && descriptor.tenant == \"acme\" && size(descriptor) == 1 || has(descriptor.gold)",
    ));
    assert_eq!(
        matched(&cfg, &[E("tenant", "acme")], 1).as_deref(),
        Some("api.tenant_acme")
            .filter(|_| false)
            .or(Some("api.tenant"))
    );
    assert_eq!(
        matched(&cfg, &[E("tenant", "acme")], 9).as_deref(),
        Some("api.tenant=~ac.*")
    );
}

#[test]
fn a_limit_predicate_chooses_among_rate_limits() {
    let cfg = config(
        r#"
domain: api
descriptors:
  - key: user
    rate_limits:
      - {unit: second, requests_per_unit: 10, when: 'hits_addend <= 1'}
      - {unit: minute, requests_per_unit: 100, failure_mode: allow, when: 'descriptor.user.startsWith("bot-")'}
"#,
    );
    let limit = cfg.limits()[0];
    let when = limit.when.as_ref().expect("first limit's predicate");
    assert_eq!(when.source, "hits_addend <= 1");
    assert_eq!(when.failure_mode, None);
    let second = limit.also[0].when.as_ref().unwrap();
    assert_eq!(second.failure_mode, Some(FailureMode::Allow));
    let bot = [E("user", "bot-7")];
    let mut judge = Judge::new(&bot, "api", 1, FailureMode::Error);
    assert_eq!(judge.evaluate(second).verdict, Verdict::Holds);
    assert_eq!(judge.evaluate(when).verdict, Verdict::Holds);
    let mut judge = Judge::new(&bot, "api", 2, FailureMode::Error);
    assert_eq!(judge.evaluate(when).verdict, Verdict::Fails);
}

#[test]
fn a_failing_predicate_answers_by_its_failure_mode() {
    let yaml = |mode: &str| {
        format!(
            "domain: api\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1, {mode} when: 'descriptor.missing == \"x\"'}}\n"
        )
    };
    for (mode, default, verdict) in [
        ("failure_mode: allow,", FailureMode::Error, Verdict::Fails),
        ("failure_mode: deny,", FailureMode::Allow, Verdict::Holds),
        ("failure_mode: local,", FailureMode::Allow, Verdict::Holds),
        ("failure_mode: error,", FailureMode::Allow, Verdict::Error),
        ("", FailureMode::Allow, Verdict::Fails),
        ("", FailureMode::Error, Verdict::Error),
    ] {
        let cfg = config(&yaml(mode));
        let when = cfg.limits()[0].when.clone().unwrap();
        let entries = [E("k", "v")];
        let mut judge = Judge::new(&entries, "api", 1, default);
        let got = judge.evaluate(&when);
        assert_eq!(got.verdict, verdict, "{mode} default {default:?}");
        assert!(got.error.is_some());
        assert_eq!(judge.errors, 1);
    }
}

#[test]
fn a_predicate_that_is_not_a_bool_is_an_error() {
    let cfg = config(
        "domain: api\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: allow, when: 'domain'}\n",
    );
    let when = cfg.limits()[0].when.clone().unwrap();
    let entries = [E("k", "v")];
    let got = Judge::new(&entries, "api", 1, FailureMode::Error).evaluate(&when);
    assert_eq!(got.verdict, Verdict::Fails);
    assert!(got.error.unwrap().contains("not a bool"));
}

#[test]
fn a_domain_without_when_has_no_predicates() {
    let cfg = config(
        "domain: api\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    );
    assert!(!cfg.domain("api").unwrap().has_predicates);
}

fn when_errors(expr: &str) -> Vec<(String, String)> {
    let yaml = format!(
        "domain: api\ndescriptors:\n  - key: k\n    when: {}\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n",
        serde_json::to_string(expr).unwrap()
    );
    errors(&yaml)
}

#[test]
fn bad_predicates_are_refused_at_load_with_their_position() {
    let at = "descriptors[0].when";
    let cases = [
        ("descriptor.k ==", "line 1, column"),
        (
            "descriptr.k == 'v'",
            "unknown variable 'descriptr' (expected descriptor, domain or hits_addend) at line 1, column 1",
        ),
        (
            "domain == 'a' && lower(domain) == 'a'",
            "unknown function 'lower'",
        ),
        (
            "domain.matches('a.*')",
            "matches() is not available in when (use value_regex",
        ),
        (
            "descriptor.exists(k, descriptor.exists(j, j == k))",
            "a comprehension (exists, all, exists_one, map, filter) inside another is not accepted",
        ),
        ("", "empty expression"),
        (
            "google.protobuf.Int64Value{value: 1} == 1",
            "message construction",
        ),
    ];
    for (expr, want) in cases {
        let got = when_errors(expr);
        assert_eq!(got.len(), 1, "{expr}: {got:?}");
        assert_eq!(got[0].0, at, "{expr}");
        assert!(got[0].1.contains(want), "{expr}: {}", got[0].1);
    }
    // Positions count characters, not bytes, and lines.
    let got = when_errors("hits_addend > 1 &&\n  nope == 1");
    assert!(got[0].1.contains("unknown variable 'nope'"), "{}", got[0].1);
    assert!(got[0].1.contains("at line 2, column 3"), "{}", got[0].1);
    // A syntax error at character 16 of line 1.
    let got = when_errors("hits_addend > 1 )");
    assert!(got[0].1.contains("line 1, column 17"), "{}", got[0].1);
}

#[test]
fn expressions_are_bounded_at_load() {
    let long = format!("domain == '{}'", "a".repeat(predicate::MAX_LEN));
    let got = when_errors(&long);
    assert!(
        got[0].1.contains("at most 1024 are accepted"),
        "{}",
        got[0].1
    );
    let many = format!("size([{}]) > 0", vec!["1"; 300].join(","));
    let got = when_errors(&many);
    assert!(got[0].1.contains("more than 256 parts"), "{}", got[0].1);
    let deep = format!("{}true{}", "(".repeat(60), ")".repeat(60));
    let got = when_errors(&deep);
    assert_eq!(got.len(), 1, "{got:?}");
    let want = "nests more than 16 levels (brackets and conditionals) at line 1, column 17";
    assert!(got[0].1.contains(want), "{}", got[0].1);
    let deep = vec!["true ? 1"; 20].join(" : ") + " : 2 == 1";
    assert!(when_errors(&deep)[0].1.contains("nests more than 16"));
    // Brackets inside a string are text.
    let ok = format!(
        "domain != '{}' && {}true{}",
        "(".repeat(40),
        "(".repeat(15),
        ")".repeat(15)
    );
    let cfg = config(&format!(
        "domain: api\ndescriptors:\n  - key: k\n    when: \"{ok}\"\n    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
    ));
    assert!(cfg.domain("api").unwrap().has_predicates);
}

#[test]
fn the_largest_accepted_expression_evaluates_on_a_small_stack() {
    // The deepest tree accepted: a left-leaning chain, refused one operation longer.
    let chain = vec!["1"; 15].join("+") + " > hits_addend";
    let deeper = vec!["1"; 16].join("+") + " > hits_addend";
    let got = when_errors(&deeper);
    assert!(
        got[0].1.contains("more than 16 operations deep"),
        "{}",
        got[0].1
    );
    let cfg = config(&format!(
        "domain: api\ndescriptors:\n  - key: k\n    rate_limit: {{unit: second, requests_per_unit: 1, when: '{chain}'}}\n"
    ));
    let when = cfg.limits()[0].when.clone().unwrap();
    let verdict = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(move || {
            let entries = [E("k", "v")];
            Judge::new(&entries, "api", 1, FailureMode::Error)
                .evaluate(&when)
                .verdict
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(verdict, Verdict::Holds);
}

#[test]
fn when_is_refused_where_it_means_nothing() {
    let got = errors(
        "domain: api\ndefault_limit: {unit: second, requests_per_unit: 1, when: 'true'}\nmax_request_limit: {unit: second, requests_per_unit: 1, when: 'true'}\ndescriptors: []\n",
    );
    let paths: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, ["default_limit.when", "max_request_limit.when"]);
}
