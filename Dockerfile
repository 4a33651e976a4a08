# ratelimitd's container image: a Rust build stage, then a small Debian runtime stage with the
# binary, the example configuration and nothing else to install.
#
#   docker build -t ratelimitd .        (or: podman build --format docker -t ratelimitd .)
#   docker run --rm -p 8080:8080 -p 8081:8081 -p 6070:6070 ratelimitd
#
# The configuration is read the way the Go service's image reads it: every file of
# /data/ratelimit/config (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY), which holds
# examples/config/example.yaml until you mount your own directory (a Kubernetes ConfigMap) there.
# tests/it/ops/container_image.rs builds this file, both stages, with podman and runs the image; where
# Docker Hub cannot be reached it builds on local stand-ins under the two FROM names (Debian from
# debootstrap; the Rust image from it and the machine's own toolchain of that version): see
# docs/development.md#the-container-image-test.

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The protobuf compiler is vendored (build.rs), so the build needs nothing beyond the Rust image.
# The image carries every store, DynamoDB's (feature `dynamodb`) included.
# The cached target/ may hold this workspace's crates built from another checkout later than
# these files were last written; cargo decides what to rebuild by modification times, so the
# sources are made the newest files first (the dependencies stay cached).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    find . -path ./target -prune -o -type f -exec touch {} + \
    && cargo build --release --locked --features dynamodb --bin ratelimitd \
    && mkdir -p /out/usr/local/bin /out/data/ratelimit/config /state \
    && cp target/release/ratelimitd /out/usr/local/bin/ratelimitd \
    && cp examples/config/example.yaml /out/data/ratelimit/config/

FROM docker.io/library/debian:bookworm-slim AS runtime
COPY --from=build /out/ /
# The embedded policy database (SQLite) needs one writable directory; everything else can be a
# read-only root filesystem.
COPY --from=build --chown=10001:10001 /state /var/lib/ratelimitd
ENV RUNTIME_ROOT=/data \
    RUNTIME_SUBDIRECTORY=ratelimit \
    RUNTIME_APPDIRECTORY=config \
    RUNTIME_WATCH_ROOT=false \
    RUNTIME_IGNOREDOTFILES=true \
    RATELIMITD_DATA_DIR=/var/lib/ratelimitd
# A numeric non-root user, so that Kubernetes' runAsNonRoot can check it without a passwd entry.
USER 10001:10001
# HTTP (/json, /check, /healthcheck), gRPC (ShouldRateLimit, RLQS, health), debug (/rlconfig).
# The admin API (6071) listens on 127.0.0.1 unless ADMIN_HOST says otherwise, and Prometheus
# (9090, USE_PROMETHEUS=true) only when asked: publish those when you turn them on.
EXPOSE 8080 8081 6070
# /livez on the HTTP port, with bash's /dev/tcp: the image needs no HTTP client. Liveness, not
# readiness (/readyz, Go's /healthcheck): a Redis outage must not mark the container unhealthy and
# get it restarted while its failure modes and circuit breaker are answering.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${PORT:-8080} && printf 'GET /livez HTTP/1.0\\r\\n\\r\\n' >&3 && read -r status <&3 && [[ $status == *' 200 '* ]]"]
ENTRYPOINT ["/usr/local/bin/ratelimitd"]
