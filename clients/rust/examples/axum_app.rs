//! An axum app rate limited by ratelimitd: every request with an `x-api-key` header is checked on
//! `POST /check` (key = the header, endpoint = the path); a denied one is answered 429 with
//! ratelimitd's headers; if ratelimitd does not answer within 100 ms, a local limit of 100 a minute
//! per key holds the line.
//!
//! ```sh
//! RATELIMITD_CONFIG=examples/check cargo run --bin ratelimitd &      # ratelimitd on :8080
//! cargo run -p ratelimitd-client --example axum_app                  # this app on :3000
//! for i in $(seq 11); do curl -si localhost:3000/api/v1/search -H 'x-api-key: user:42' | head -1; done
//! ```
//!
//! `RATELIMITD_URL` (default `http://127.0.0.1:8080`) and `LISTEN` (default `127.0.0.1:3000`)
//! change the addresses.

use std::time::Duration;

use axum::Router;
use axum::routing::get;
use ratelimitd_client::{Client, FailurePolicy, LocalLimit, RateLimitLayer, header_key};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("RATELIMITD_URL").unwrap_or_else(|_| "http://127.0.0.1:8080".into());
    let listen = std::env::var("LISTEN").unwrap_or_else(|_| "127.0.0.1:3000".into());
    let client = Client::builder(&url)
        .timeout(Duration::from_millis(100))
        .build()?;
    let fallback = LocalLimit::new(100, Duration::from_secs(60));
    let limit = RateLimitLayer::new(client, header_key("x-api-key"))
        .failure_policy(FailurePolicy::Local(fallback.into()));
    let app = Router::new()
        .route("/api/v1/search", get(|| async { "search results\n" }))
        .route("/api/v1/export/{id}", get(|| async { "export\n" }))
        .layer(limit);
    let listener = tokio::net::TcpListener::bind(&listen).await?;
    println!("listening on http://{listen}, checking {url}");
    axum::serve(listener, app).await?;
    Ok(())
}
