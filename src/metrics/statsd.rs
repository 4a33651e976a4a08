//! The StatsD sink, in the Go service's wire format (gostats): every `STATS_FLUSH_INTERVAL` each
//! counter's delta goes out as `name:delta|c` (zero deltas skipped), response times as
//! `name:ms|ms`, with `EXTRA_TAGS` appended to every name as `.__k=v` sorted by key. With
//! `USE_DOG_STATSD` (Go's DogStatsD sink) the names stay and the tags go after the type as
//! DogStatsD tags, `name:delta|c|#k:v,k2:v2`, over UDP as Go's datadog-go client sends them; the
//! mogrifiers (`super::mogrifier`) may rewrite a name into another name and more tags.
//!
//! The sink is fire-and-forget: it runs in its own task, never on the request path, and an
//! unreachable or failing StatsD server only costs a log line (at warn once, then debug) and the
//! lost deltas. That is what lets `USE_STATSD` keep the Go default of true.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};

use super::Metrics;
use super::StatsdProtocol;
use super::mogrifier::{Mogrifier, mogrify};

/// Where and how to send.
#[derive(Debug, Clone)]
pub(crate) struct StatsdOptions {
    /// `STATSD_HOST:STATSD_PORT`.
    pub addr: String,
    /// `STATSD_PROTOCOL`.
    pub protocol: StatsdProtocol,
    /// `EXTRA_TAGS`, sorted by key.
    pub tags: Vec<(String, String)>,
    /// `USE_DOG_STATSD`: tags in DogStatsD form instead of in the name.
    pub dogstatsd: bool,
    /// `USE_DOG_STATSD_MOGRIFIERS` (DogStatsD only), in the order listed.
    pub mogrifiers: Vec<Mogrifier>,
    /// `STATS_FLUSH_INTERVAL`.
    pub interval: Duration,
}

/// Where the tags go on a line: the name's `.__k=v` suffix (gostats) or the DogStatsD `|#k:v,...`
/// after the type, followed there by the tags of the mogrifier that rewrote the name.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tags {
    on_name: String,
    /// DogStatsD only: `EXTRA_TAGS` as `k:v`, and the mogrifiers.
    dog: Vec<String>,
    mogrifiers: Vec<Mogrifier>,
}

impl Tags {
    /// `tags` (already sorted) in gostats' form, or DogStatsD's when `dogstatsd`.
    pub(crate) fn new(tags: &[(String, String)], dogstatsd: bool) -> Tags {
        if dogstatsd {
            return Tags {
                dog: tags.iter().map(|(k, v)| format!("{k}:{v}")).collect(),
                ..Tags::default()
            };
        }
        Tags {
            on_name: tags.iter().map(|(k, v)| format!(".__{k}={v}")).collect(),
            ..Tags::default()
        }
    }

    /// DogStatsD's tags, with `mogrifiers` rewriting names into a name and more tags.
    pub(crate) fn dogstatsd(tags: &[(String, String)], mogrifiers: Vec<Mogrifier>) -> Tags {
        Tags {
            mogrifiers,
            ..Tags::new(tags, true)
        }
    }

    /// One line: `name`, `value` and the StatsD `kind` (`c`, `ms`), tagged.
    pub(crate) fn line(&self, name: &str, value: impl std::fmt::Display, kind: &str) -> String {
        let (name, more) = match mogrify(&self.mogrifiers, name) {
            Some((name, more)) => (std::borrow::Cow::Owned(name), more),
            None => (std::borrow::Cow::Borrowed(name), Vec::new()),
        };
        let mut line = format!("{name}{}:{value}|{kind}", self.on_name);
        let mut sep = "|#";
        for tag in self.dog.iter().chain(&more) {
            line.push_str(sep);
            line.push_str(tag);
            sep = ",";
        }
        line
    }
}

/// The counter lines for the deltas since `last` (updated in place); zero deltas are skipped.
pub(crate) fn counter_lines(
    counters: Vec<(String, u64)>,
    last: &mut HashMap<String, u64>,
    tags: &Tags,
) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, value) in counters {
        let prev = last.insert(name.clone(), value).unwrap_or(0);
        let delta = value.saturating_sub(prev);
        if delta > 0 {
            lines.push(tags.line(&name, delta, "c"));
        }
    }
    lines
}

/// Sends the lines of one flush; keeps the TCP connection between flushes.
struct Sender {
    opts: StatsdOptions,
    tcp: Option<TcpStream>,
    udp: Option<UdpSocket>,
    warned: bool,
}

impl Sender {
    async fn send(&mut self, lines: &[String]) {
        if lines.is_empty() {
            return;
        }
        let result = match self.opts.protocol {
            StatsdProtocol::Tcp => self.send_tcp(lines).await,
            StatsdProtocol::Udp => self.send_udp(lines).await,
        };
        if let Err(e) = result {
            self.tcp = None;
            if self.warned {
                tracing::debug!(addr = %self.opts.addr, error = %e, "statsd send failed");
            } else {
                self.warned = true;
                tracing::warn!(addr = %self.opts.addr, error = %e, "statsd send failed; stats are dropped until it is reachable");
            }
        }
    }

