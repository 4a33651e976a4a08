//! What the region tests share: a region of instances on its own redis-server, bounded load on
//! one key, sync rounds on every instance after the manual clocks move, and this region's share
//! as `/rlconfig` prints it.

use std::time::Duration;

use crate::support::redis::RedisServer;
use crate::support::{TestServer, overall, request};
use ratelimitd::grpc::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

/// One region: its Redis and its instances.
pub struct Region {
    pub name: &'static str,
    pub redis: RedisServer,
    pub instances: Vec<TestServer>,
}

impl Region {
    /// `n` instances of region `name` serving `yaml` on a redis-server of their own, with `env`
    /// on top (the global store's settings).
    pub async fn start(
        name: &'static str,
        n: usize,
        yaml: &str,
        env: &[(String, String)],
    ) -> Region {
        let redis = RedisServer::start();
        let mut all = vec![
            ("REGION".to_string(), name.to_string()),
            // The tests drive the rounds; this is the interval the bound is derived from.
            ("REGION_SYNC_INTERVAL".to_string(), "10s".to_string()),
        ];
        all.extend(env.iter().cloned());
        let env: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut instances = Vec::new();
        for _ in 0..n {
            instances.push(TestServer::start_on(&[("d.yaml", yaml)], &env, Some(&redis)).await);
        }
        Region {
            name,
            redis,
            instances,
        }
    }

    /// `each` requests on descriptor `k=v` from every instance at once; how many were admitted.
    pub async fn load(&self, v: &str, each: usize) -> usize {
        let calls = self.instances.iter().map(|s| async move {
            let mut ok = 0;
            for _ in 0..each {
                let r = s
                    .call(request("d", &[&[("k", v)]]))
                    .await
                    .expect("ShouldRateLimit");
                ok += usize::from(overall(&r) == Code::Ok);
            }
            ok
        });
        futures_util::future::join_all(calls)
            .await
            .into_iter()
            .sum()
    }

    /// This region's share of limit `d.k` as each instance's `/rlconfig` prints it.
    pub async fn shares(&self) -> Vec<f64> {
        let mut out = Vec::new();
        for s in &self.instances {
            let text = reqwest::get(s.debug_url("/rlconfig"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            let prefix = format!("# region_share: d.k {}=", self.name);
            let line = text.lines().find_map(|l| l.strip_prefix(&prefix));
            let line = line.unwrap_or_else(|| panic!("no share line in:\n{text}"));
            out.push(line.split(' ').next().unwrap().parse().unwrap());
        }
        out
    }

    /// This region's share, the same on every instance.
    pub async fn share(&self) -> f64 {
        let all = self.shares().await;
        assert!(
            all.windows(2).all(|w| (w[0] - w[1]).abs() < 1e-9),
            "{}: {all:?}",
            self.name
        );
        all[0]
    }

    /// The sync line of the first instance's `/rlconfig`.
    pub async fn sync_line(&self) -> String {
        let s = &self.instances[0];
        let text = reqwest::get(s.debug_url("/rlconfig"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find(|l| l.starts_with("# region_sync:"))
            .unwrap_or_else(|| panic!("no sync line in:\n{text}"))
            .to_string()
    }
}

/// Moves every instance's clock by one sync interval, then runs a sync round on each.
pub async fn round(regions: &[&Region]) {
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
pub fn global(socket: bool, url: String) -> Vec<(String, String)> {
    let kind = if socket { "unix" } else { "tcp" };
    vec![
        ("GLOBAL_REDIS_SOCKET_TYPE".into(), kind.into()),
        ("GLOBAL_REDIS_URL".into(), url),
        // Generous: the machine is loaded; a cut connection fails at once anyway.
        ("GLOBAL_REDIS_RESPONSE_TIMEOUT".into(), "2s".into()),
    ]
}
