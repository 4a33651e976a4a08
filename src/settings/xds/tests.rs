//! `CONFIG_TYPE` and the xDS client settings: Go defaults, Go separators, errors naming the variable.

use crate::settings::Settings;

use super::*;

fn load(vars: &[(&str, &str)]) -> Result<Settings, crate::settings::SettingsError> {
    Settings::from_env(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

#[test]
fn defaults_are_go_defaults() {
    let s = load(&[]).unwrap();
    assert_eq!(s.config_type, ConfigType::File);
    let x = s.xds;
    assert_eq!(x.node_id, "default");
    assert_eq!(x.server_url, "localhost:18000");
    assert_eq!(x.connect_retry_interval, Duration::from_secs(3));
    assert_eq!(x.backoff.initial, Duration::from_secs(10));
    assert_eq!(x.backoff.max, Duration::from_secs(60));
    assert_eq!(x.backoff.factor, 0.5);
    assert!(x.backoff.jitter && x.tls.is_none() && x.max_msg_size.is_none());
}

#[test]
fn config_type_is_file_or_xds_and_anything_else_names_the_go_text() {
    let s = load(&[("CONFIG_TYPE", "GRPC_XDS_SOTW")]).unwrap();
    assert_eq!(s.config_type, ConfigType::GrpcXdsSotw);
    let e = load(&[("CONFIG_TYPE", "BOGUS")]).unwrap_err();
    assert_eq!(e.name, "CONFIG_TYPE");
    assert!(
        e.to_string()
            .contains("Invalid setting for ConfigType: BOGUS"),
        "{e}"
    );
    assert!(load(&[("CONFIG_TYPE", "file")]).is_err());
}

#[test]
fn metadata_and_headers_use_the_go_separators() {
    let s = load(&[
        ("CONFIG_GRPC_XDS_NODE_METADATA", "a=1,junk,b=x=y"),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "X-Token:abc,k:v",
        ),
    ])
    .unwrap();
    let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(s.xds.node_metadata, pairs(&[("a", "1"), ("b", "x=y")]));
    assert_eq!(
        s.xds.additional_headers,
        pairs(&[("x-token", "abc"), ("k", "v")])
    );
    let e = load(&[("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "novalue")]).unwrap_err();
    assert_eq!(e.name, "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS");
}

#[test]
fn tls_needs_its_ca_and_a_complete_client_pair() {
    let e = load(&[("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true")]).unwrap_err();
    assert_eq!(e.name, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT");
    let e = load(&[
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "ca.pem"),
        ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "c.pem"),
    ])
    .unwrap_err();
    assert_eq!(e.name, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY");
    let s = load(&[
        ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"),
        ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "ca.pem"),
        ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.example"),
    ])
    .unwrap();
    let tls = s.xds.tls.unwrap();
    assert_eq!(tls.san.as_deref(), Some("xds.example"));
    assert!(tls.client_identity.is_none());
}

#[test]
fn bad_numbers_name_their_variable() {
    for (name, bad) in [
        ("XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "-1"),
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "10"),
        ("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "big"),
    ] {
        assert_eq!(load(&[(name, bad)]).unwrap_err().name, name);
    }
}
