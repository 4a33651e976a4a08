//! Calendar windows (`calendar: true`, `time_zone`) over real gRPC and `/check` with the manual
//! clock, on every store and on memcached: a month that ends at the real month end in Berlin, a
//! Paris day of 25 hours, `duration_until_reset` and `Retry-After` counting to the real boundary,
//! Redis and memcached keys that expire when the window ends, and `/rlconfig` naming the zone.

use std::time::Duration;

use serde_json::json;

use crate::support::memcached::Memcached;
use crate::support::redis::RedisServer;
use crate::support::*;

const CFG: &str = r#"
domain: cal
descriptors:
  - key: tenant
    rate_limit: {unit: month, requests_per_unit: 3, calendar: true, time_zone: Europe/Berlin}
  - key: client_key
    rate_limit: {unit: day, requests_per_unit: 1, calendar: true, time_zone: Europe/Paris}
"#;

/// 2026-02-28T22:00:00Z, 23:00 in Berlin: March begins there an hour later.
const FEB_28_22H: u64 = 1_772_316_000;
/// 2026-01-31T23:00:00Z: February 1st, 00:00 in Berlin (the February window's start).
const BERLIN_FEBRUARY: u64 = 1_769_900_400;
const HOUR: u64 = 3_600;
/// Berlin's March 2026: 31 days, less the hour clocks skip on the 29th.
const BERLIN_MARCH_SECS: u64 = 31 * 86_400 - HOUR;
/// 2026-10-25T00:30+02:00: half an hour into the Paris day on which clocks go back, which lasts
/// 25 hours and ends at 2026-10-26T00:00+01:00.
const PARIS_OCT_25_0030: u64 = 1_792_881_000;
const PARIS_OCT_26: u64 = 1_792_969_200;

on_every_store!(a_calendar_month_resets_at_the_real_month_end);
async fn a_calendar_month_resets_at_the_real_month_end(store: StoreKind) {
    let s = TestServer::start_with_store(&[("cal.yaml", CFG)], &[], store).await;
    s.set_time(FEB_28_22H);
    for remaining in [2, 1, 0] {
        let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MONTH"), remaining));
    }
    let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
    assert_eq!(st(&r, 0), (Code::OverLimit, lim(3, "MONTH"), 0));
    // Go's 30-day month would reset on 2026-03-06; the calendar month resets in an hour.
    assert_eq!(dur(&r, 0), Some(HOUR as i64));
    s.advance(Duration::from_secs(HOUR - 1));
    let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
    assert_eq!((st(&r, 0).0, dur(&r, 0)), (Code::OverLimit, Some(1)));
    s.advance(Duration::from_secs(1));
    let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MONTH"), 2));
    assert_eq!(dur(&r, 0), Some(BERLIN_MARCH_SECS as i64));
    s.shutdown().await;
}

on_every_store!(a_daylight_saving_day_lasts_25_hours_and_retry_after_follows_it);
async fn a_daylight_saving_day_lasts_25_hours_and_retry_after_follows_it(store: StoreKind) {
    let s = TestServer::start_with_store(&[("cal.yaml", CFG)], &[], store).await;
    s.set_time(PARIS_OCT_25_0030);
    let body = json!({"domain": "cal", "client_key": "u1"});
    assert_eq!(s.check(&body).await.status, 200);
    let denied = s.check(&body).await;
    let left = PARIS_OCT_26 - PARIS_OCT_25_0030;
    assert_eq!(left, 24 * HOUR + HOUR / 2);
    assert_eq!(
        (denied.status, denied.retry_after()),
        (429, Some(left.to_string()))
    );
    // 24 hours later an epoch day would have reset; this day still has half an hour to run.
    s.advance(Duration::from_secs(24 * HOUR));
    let denied = s.check(&body).await;
    assert_eq!(
        (denied.status, denied.retry_after()),
        (429, Some("1800".into()))
    );
    s.advance(Duration::from_secs(HOUR / 2));
    assert_eq!(s.check(&body).await.status, 200);
    s.shutdown().await;
}

