//! What the region tests share: a region of instances on its own redis-server, bounded load on
//! one key, sync rounds on every instance after the manual clocks move, and this region's share
//! as `/rlconfig` prints it; the commands a redis-server (the global store) ran.

use std::time::Duration;

use crate::support::redis::RedisServer;
use crate::support::{TestServer, overall, request};
use ratelimitd::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use ratelimitd_core::clock::Clock;

/// One region: its Redis and its instances.
pub(super) struct Region {
    pub name: &'static str,
    pub redis: RedisServer,
    pub instances: Vec<TestServer>,
}

impl Region {
    /// `n` instances of region `name` serving `yaml` on a redis-server of their own, with `env`
    /// on top (the global store's settings).
    pub(super) async fn start(
        name: &'static str,
        n: usize,
        yaml: &str,
        env: &[(String, String)],
    ) -> Region {
        let mut region = Region {
            name,
            redis: RedisServer::start(),
            instances: Vec::new(),
        };
        for _ in 0..n {
            region.add(yaml, env).await;
        }
        region
    }

    /// One more instance of this region (a new identity), its manual clock at the others' time.
    pub(super) async fn add(&mut self, yaml: &str, env: &[(String, String)]) {
        let mut all = vec![
            ("REGION".to_string(), self.name.to_string()),
            // The tests drive the rounds; this is the interval the bound is derived from.
            ("REGION_SYNC_INTERVAL".to_string(), "10s".to_string()),
        ];
        all.extend(env.iter().cloned());
        let env: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let s = TestServer::start_on(&[("d.yaml", yaml)], &env, Some(&self.redis)).await;
        if let Some(first) = self.instances.first() {
            let now = |s: &TestServer| s.running().manual_clock.as_ref().unwrap().now();
            let behind = now(first).as_micros().saturating_sub(now(&s).as_micros());
            s.advance(Duration::from_micros(behind));
        }
        self.instances.push(s);
    }

    /// `each` requests on descriptor `k=v` from every instance at once; how many were admitted.
    pub(super) async fn load(&self, v: &str, each: usize) -> usize {
        let calls = self.instances.iter().map(|s| load_one(s, v, each));
        futures_util::future::join_all(calls)
            .await
            .into_iter()
            .sum()
    }

    /// This region's share of limit `d.k` as each instance's `/rlconfig` prints it.
    pub(super) async fn shares(&self) -> Vec<f64> {
        let mut out = Vec::new();
        for s in &self.instances {
            let text = s.get_text(&s.debug_url("/rlconfig"), None).await;
            let prefix = format!("# region_share: d.k {}=", self.name);
            let line = text.lines().find_map(|l| l.strip_prefix(&prefix));
            let line = line.unwrap_or_else(|| panic!("no share line in:\n{text}"));
            out.push(line.split(' ').next().unwrap().parse().unwrap());
        }
        out
    }

    /// This region's share, the same on every instance.
    pub(super) async fn share(&self) -> f64 {
        let all = self.shares().await;
        assert!(
            all.windows(2).all(|w| (w[0] - w[1]).abs() < 1e-9),
            "{}: {all:?}",
            self.name
        );
        all[0]
    }

    /// This region's share in force of the key of descriptor `k=v`, as the first instance holds it.
    pub(super) fn key_share(&self, v: &str) -> f64 {
        let regions = &self.instances[0].running().regions;
        let shares = regions.shares.current(regions.clock.now());
        let found = shares
            .iter()
            .find(|(key, _, _)| key.contains(&format!(":{v}}}")));
        found
            .unwrap_or_else(|| panic!("{}: no key {v} in {shares:?}", self.name))
            .2
    }

    /// The sync line of the first instance's `/rlconfig`.
    pub(super) async fn sync_line(&self) -> String {
        let s = &self.instances[0];
        let text = s.get_text(&s.debug_url("/rlconfig"), None).await;
        text.lines()
            .find(|l| l.starts_with("# region_sync:"))
            .unwrap_or_else(|| panic!("no sync line in:\n{text}"))
            .to_string()
    }
}

/// `each` requests on descriptor `k=v` to instance `s`, one after the other; how many were
/// admitted.
pub(super) async fn load_one(s: &TestServer, v: &str, each: usize) -> usize {
    let mut ok = 0;
    for _ in 0..each {
        let r = s
            .call(request("d", &[&[("k", v)]]))
            .await
            .expect("ShouldRateLimit");
        ok += usize::from(overall(&r) == Code::Ok);
    }
    ok
}

/// Moves every instance's clock by one sync interval, then runs a sync round on each.
pub(super) async fn round(regions: &[&Region]) {
    for s in regions.iter().flat_map(|r| &r.instances) {
        s.advance(Duration::from_secs(10));
    }
    for s in regions.iter().flat_map(|r| &r.instances) {
        let sync = s
            .running()
            .regions
            .sync
            .clone()
            .expect("a global store is set");
        sync.round().await;
    }
}

/// Env for the global store at `url` (a unix socket or `host:port`).
pub(super) fn global(socket: bool, url: String) -> Vec<(String, String)> {
    let kind = if socket { "unix" } else { "tcp" };
    vec![
        ("GLOBAL_REDIS_SOCKET_TYPE".into(), kind.into()),
        ("GLOBAL_REDIS_URL".into(), url),
        // Generous: the machine is loaded; a cut connection fails at once anyway.
        ("GLOBAL_REDIS_RESPONSE_TIMEOUT".into(), "2s".into()),
    ]
}

/// Calls of `command` on `redis` since the last `CONFIG RESETSTAT`.
pub(super) fn calls(redis: &RedisServer, command: &str) -> u64 {
    let stats = redis.cli(&["INFO", "commandstats"]);
    let prefix = format!("cmdstat_{command}:calls=");
    (stats.lines())
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}
