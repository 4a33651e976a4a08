//! `/check` bodies: the descriptor mapping, cost, and every refusal naming its field.

use super::*;

/// A body parsed for the domain `api` under the default caps.
fn api(body: &str) -> Result<CheckRequest, CheckError> {
    parse(body.as_bytes(), "api", &Limits::default())
}

fn field_of(body: &str) -> String {
    match api(body) {
        Err(CheckError::Field { field, .. }) => field,
        other => panic!("{body}: expected a field error, got {other:?}"),
    }
}

#[test]
fn maps_client_key_and_endpoint_onto_two_descriptors() {
    let r = api(r#"{"client_key":"user:42","endpoint":"/api/v1/search","cost":3}"#).unwrap();
    assert_eq!(r.request.domain, "api");
    let d = &r.request.descriptors;
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].entries, vec![Entry::new("client_key", "user:42")]);
    assert_eq!(
        d[1].entries,
        vec![
            Entry::new("client_key", "user:42"),
            Entry::new("endpoint", "/api/v1/search")
        ]
    );
    assert!(d.iter().all(|d| d.hits_addend == Some(3)));
    assert!(!r.details);
}

#[test]
fn defaults_and_extra_descriptors() {
    let r = api(
        r#"{"client_key":"k","domain":"edge","cost":0,"details":true,
             "descriptors":[{"entries":[{"key":"a","value":"b"}]},{"hitsAddend":5}]}"#,
    )
    .unwrap();
    assert_eq!(r.request.domain, "edge");
    assert!(r.details);
    let hits: Vec<_> = r
        .request
        .descriptors
        .iter()
        .map(|d| d.hits_addend)
        .collect();
    assert_eq!(
        hits,
        [Some(0), Some(0), Some(5)],
        "cost unless a descriptor has its own"
    );
    let r = api(r#"{"client_key":"k","cost":2.0}"#).unwrap();
    assert_eq!(r.request.descriptors[0].hits_addend, Some(2));
    let r = api(r#"{"client_key":"k"}"#).unwrap();
    assert_eq!(r.request.descriptors[0].hits_addend, Some(1));
}

#[test]
fn refusals_name_the_field() {
    for (body, field) in [
        (r#"{}"#, "client_key"),
        (r#"{"client_key":""}"#, "client_key"),
        (r#"{"client_key":42}"#, "client_key"),
        (r#"{"client_key":"k","endpoint":""}"#, "endpoint"),
        (r#"{"client_key":"k","domain":""}"#, "domain"),
        (r#"{"client_key":"k","cost":-1}"#, "cost"),
        (r#"{"client_key":"k","cost":1.5}"#, "cost"),
        (r#"{"client_key":"k","cost":1000000001}"#, "cost"),
        (r#"{"client_key":"k","cost":1e300}"#, "cost"),
        (r#"{"client_key":"k","cost":"1"}"#, "cost"),
        (r#"{"client_key":"k","details":1}"#, "details"),
        (r#"{"client_key":"k","max_wait_ms":-1}"#, "max_wait_ms"),
        (r#"{"client_key":"k","max_wait_ms":0.5}"#, "max_wait_ms"),
        (r#"{"client_key":"k","max_wait_ms":60001}"#, "max_wait_ms"),
        (r#"{"client_key":"k","max_wait_ms":"5"}"#, "max_wait_ms"),
        (r#"{"client_key":"k","descriptors":{}}"#, "descriptors"),
        (
            r#"{"client_key":"k","descriptors":[{"bogus":1}]}"#,
            "descriptors",
        ),
        (r#"{"client_key":"k","clientkey":"x"}"#, "clientkey"),
    ] {
        assert_eq!(field_of(body), field, "{body}");
    }
    assert!(matches!(api("{"), Err(CheckError::Malformed(_))));
    assert_eq!(api("[1]"), Err(CheckError::NotObject));
    let e = api(r#"{"client_key":"k","cost":-3}"#).unwrap_err();
    assert_eq!(e.to_string(), "cost: must not be negative");
    let e = api(r#"{"client_key":"k","max_wait_ms":60001}"#).unwrap_err();
    assert_eq!(e.to_string(), "max_wait_ms: must be at most 60000");
}

#[test]
fn max_wait_ms_is_carried_as_the_wait_budget() {
    use std::time::Duration;
    let r = api(r#"{"client_key":"k","max_wait_ms":250}"#).unwrap();
    assert_eq!(r.request.max_wait, Duration::from_millis(250));
    let r = api(r#"{"client_key":"k","max_wait_ms":60000.0}"#).unwrap();
    assert_eq!(r.request.max_wait, Duration::from_secs(60));
    let r = api(r#"{"client_key":"k"}"#).unwrap();
    assert_eq!(r.request.max_wait, Duration::ZERO, "absent: policing");
}

#[test]
fn descriptors_are_decoded_under_the_caps() {
    let limits = Limits {
        max_descriptors: 3,
        ..Limits::default()
    };
    // Truncated past the cap: decoding stops before it reaches the end.
    let body = format!(
        r#"{{"client_key":"k","descriptors":[{}"#,
        ["{}"; 10_000].join(",")
    );
    let e = parse(body.as_bytes(), "api", &limits).unwrap_err();
    assert_eq!(
        e.to_string(),
        "descriptors: request has more than 3 descriptors; at most 3 are accepted (MAX_DESCRIPTORS_PER_REQUEST)"
    );
    // A nested list where a number belongs is refused by type, without being built.
    let deep = format!(
        r#"{{"client_key":"k","cost":{}1{}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    assert_eq!(field_of(&deep), "cost");
}

#[test]
fn priority_names_the_class_of_every_descriptor() {
    let r = api(r#"{"client_key":"k","endpoint":"/e","priority":"read",
             "descriptors":[{"entries":[{"key":"a","value":"b"}]}]}"#)
    .unwrap();
    let classes: Vec<_> = r
        .request
        .descriptors
        .iter()
        .map(|d| d.priority.as_deref())
        .collect();
    assert_eq!(classes, vec![Some("read"); 3]);
    let none = api(r#"{"client_key":"k"}"#).unwrap();
    assert_eq!(none.request.descriptors[0].priority, None);
    for bad in [
        r#"{"client_key":"k","priority":7}"#,
        r#"{"client_key":"k","priority":""}"#,
    ] {
        assert_eq!(field_of(bad), "priority", "{bad}");
    }
    let long = format!(r#"{{"client_key":"k","priority":"{}"}}"#, "x".repeat(65));
    assert_eq!(field_of(&long), "priority");
}
