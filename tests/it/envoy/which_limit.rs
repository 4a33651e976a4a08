//! Which limit fired, read from a real Envoy's access log: with `RESPONSE_DYNAMIC_METADATA=true`
//! Envoy keeps ratelimitd's metadata under `envoy.filters.http.ratelimit`, and an access log
//! format prints `overLimit`'s fields and the per-descriptor statuses. A request denied by the
//! second of its two descriptors logs that limit's name. ratelimitd runs in-process on the manual
//! clock (T0 = 1234 s, so an hour window resets in 2366 s).

use std::time::Duration;

use crate::support::envoy::{self, CustomEnvoy};
use crate::support::redis::free_port;
use crate::support::require;
use crate::support::{StoreKind, TestServer};
use ratelimitd_core::clock::Stopwatch;

const CONFIG: &str = "domain: web
descriptors:
  - key: remote_address
    rate_limit: {unit: minute, requests_per_unit: 10, name: per-address}
  - key: generic_key
    value: per_user
    descriptors:
      - key: user
        rate_limit: {unit: hour, requests_per_unit: 1, name: per-user}
";

/// One line per request: status, then `overLimit`'s name, key, descriptor and reset, then the
/// per-descriptor list (JSON); Envoy prints `-` for what the metadata does not hold.
const FORMAT: &str = "%RESPONSE_CODE% name=%DYNAMIC_METADATA(envoy.filters.http.ratelimit:overLimit:name)% key=%DYNAMIC_METADATA(envoy.filters.http.ratelimit:overLimit:key)% descriptor=%DYNAMIC_METADATA(envoy.filters.http.ratelimit:overLimit:descriptor)% reset=%DYNAMIC_METADATA(envoy.filters.http.ratelimit:overLimit:durationUntilReset)% all=%DYNAMIC_METADATA(envoy.filters.http.ratelimit:descriptors)%\\n";

/// A front listener on `port` with [`remote_address`] then [`generic_key=per_user`, user=<x-user>],
/// its access log in `log`, and a backend listener on `backend` answering 200.
fn envoy_yaml(port: u16, backend: u16, admin: u16, rl: u16, log: &str) -> String {
    let head = envoy::front_listener_head(admin, port);
    let filters = envoy::ratelimit_and_router("web", "1s", false);
    let tail = envoy::backend_and_clusters(backend, rl);
    format!(
        r#"{head}                            rate_limits:
                              - actions:
                                  - remote_address: {{}}
                              - actions:
                                  - generic_key: {{ descriptor_value: per_user }}
                                  - request_headers: {{ header_name: x-user, descriptor_key: user }}
                http_filters:
{filters}                access_log:
                  - name: envoy.access_loggers.file
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
                      path: "{log}"
                      log_format: {{ text_format_source: {{ inline_string: "{FORMAT}" }} }}
{tail}"#
    )
}

/// The access log's lines once it holds `n` (Envoy flushes it about every second), within 20 s.
async fn log_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let watch = Stopwatch::start();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n || watch.elapsed() > Duration::from_secs(20) {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn the_access_log_names_the_limit_that_denied() {
    require!(Envoy);
    let rl = TestServer::start_with_store(
        &[("web.yaml", CONFIG)],
        &[("RESPONSE_DYNAMIC_METADATA", "true")],
        StoreKind::Memory,
    )
    .await;
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("access.log");
    let (port, backend, admin) = (free_port(), free_port(), free_port());
    let yaml = envoy_yaml(
        port,
        backend,
        admin,
        rl.running().grpc_addr.port(),
        &log.display().to_string(),
    );
    let _envoy = CustomEnvoy::start(&yaml, admin).await;
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/");
    let alice = || http.get(&url).header("x-user", "alice").send();
    assert_eq!(alice().await.unwrap().status().as_u16(), 200);
    assert_eq!(alice().await.unwrap().status().as_u16(), 429);
    let lines = log_lines(&log, 2).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    // Admitted: nothing over, so no overLimit; the statuses are still listed.
    assert!(
        lines[0].starts_with("200 name=- key=- descriptor=- reset=- all=["),
        "{}",
        lines[0]
    );
    // Denied by [generic_key=per_user, user=alice], the second descriptor; the first had room.
    assert!(
        lines[1].starts_with(
            "429 name=per-user key=web.generic_key_per_user.user descriptor=1 reset=2366s all=["
        ),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains(r#""code":"OVER_LIMIT""#), "{}", lines[1]);
    assert!(
        lines[1].contains(r#""limitName":"per-address""#),
        "{}",
        lines[1]
    );
}
