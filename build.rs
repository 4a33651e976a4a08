//! Compiles the Envoy protos in `proto/` with a vendored protoc, so a fresh machine needs no system protoc.
//! RLS and RLQS share `envoy.type.v3`, so they are generated together.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let include = protoc_bin_vendored::include_path()?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(
            config,
            &[
                std::path::PathBuf::from("proto/envoy/service/ratelimit/v3/rls.proto"),
                std::path::PathBuf::from("proto/envoy/service/rate_limit_quota/v3/rlqs.proto"),
            ],
            &[std::path::PathBuf::from("proto"), include],
        )?;
    compile_xds(protoc_bin_vendored::include_path()?)?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}

/// The xDS client's protos (ADS, `Node`, `google.rpc.Status`, `RateLimitConfig`), generated into
/// their own directory so their `envoy.config.core.v3` does not mix with the RLS one; `src/xds/pb.rs`
/// includes them.
fn compile_xds(include: std::path::PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?).join("xds");
    std::fs::create_dir_all(&out)?;
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let files = [
        "proto/envoy/service/discovery/v3/ads.proto",
        "proto/envoy/config/core/v3/node.proto",
        "proto/google/rpc/status.proto",
        "proto/ratelimit/config/ratelimit/v3/rls_conf.proto",
    ];
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .out_dir(out)
        .compile_with_config(
            config,
            &files.map(std::path::PathBuf::from),
            &[std::path::PathBuf::from("proto"), include],
        )?;
    Ok(())
}
