//! The Envoy Gateway recipe in `examples/envoy-gateway/`: the manifests parse with the expected
//! kinds, the `EnvoyGateway` configuration inside the ConfigMap points the rate limit Deployment at
//! a ratelimitd image and command, and ratelimitd's settings accept the environment Envoy Gateway
//! gives that Deployment's container. (No Kubernetes cluster runs here: see README, Envoy Gateway.)

use std::path::PathBuf;

use ratelimitd::Settings;
use serde::Deserialize;
use serde_yaml::Value;

fn docs(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("examples/envoy-gateway")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|de| Value::deserialize(de).unwrap_or_else(|e| panic!("{file}: {e}")))
        .collect()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

#[test]
fn the_envoy_gateway_config_runs_ratelimitd_as_its_rate_limit_service() {
    let cm = &docs("envoy-gateway.yaml")[0];
    assert_eq!(s(&cm["kind"]), "ConfigMap");
    assert_eq!(s(&cm["metadata"]["namespace"]), "envoy-gateway-system");
    let eg: Value = serde_yaml::from_str(s(&cm["data"]["envoy-gateway.yaml"])).unwrap();
    assert_eq!(s(&eg["kind"]), "EnvoyGateway");
    let deployment = &eg["provider"]["kubernetes"]["rateLimitDeployment"];
    assert!(s(&deployment["container"]["image"]).starts_with("ratelimitd"));
    assert_eq!(s(&deployment["patch"]["type"]), "StrategicMerge");
    let containers = &deployment["patch"]["value"]["spec"]["template"]["spec"]["containers"];
    // Envoy Gateway names the container envoy-ratelimit; the patch must name it to merge.
    assert_eq!(s(&containers[0]["name"]), "envoy-ratelimit");
    assert!(s(&containers[0]["command"][0]).ends_with("/ratelimitd"));
    assert_eq!(s(&eg["rateLimit"]["backend"]["type"]), "Redis");
    assert!(s(&eg["rateLimit"]["backend"]["redis"]["url"]).ends_with(":6379"));
}

#[test]
fn the_backend_traffic_policy_is_a_global_limit_on_a_route() {
    let p = &docs("backend-traffic-policy.yaml")[0];
    assert_eq!(s(&p["kind"]), "BackendTrafficPolicy");
    assert_eq!(s(&p["spec"]["targetRefs"][0]["kind"]), "HTTPRoute");
    assert_eq!(s(&p["spec"]["rateLimit"]["type"]), "Global");
    let rule = &p["spec"]["rateLimit"]["global"]["rules"][0];
    assert_eq!(rule["limit"]["requests"].as_u64(), Some(3));
    assert_eq!(s(&rule["limit"]["unit"]), "Minute");
}

/// The container environment of Envoy Gateway's rate limit Deployment (its generated manifest,
/// Prometheus variant), with the mounted certificate paths replaced by files of this test.
#[test]
fn ratelimitd_accepts_the_environment_envoy_gateway_sets() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, "").unwrap();
        p.display().to_string()
    };
    let (crt, key, ca) = (file("tls.crt"), file("tls.key"), file("ca.crt"));
    let env: Vec<(String, String)> = [
        ("RUNTIME_ROOT", "/data"),
        ("RUNTIME_SUBDIRECTORY", "ratelimit"),
        ("RUNTIME_IGNOREDOTFILES", "true"),
        ("RUNTIME_WATCH_ROOT", "false"),
        ("LOG_LEVEL", "info"),
        ("USE_STATSD", "false"),
        ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
        ("CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"),
        ("CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"),
        ("GRPC_SERVER_USE_TLS", "true"),
        ("GRPC_SERVER_TLS_CERT", &crt),
        ("GRPC_SERVER_TLS_KEY", &key),
        ("GRPC_SERVER_TLS_CA_CERT", &ca),
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", &crt),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", &key),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", &ca),
        ("FORCE_START_WITHOUT_INITIAL_CONFIG", "true"),
        ("REDIS_SOCKET_TYPE", "tcp"),
        ("REDIS_URL", "redis.redis.svc:6379"),
        ("USE_PROMETHEUS", "true"),
        ("PROMETHEUS_ADDR", ":19001"),
        ("PROMETHEUS_MAPPER_YAML", "/etc/statsd-exporter/conf.yaml"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let settings = Settings::from_env(env).expect("Envoy Gateway's environment is accepted");
    let tls = settings
        .grpc
        .tls
        .as_ref()
        .expect("gRPC over TLS, as Envoy expects");
    assert_eq!(tls.cert.display().to_string(), crt);
    assert!(settings.force_start_without_initial_config);
    assert_eq!(settings.obs.prometheus_addr, ":19001");
    assert_eq!(
        settings.grpc_port, 8081,
        "the port Envoy Gateway's Service targets"
    );
    assert_eq!(settings.port, 8080, "where its probes ask /healthcheck");
}
