//! The Kubernetes and Istio recipes in `examples/k8s/`: every manifest parses, has the expected
//! kinds, the ConfigMap's ratelimitd config compiles and is mounted where the `RUNTIME_*` settings
//! look, and each `EnvoyFilter`'s filter and `rate_limits` patches are accepted by a real Envoy
//! (`--mode validate` on a bootstrap built around them) and use the ConfigMap's domain; the
//! Deployment runs the repository's `Dockerfile` image as that image expects (its user, ports,
//! configuration directory and data directory).

use std::collections::BTreeSet;
use std::path::PathBuf;

use crate::support::require;
use ratelimitd_core::config::{CompileOptions, ConfigFile, compile};
use serde::Deserialize;
use serde_yaml::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/k8s")
}

/// Every document of every manifest, as `(file name, document)`.
fn manifests() -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for de in serde_yaml::Deserializer::from_str(&text) {
            let doc = Value::deserialize(de).unwrap_or_else(|e| panic!("{name}: {e}"));
            docs.push((name.clone(), doc));
        }
    }
    docs
}

fn of_kind(kind: &str) -> Vec<(String, Value)> {
    manifests()
        .into_iter()
        .filter(|(_, d)| d["kind"] == kind)
        .collect()
}

/// The ratelimitd Deployment of the recipe.
fn deployment() -> Value {
    of_kind("Deployment")
        .into_iter()
        .find(|(_, d)| d["metadata"]["name"] == "ratelimitd")
        .expect("a Deployment named ratelimitd")
        .1
}

/// The value of `name` in a container's env (from [`env_of`]); panics when it is not set.
fn env_var<'a>(env: &'a [(String, String)], name: &str) -> &'a str {
    env.iter()
        .find(|(n, _)| n == name)
        .map_or_else(|| panic!("{name} not set"), |(_, v)| v.as_str())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// `name=value` of a container's env (`secret:<name>/<key>` for a value from a Secret).
fn env_of(container: &Value) -> Vec<(String, String)> {
    container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let secret = &e["valueFrom"]["secretKeyRef"];
            let value = match secret.is_mapping() {
                true => format!("secret:{}/{}", s(&secret["name"]), s(&secret["key"])),
                false => s(&e["value"]).to_string(),
            };
            (s(&e["name"]).to_string(), value)
        })
        .collect()
}

#[test]
fn every_manifest_parses_with_the_expected_kinds() {
    let docs = manifests();
    let mut kinds = BTreeSet::new();
    for (file, d) in &docs {
        assert!(d["apiVersion"].is_string(), "{file}: apiVersion");
        assert!(d["metadata"]["name"].is_string(), "{file}: metadata.name");
        kinds.insert(s(&d["kind"]).to_string());
    }
    let want: BTreeSet<String> = ["ConfigMap", "Deployment", "Service", "EnvoyFilter"]
        .map(String::from)
        .into();
    assert_eq!(kinds, want);
    // ratelimitd and redis each have a Deployment and a Service selecting its pods.
    for app in ["ratelimitd", "redis"] {
        let dep = docs
            .iter()
            .find(|(_, d)| d["kind"] == "Deployment" && d["metadata"]["name"] == app);
        let svc = docs
            .iter()
            .find(|(_, d)| d["kind"] == "Service" && d["metadata"]["name"] == app);
        let (dep, svc) = (&dep.expect(app).1, &svc.expect(app).1);
        assert_eq!(svc["spec"]["selector"]["app"], app);
        assert_eq!(dep["spec"]["template"]["metadata"]["labels"]["app"], app);
        assert_eq!(dep["spec"]["selector"]["matchLabels"]["app"], app);
    }
    assert_eq!(of_kind("EnvoyFilter").len(), 2, "gateway and sidecar");
}

/// The ConfigMap's files as ratelimitd would read them.
fn configmap_files() -> Vec<ConfigFile> {
    let cms = of_kind("ConfigMap");
    assert_eq!(cms.len(), 1);
    cms[0].1["data"]
        .as_mapping()
        .unwrap()
        .iter()
        .map(|(k, v)| ConfigFile {
            name: s(k).to_string(),
            contents: s(v).to_string(),
        })
        .collect()
}

