//! Expressive matching behind a real Envoy: a path limit from the `:path` header matched by
//! `value_regex`, and the per-request limit Envoy Gateway sends (`limit.fromMetadata` in a
//! `BackendTrafficPolicy`, Envoy's route-level `RateLimit.limit` from dynamic metadata), here set
//! at the edge by a Lua filter from its own table, capped by `max_request_limit`; a client header
//! asking for a larger limit changes nothing. ratelimitd runs in-process on the manual clock.

use crate::support::envoy::{self, CustomEnvoy};
use crate::support::redis::free_port;
use crate::support::require;
use crate::support::{StoreKind, TestServer};

/// Order paths 2 a minute per path; a tenant's own limit at most 3 a minute.
const CONFIG: &str = r#"
domain: edge
max_request_limit: {unit: minute, requests_per_unit: 3}
descriptors:
  - key: path
    value_regex: "/users/[0-9]+/orders"
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100}
"#;

/// The edge's Lua filter: the tenant's limit from its own table (what an `ext_proc` or an auth
/// filter would write in a real gateway) into `envoy.lb` / `tenant_rate_limit`, the metadata
/// Envoy Gateway's `fromMetadata` names. A limit header sent by the client is dropped unread.
const LUA: &str = r#"
          function envoy_on_request(h)
            h:headers():remove("x-tenant-limit")
            local limits = {acme = 2, big = 1000}
            local tenant = h:headers():get("x-tenant")
            local rpu = limits[tenant]
            if rpu ~= nil then
              h:streamInfo():dynamicMetadata():set("envoy.lb", "tenant_rate_limit",
                {requests_per_unit = rpu, unit = "MINUTE"})
            end
          end
"#;

fn envoy_yaml(port: u16, backend: u16, admin: u16, rl: u16) -> String {
    // Inside the block scalar below: indented past its key (Lua does not mind the indentation).
    let lua: String = LUA
        .trim()
        .lines()
        .map(|l| format!("{:26}{}\n", "", l.trim()))
        .collect();
    let head = envoy::front_listener_head(admin, port);
    let filters = envoy::ratelimit_and_router("edge", "1s", true);
    let tail = envoy::backend_and_clusters(backend, rl);
    format!(
        r#"{head}                            rate_limits:
                              - actions:
                                  - request_headers: {{ header_name: ":path", descriptor_key: path }}
                              - actions:
                                  - request_headers: {{ header_name: x-tenant, descriptor_key: tenant }}
                                limit:
                                  dynamic_metadata:
                                    metadata_key: {{ key: envoy.lb, path: [{{ key: tenant_rate_limit }}] }}
                http_filters:
                  - name: envoy.filters.http.lua
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua
                      default_source_code:
                        inline_string: |
{lua}{filters}{tail}"#
    )
}

async fn start() -> (TestServer, CustomEnvoy, String) {
    let rl = TestServer::start_with_store(&[("edge.yaml", CONFIG)], &[], StoreKind::Memory).await;
    rl.set_time(crate::support::T0);
    let (port, backend, admin) = (free_port(), free_port(), free_port());
    let yaml = envoy_yaml(port, backend, admin, rl.running().grpc_addr.port());
    let envoy = CustomEnvoy::start(&yaml, admin).await;
    (rl, envoy, format!("http://127.0.0.1:{port}"))
}

/// The statuses of `n` requests to `path`, with `headers`.
async fn statuses(base: &str, path: &str, headers: &[(&str, &str)], n: usize) -> Vec<u16> {
    let http = reqwest::Client::new();
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut req = http.get(format!("{base}{path}"));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        out.push(req.send().await.unwrap().status().as_u16());
    }
    out
}

#[tokio::test]
async fn a_path_pattern_limits_each_matching_path() {
    require!(Envoy);
    let (_rl, _envoy, base) = start().await;
    // Each order path: 2 a minute of its own.
    assert_eq!(
        statuses(&base, "/users/42/orders", &[], 3).await,
        [200, 200, 429]
    );
    assert_eq!(
        statuses(&base, "/users/7/orders", &[], 3).await,
        [200, 200, 429]
    );
    // The pattern matches the whole path: these match nothing and are not limited.
    assert_eq!(
        statuses(&base, "/users/abc/orders", &[], 3).await,
        [200, 200, 200]
    );
    assert_eq!(
        statuses(&base, "/users/42/orders/1", &[], 3).await,
        [200, 200, 200]
    );
}

#[tokio::test]
async fn the_edge_sets_the_limit_capped_and_the_client_cannot() {
    require!(Envoy);
    let (_rl, _envoy, base) = start().await;
    // acme's limit from the edge: 2 a minute, under the cap.
    let acme = [("x-tenant", "acme")];
    assert_eq!(statuses(&base, "/", &acme, 3).await, [200, 200, 429]);
    // big asks 1000 a minute through the edge: counted at the cap, 3.
    let big = [("x-tenant", "big")];
    assert_eq!(statuses(&base, "/", &big, 4).await, [200, 200, 200, 429]);
    // A client asking for a larger limit by header: the edge drops it, and acme stays at 2.
    let greedy = [("x-tenant", "acme"), ("x-tenant-limit", "1000000")];
    assert_eq!(statuses(&base, "/", &greedy, 1).await, [429]);
    let fresh = [("x-tenant", "initech"), ("x-tenant-limit", "1")];
    // No limit from the edge for initech: the configured 100 a minute, not the client's 1.
    assert_eq!(statuses(&base, "/", &fresh, 3).await, [200, 200, 200]);
}