/// The Redis key of a calendar window expires when the window ends (Go's month key lives 30
/// days from its first hit); the default key format names the calendar.
#[tokio::test]
async fn redis_keys_live_until_the_calendar_window_ends() {
    require!(Redis);
    let r = RedisServer::start();
    // Without the expiration jitter (up to 300 s by default) the TTL is exactly the time left.
    let no_jitter = ("EXPIRATION_JITTER_MAX_SECONDS", "0");
    let env = [
        ("CACHE_KEY_FORMAT", "go"),
        ("CACHE_KEY_PREFIX", "p:"),
        no_jitter,
    ];
    let s = TestServer::start_on(&[("cal.yaml", CFG)], &env, Some(&r)).await;
    s.set_time(FEB_28_22H);
    s.rl("cal", &[&[("tenant", "acme")]]).await;
    let key = format!("p:cal_tenant_acme_{BERLIN_FEBRUARY}");
    assert_eq!(r.cli(&["GET", &key]), "1");
    let ttl: u64 = r.cli(&["TTL", &key]).parse().unwrap();
    assert!((HOUR - 5..=HOUR).contains(&ttl), "TTL {ttl}");
    s.shutdown().await;
    let env = [("CACHE_KEY_PREFIX", "q:"), no_jitter];
    let s = TestServer::start_on(&[("cal.yaml", CFG)], &env, Some(&r)).await;
    s.set_time(FEB_28_22H);
    s.rl("cal", &[&[("tenant", "acme")]]).await;
    let key = format!("q:{{3:cal|6:tenant=4:acme}}:fw:month@Europe/Berlin:{BERLIN_FEBRUARY}");
    assert_eq!(r.cli(&["GET", &key]), "1");
    let ttl: u64 = r.cli(&["TTL", &key]).parse().unwrap();
    assert!((HOUR - 5..=HOUR).contains(&ttl), "TTL {ttl}");
    s.shutdown().await;
}

/// memcached counts a calendar window under Go's key with the window's start, and the key
/// expires when the window ends.
#[tokio::test]
async fn memcached_counts_calendar_windows_until_their_end() {
    require!(Memcached);
    let m = Memcached::start();
    let env = m.env(&[
        ("CACHE_KEY_PREFIX", "m_"),
        ("EXPIRATION_JITTER_MAX_SECONDS", "0"),
    ]);
    let s = TestServer::start(&[("cal.yaml", CFG)], &env).await;
    s.set_time(FEB_28_22H);
    for remaining in [2, 1, 0] {
        let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
        assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MONTH"), remaining));
    }
    let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
    assert_eq!(
        (st(&r, 0).0, dur(&r, 0)),
        (Code::OverLimit, Some(HOUR as i64))
    );
    let key = format!("m_cal_tenant_acme_{BERLIN_FEBRUARY}");
    assert_eq!(m.get(&key).as_deref(), Some("4"));
    // The meta get's `t` flag answers the seconds left to live: `HD t3600`.
    let meta = m.command(&format!("mg {key} t\r\n")).unwrap();
    let ttl: u64 = meta.trim_start_matches("HD t").parse().unwrap();
    assert!((HOUR - 5..=HOUR).contains(&ttl), "{meta}");
    s.advance(Duration::from_secs(HOUR));
    let r = s.rl("cal", &[&[("tenant", "acme")]]).await;
    assert_eq!(st(&r, 0), (Code::Ok, lim(3, "MONTH"), 2));
    s.shutdown().await;
}

#[tokio::test]
async fn rlconfig_names_the_calendar_zone() {
    let s = TestServer::start(&[("cal.yaml", CFG)], &[]).await;
    let r = s.http.get(s.debug_url("/rlconfig")).send().await.unwrap();
    let text = r.text().await.unwrap();
    assert!(
        text.contains("cal.tenant: unit=MONTH requests_per_unit=3, shadow_mode: false, quota_mode: false, calendar: Europe/Berlin\n"),
        "{text}"
    );
    assert!(text.contains("calendar: Europe/Paris\n"), "{text}");
    s.shutdown().await;
}

/// `CALENDAR_TIME_ZONE` is the zone of calendar windows that name none.
#[tokio::test]
async fn the_service_time_zone_applies_to_calendars_that_name_none() {
    let cfg = "domain: cal\ndescriptors:\n  - {key: u, rate_limit: {unit: day, requests_per_unit: 1, calendar: true}}\n";
    let env = [("CALENDAR_TIME_ZONE", "Europe/Paris")];
    let s = TestServer::start(&[("cal.yaml", cfg)], &env).await;
    s.set_time(PARIS_OCT_25_0030);
    assert_eq!(st(&s.rl("cal", &[&[("u", "x")]]).await, 0).0, Code::Ok);
    let r = s.rl("cal", &[&[("u", "x")]]).await;
    let left = (PARIS_OCT_26 - PARIS_OCT_25_0030) as i64;
    assert_eq!((st(&r, 0).0, dur(&r, 0)), (Code::OverLimit, Some(left)));
    s.shutdown().await;
}
