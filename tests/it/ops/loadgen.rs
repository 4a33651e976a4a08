//! The load generator example (`examples/loadgen`) against a real server over gRPC: the benchmarks'
//! figures are only as good as its tally. The server's clock is the manual one, stopped, so one
//! descriptor value limited to 10 per second answers OK exactly 10 times and over the limit after
//! that, whatever the machine's speed: the generator's counts are known in advance.

use crate::support::TestServer;
use crate::support::examples::example;

/// The README's example configuration: `remote_address` values get 10 per second each.
const EXAMPLE: &str = include_str!("../../../examples/config/example.yaml");

/// Runs the load generator against `server` with `args` after the target and one descriptor
/// value (`--keys 1`); returns its standard output once it exits successfully.
async fn loadgen(server: &TestServer, args: &[&str]) -> String {
    let mut cmd = example("loadgen");
    cmd.args([
        "--target",
        &server.running().grpc_addr.to_string(),
        "--keys",
        "1",
    ])
    .args(args);
    // The generator blocks this thread until it is done; the server runs on the test runtime's
    // other worker.
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_closed_loop_counts_every_answer() {
    let server = TestServer::start(&[("example.yaml", EXAMPLE)], &[]).await;
    // 64 clients of 64 requests each on one connection, many in flight at once: each answer must
    // reach the client that asked, once.
    let out = loadgen(
        &server,
        &[
            "--concurrency",
            "64",
            "--seconds",
            "60",
            "--max-requests",
            "4096",
        ],
    )
    .await;
    assert!(
        out.contains("requests 4096 in ") && out.contains("(ok 10, over_limit 4086, errors 0)"),
        "{out}"
    );
    assert!(out.contains("loadgen cpu "), "{out}");
    server.shutdown().await;
}

/// A paced run of 600 requests at 2 000 a second over 4 connections with `client` (`h2` or
/// `raw`): the whole schedule is sent, and every answer counted once.
async fn paced_run(client: &str) {
    let server = TestServer::start(&[("example.yaml", EXAMPLE)], &[]).await;
    let out = loadgen(
        &server,
        &[
            "--client",
            client,
            "--concurrency",
            "64",
            "--connections",
            "4",
            "--seconds",
            "60",
            "--rate",
            "2000",
            "--max-requests",
            "600",
        ],
    )
    .await;
    assert!(
        out.contains("paced at 2000/s: ") && out.contains(" 0 due but never sent "),
        "{out}"
    );
    assert!(
        out.contains("requests 600 in ") && out.contains("(ok 10, over_limit 590, errors 0)"),
        "{out}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_paced_run_sends_its_schedule_over_several_connections() {
    paced_run("h2").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raw_client_is_answered_like_the_h2_one() {
    // The hand-written client's first request on each connection fills HPACK's dynamic table and
    // the later ones refer to it by index: a wrong index would be a compression error or an
    // unknown path, so every answer counted, and none failed, says the server read them all as
    // the h2 client's.
    paced_run("raw").await;
}
