//! `calendar` and `time_zone`: an accepted calendar reaches the limit's window, a Go config keeps
//! its epoch window, and every misuse is refused at its file and YAML path with a hint.

use super::validate::{errors, run};
use crate::algorithm::calendar::CalendarUnit;

fn one(rate_limit: &str) -> String {
    format!("domain: d\ndescriptors:\n  - {{key: a, rate_limit: {{{rate_limit}}}}}\n")
}

/// `(file, path, message with hint)` of every error of `rate_limit` in `f.yaml`.
fn errs(rate_limit: &str) -> Vec<(String, String, String)> {
    errors(&[("f.yaml", &one(rate_limit))], false)
}

fn at(field: &str) -> String {
    format!("descriptors[0].rate_limit.{field}")
}

#[test]
fn a_calendar_month_in_a_zone_reaches_the_window() {
    let yaml =
        one("unit: month, requests_per_unit: 1000, calendar: true, time_zone: Europe/Berlin");
    let cfg = run(&[("f.yaml", &yaml)], false).unwrap();
    let window = cfg.limits()[0].window().unwrap();
    let calendar = window.calendar().expect("a calendar window");
    assert_eq!(calendar.unit(), CalendarUnit::Month);
    assert_eq!(calendar.zone().name(), "Europe/Berlin");
    assert_eq!(calendar.to_string(), "month@Europe/Berlin");
}

#[test]
fn without_a_zone_the_calendar_is_utc_and_without_calendar_the_window_is_gos() {
    let cfg = run(
        &[(
            "f.yaml",
            &one("unit: week, requests_per_unit: 1, calendar: true, unit_multiplier: 2"),
        )],
        false,
    )
    .unwrap();
    let window = cfg.limits()[0].window().unwrap();
    assert_eq!(window.calendar().unwrap().to_string(), "2week@UTC");
    for go in [
        "unit: month, requests_per_unit: 1",
        "unit: month, requests_per_unit: 1, calendar: false",
    ] {
        let cfg = run(&[("f.yaml", &one(go))], false).unwrap();
        let window = cfg.limits()[0].window().unwrap();
        assert_eq!((window.calendar(), window.secs()), (None, 2_592_000));
    }
}

#[test]
fn an_unknown_zone_is_refused_with_the_nearest_name() {
    assert_eq!(
        errs("unit: day, requests_per_unit: 1, calendar: true, time_zone: Europe/Pari"),
        [(
            "f.yaml".into(),
            at("time_zone"),
            "unknown time zone 'Europe/Pari' (did you mean `Europe/Paris`?)".into()
        )]
    );
    let far = errs("unit: day, requests_per_unit: 1, calendar: true, time_zone: Moon/Base");
    assert_eq!(far.len(), 1);
    assert_eq!(
        far[0].2,
        "unknown time zone 'Moon/Base' (an IANA time zone name such as Europe/Paris, America/New_York or UTC)"
    );
}

#[test]
fn a_calendar_is_refused_where_it_is_not_defined() {
    let minute = errs("unit: minute, requests_per_unit: 1, calendar: true");
    assert_eq!(minute.len(), 1);
    assert_eq!(minute[0].1, at("calendar"));
    assert!(
        minute[0]
            .2
            .starts_with("calendar applies to the units day, week, month and year, not minute")
    );
    for algorithm in [
        "sliding_window",
        "sliding_log",
        "token_bucket",
        "leaky_bucket",
        "concurrency",
    ] {
        let e = errs(&format!(
            "unit: day, requests_per_unit: 1, calendar: true, algorithm: {algorithm}"
        ));
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].1, at("calendar"));
        assert!(
            e[0].2.starts_with(&format!(
                "calendar only applies to fixed_window, not {algorithm} ("
            )),
            "{e:?}"
        );
    }
    let unlimited = errs("unlimited: true, calendar: true");
    assert_eq!(unlimited[0].2, "should not specify calendar when unlimited");
    let stray = errs("unit: day, requests_per_unit: 1, time_zone: UTC");
    assert_eq!(
        stray,
        [(
            "f.yaml".into(),
            at("time_zone"),
            "time_zone only applies to a calendar window (add `calendar: true`, or remove time_zone)".into()
        )]
    );
    let typed = errs("unit: day, requests_per_unit: 1, calendar: monthly");
    assert_eq!(
        (typed.len(), typed[0].1.as_str()),
        (1, at("calendar").as_str())
    );
}

#[test]
fn the_service_zone_applies_to_calendars_that_name_none() {
    use crate::config::validate::{CompileOptions, ConfigFile, compile};
    let yaml = "domain: d\ndescriptors:\n  - {key: a, rate_limit: {unit: day, requests_per_unit: 1, calendar: true}}\n  - {key: b, rate_limit: {unit: day, requests_per_unit: 1, calendar: true, time_zone: Asia/Tokyo}}\n  - {key: c, rate_limit: {unit: day, requests_per_unit: 1}}\n";
    let files = [ConfigFile {
        name: "f.yaml".into(),
        contents: yaml.into(),
    }];
    let options = CompileOptions {
        calendar_time_zone: crate::algorithm::calendar::Zone::get("Europe/Paris"),
        ..CompileOptions::default()
    };
    let cfg = compile(&files, &options).unwrap();
    let zones: Vec<Option<&str>> = (cfg.limits().iter())
        .map(|l| l.window().unwrap().calendar().map(|c| c.zone().name()))
        .collect();
    assert_eq!(zones, [Some("Europe/Paris"), Some("Asia/Tokyo"), None]);
}