#[test]
fn configmap_compiles_and_is_mounted_where_runtime_settings_look() {
    compile(&configmap_files(), &CompileOptions::default()).expect("config compiles");
    let dep = deployment();
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let env = env_of(c);
    let get = |k: &str| env_var(&env, k);
    // README "Running with a Kubernetes ConfigMap".
    assert_eq!(get("RUNTIME_IGNOREDOTFILES"), "true");
    assert_eq!(get("RUNTIME_WATCH_ROOT"), "false");
    assert_eq!(get("REDIS_SOCKET_TYPE"), "tcp");
    assert_eq!(get("REDIS_URL"), "redis:6379");
    let path = format!(
        "{}/{}/{}",
        get("RUNTIME_ROOT"),
        get("RUNTIME_SUBDIRECTORY"),
        get("RUNTIME_APPDIRECTORY")
    );
    let mount = &c["volumeMounts"][0];
    assert_eq!(s(&mount["mountPath"]), path);
    assert!(
        mount.get("subPath").is_none(),
        "subPath mounts never update"
    );
    let volume = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert_eq!(volume["configMap"]["name"], "ratelimit-config");
}

#[test]
fn envoy_filters_are_accepted_by_envoy_and_use_the_configmap_domain() {
    require!(Envoy);
    let files = configmap_files();
    let cm: Value = serde_yaml::from_str(&files[0].contents).unwrap();
    let domain = s(&cm["domain"]).to_string();
    for (file, ef) in of_kind("EnvoyFilter") {
        let patches = ef["spec"]["configPatches"].as_sequence().unwrap();
        let filter = &patches
            .iter()
            .find(|p| p["applyTo"] == "HTTP_FILTER")
            .unwrap_or_else(|| panic!("{file}: HTTP_FILTER patch"))["patch"]["value"];
        let vhost = &patches
            .iter()
            .find(|p| p["applyTo"] == "VIRTUAL_HOST")
            .unwrap_or_else(|| panic!("{file}: VIRTUAL_HOST patch"))["patch"]["value"];
        let tc = &filter["typed_config"];
        assert_eq!(s(&tc["domain"]), domain, "{file}");
        let cluster = s(&tc["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"]);
        assert!(
            cluster.starts_with("outbound|8081||ratelimitd."),
            "{file}: {cluster}"
        );
        // A minimal bootstrap around the patches: a listener with the filter before the router,
        // a virtual host with the rate_limits, and the cluster Istio would have generated.
        let bootstrap = serde_json::json!({
            "static_resources": {
                "listeners": [{
                    "name": "l",
                    "address": {"socket_address": {"address": "127.0.0.1", "port_value": 0}},
                    "filter_chains": [{"filters": [{
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": {
                            "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                            "stat_prefix": "l",
                            "route_config": {"virtual_hosts": [{
                                "name": "v",
                                "domains": ["*"],
                                "rate_limits": vhost["rate_limits"],
                                "routes": [{"match": {"prefix": "/"}, "route": {"cluster": cluster}}]
                            }]},
                            "http_filters": [filter, {
                                "name": "envoy.filters.http.router",
                                "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}
                            }]
                        }
                    }]}]
                }],
                "clusters": [{
                    "name": cluster,
                    "type": "STATIC",
                    "typed_extension_protocol_options": {
                        "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                            "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                            "explicit_http_config": {"http2_protocol_options": {}}
                        }
                    },
                    "load_assignment": {"cluster_name": cluster, "endpoints": [{"lb_endpoints": [{"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 8081}}}}]}]}
                }]
            }
        });
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("bootstrap.json");
        std::fs::write(&path, serde_json::to_string_pretty(&bootstrap).unwrap()).unwrap();
        let (ok, text) = crate::support::envoy::validate(&path);
        assert!(ok, "{file}: {text}");
    }
}

#[test]
fn the_deployment_runs_the_dockerfile_image_as_it_expects() {
    let stage = crate::support::dockerfile::runtime_stage();
    let image_env = crate::support::dockerfile::env(&stage);
    let image = |k: &str| {
        let found = image_env.iter().find(|(n, _)| n == k);
        found.map_or_else(|| panic!("the image sets no {k}"), |(_, v)| v.clone())
    };
    let dep = deployment();
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let env = env_of(c);
    // Where the manifest restates an image setting, it agrees with it.
    for (k, v) in &env {
        if let Some((_, iv)) = image_env.iter().find(|(n, _)| n == k) {
            assert_eq!(v, iv, "{k}: the manifest and the image disagree");
        }
    }
    let mounts = c["volumeMounts"].as_sequence().unwrap();
    let mounted = |path: &str| mounts.iter().any(|m| s(&m["mountPath"]) == path);
    let config = format!(
        "{}/{}/{}",
        image("RUNTIME_ROOT"),
        image("RUNTIME_SUBDIRECTORY"),
        image("RUNTIME_APPDIRECTORY")
    );
    assert!(mounted(&config), "no ConfigMap at the image's {config}");
    // The root filesystem is read-only: the data directory must be a volume.
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert!(mounted(&image("RATELIMITD_DATA_DIR")), "no data volume");
    // The image's numeric user, which runAsNonRoot can check.
    let user = crate::support::dockerfile::args(&stage, "USER");
    let (uid, gid) = user[0].split_once(':').expect("USER uid:gid");
    let sc = &pod["securityContext"];
    assert_eq!(sc["runAsNonRoot"], true);
    assert_eq!(sc["runAsUser"].as_u64().unwrap().to_string(), uid);
    assert_eq!(sc["runAsGroup"].as_u64().unwrap().to_string(), gid);
    // Every port the image exposes is a container port; the only other is Prometheus's,
    // which is on because the manifest turns it on.
    let exposed: BTreeSet<u64> = crate::support::dockerfile::args(&stage, "EXPOSE")
        .iter()
        .flat_map(|a| a.split_whitespace().map(|p| p.parse::<u64>().unwrap()))
        .collect();
    let ports: BTreeSet<u64> = c["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["containerPort"].as_u64().unwrap())
        .collect();
    assert!(env.contains(&("USE_PROMETHEUS".into(), "true".into())));
    let mut want = exposed.clone();
    want.insert(9090);
    assert_eq!(ports, want);
    // Ready when /readyz answers; the image's HEALTHCHECK asks liveness, /livez, as the pod's
    // liveness probe does.
    assert_eq!(s(&c["readinessProbe"]["httpGet"]["path"]), "/readyz");
    let health = crate::support::dockerfile::args(&stage, "HEALTHCHECK");
    assert!(health[0].contains("/livez"), "{health:?}");
}

/// Seconds of a Go-style duration setting such as `5s` (whole seconds only).
fn secs(v: &str) -> u64 {
    v.strip_suffix('s')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{v}: expected whole seconds such as 5s"))
}

#[test]
fn the_deployment_survives_redis_outages_and_rolling_updates_and_keeps_policy_shared() {
    let dep = deployment();
    let pod = &dep["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let env = env_of(c);
    let get = |k: &str| env_var(&env, k);
    let port_of = |name: &Value| {
        c["ports"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|p| p["name"] == *name)
            .unwrap_or_else(|| panic!("no port {name:?}"))["containerPort"]
            .as_u64()
            .unwrap()
    };
    // Liveness never depends on Redis: /livez on the HTTP port (8080).
    let live = &c["livenessProbe"]["httpGet"];
    assert_eq!(s(&live["path"]), "/livez");
    assert_eq!(port_of(&live["port"]), 8080);
    // Readiness may: /readyz on the same port.
    let ready = &c["readinessProbe"]["httpGet"];
    assert_eq!(s(&ready["path"]), "/readyz");
    assert_eq!(port_of(&ready["port"]), 8080);
    // SIGTERM: unready at once, still serving for SHUTDOWN_DELAY, then a drain of at most
    // DRAIN_TIMEOUT, all inside the grace period before the kubelet's SIGKILL; and the delay
    // outlasts the time readiness takes to notice (one probe period times its threshold).
    let (delay, drain) = (secs(get("SHUTDOWN_DELAY")), secs(get("DRAIN_TIMEOUT")));
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        delay > 0 && delay + drain < grace,
        "{delay} + {drain} < {grace}"
    );
    let probe = &c["readinessProbe"];
    let noticed =
        probe["periodSeconds"].as_u64().unwrap() * probe["failureThreshold"].as_u64().unwrap();
    assert!(
        noticed < delay,
        "readiness noticed in {noticed}s, before the {delay}s delay ends"
    );
    let rolling = &dep["spec"]["strategy"]["rollingUpdate"];
    assert_eq!(rolling["maxUnavailable"].as_u64(), Some(0));
    // One policy database for every replica, and the admin token, both from the Secret.
    assert_eq!(get("POLICY_DB_URL"), "secret:ratelimitd/policy-db-url");
    assert_eq!(get("ADMIN_TOKEN"), "secret:ratelimitd/admin-token");
    // Metrics exported: Prometheus on, and the scrape annotations point at its port.
    assert_eq!(get("USE_PROMETHEUS"), "true");
    let notes = &dep["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(notes["prometheus.io/scrape"], "true");
    let scrape: u64 = s(&notes["prometheus.io/port"]).parse().unwrap();
    assert_eq!(port_of(&"metrics".into()), scrape);
}
