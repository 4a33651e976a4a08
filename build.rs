//! Compiles the Envoy protos in `proto/` with a vendored protoc, so a fresh machine needs no system protoc.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut config = prost_build::Config::new();
    config.protoc_executable(protoc_bin_vendored::protoc_bin_path()?);
    let include = protoc_bin_vendored::include_path()?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_with_config(
            config,
            &[std::path::PathBuf::from(
                "proto/envoy/service/ratelimit/v3/rls.proto",
            )],
            &[std::path::PathBuf::from("proto"), include],
        )?;
    println!("cargo:rerun-if-changed=proto");
    Ok(())
}