    async fn send_tcp(&mut self, lines: &[String]) -> std::io::Result<()> {
        if self.tcp.is_none() {
            let connect = TcpStream::connect(&self.opts.addr);
            let stream = tokio::time::timeout(Duration::from_secs(1), connect)
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out")
                })??;
            self.tcp = Some(stream);
        }
        let mut buf = lines.join("\n");
        buf.push('\n');
        match &mut self.tcp {
            Some(s) => tokio::time::timeout(Duration::from_secs(1), s.write_all(buf.as_bytes()))
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "write timed out")
                })?,
            None => Ok(()),
        }
    }

    async fn send_udp(&mut self, lines: &[String]) -> std::io::Result<()> {
        if self.udp.is_none() {
            let s = UdpSocket::bind(("0.0.0.0", 0)).await?;
            s.connect(&self.opts.addr).await?;
            self.udp = Some(s);
        }
        let Some(s) = &self.udp else { return Ok(()) };
        // Packets of whole lines under a typical MTU, as statsd clients do.
        let mut packet = String::new();
        for line in lines {
            if !packet.is_empty() && packet.len() + line.len() + 1 > 1400 {
                s.send(packet.as_bytes()).await?;
                packet.clear();
            }
            if !packet.is_empty() {
                packet.push('\n');
            }
            packet.push_str(line);
        }
        if !packet.is_empty() {
            s.send(packet.as_bytes()).await?;
        }
        Ok(())
    }
}

/// Flushes `metrics` every interval until `stop` resolves, then flushes once more.
pub(crate) async fn run(
    metrics: Arc<Metrics>,
    opts: StatsdOptions,
    stop: impl Future<Output = ()>,
) {
    let tags = match opts.dogstatsd {
        true => Tags::dogstatsd(&opts.tags, opts.mogrifiers.clone()),
        false => Tags::new(&opts.tags, false),
    };
    let mut last = HashMap::new();
    let mut tick = tokio::time::interval(opts.interval.max(Duration::from_millis(10)));
    tick.tick().await; // the first tick is immediate: nothing to send yet
    let mut sender = Sender {
        opts,
        tcp: None,
        udp: None,
        warned: false,
    };
    tokio::pin!(stop);
    loop {
        let stopping = tokio::select! {
            _ = &mut stop => true,
            _ = tick.tick() => false,
        };
        let mut lines = counter_lines(metrics.statsd_counters(), &mut last, &tags);
        for (method, ms) in metrics.take_timings() {
            let name = format!("ratelimit_server.{method}.response_time");
            lines.push(tags.line(&name, ms, "ms"));
        }
        sender.send(&lines).await;
        if stopping {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_with_sorted_tags_and_zero_skipped() {
        let tags = [("a".into(), "b".into()), ("foo".into(), "bar".into())];
        let mut last = HashMap::new();
        let first = counter_lines(
            vec![("x.total_hits".into(), 3), ("x.over_limit".into(), 0)],
            &mut last,
            &Tags::new(&tags, false),
        );
        assert_eq!(first, vec!["x.total_hits.__a=b.__foo=bar:3|c"]);
        let none = Tags::default();
        let second = counter_lines(vec![("x.total_hits".into(), 5)], &mut last, &none);
        assert_eq!(second, vec!["x.total_hits:2|c"]);
        assert!(counter_lines(vec![("x.total_hits".into(), 5)], &mut last, &none).is_empty());
    }

    #[test]
    fn dogstatsd_puts_the_tags_after_the_type() {
        let tags = [("env".into(), "prod".into()), ("zone".into(), "a".into())];
        let dog = Tags::new(&tags, true);
        assert_eq!(
            dog.line("x.total_hits", 3, "c"),
            "x.total_hits:3|c|#env:prod,zone:a"
        );
        assert_eq!(
            dog.line("ratelimit_server.ShouldRateLimit.response_time", 7, "ms"),
            "ratelimit_server.ShouldRateLimit.response_time:7|ms|#env:prod,zone:a"
        );
        assert_eq!(Tags::new(&[], true).line("x", 1, "c"), "x:1|c");
    }

    #[test]
    fn a_mogrified_name_carries_the_extra_tags_then_its_own() {
        let re = Mogrifier::pattern("D", r"^ratelimit\.service\.rate_limit\.([^.]+)\.").unwrap();
        let tags = Mogrifier::tags("domain:$1").unwrap();
        let m = Mogrifier::new(re, "ratelimit.by_domain", tags);
        let extra = [("env".into(), "prod".into())];
        let dog = Tags::dogstatsd(&extra, vec![m.clone()]);
        assert_eq!(
            dog.line("ratelimit.service.rate_limit.api.k.total_hits", 2, "c"),
            "ratelimit.by_domain:2|c|#env:prod,domain:api"
        );
        assert_eq!(dog.line("other", 1, "c"), "other:1|c|#env:prod");
        let bare = Tags::dogstatsd(&[], vec![m]);
        assert_eq!(
            bare.line("ratelimit.service.rate_limit.api.k.total_hits", 2, "c"),
            "ratelimit.by_domain:2|c|#domain:api"
        );
    }
}
