//! The Prometheus exposition of a running service, fetched once and read by series: one scrape
//! and one sample parser for every test that checks a metric.

use std::fmt;
use std::ops::Deref;

use super::TestServer;

/// One scrape: the text as served (it derefs to `str`, so `contains` and `lines` work on it) and
/// its samples.
#[derive(Debug, Clone)]
pub(crate) struct Scrape {
    text: String,
    samples: Vec<(String, f64)>,
}

impl Scrape {
    /// Parses exposition `text`: a sample line is `series value [timestamp]`, where the series is
    /// the metric name with its labels exactly as served (a label value may hold a space).
    pub(crate) fn parse(text: String) -> Scrape {
        let samples = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let end = series_end(l)?;
                let value = l[end..].split_whitespace().next()?.parse().ok()?;
                Some((l[..end].to_string(), value))
            })
            .collect();
        Scrape { text, samples }
    }

    /// The value of `series` (name and labels as served, e.g. `ratelimitd_rlqs_streams` or
    /// `ratelimitd_decisions_total{code="ok",source="store"}`), if it is exposed.
    pub(crate) fn get(&self, series: &str) -> Option<f64> {
        self.samples
            .iter()
            .find_map(|(s, v)| (s == series).then_some(*v))
    }

    /// As [`Scrape::get`] for a counter or gauge that holds a whole number.
    pub(crate) fn count(&self, series: &str) -> Option<u64> {
        // Exposed values are whole numbers printed as floats; `as` is exact below 2^53.
        self.get(series).map(|v| v as u64)
    }

    /// [`Scrape::count`] of a series that must be exposed; panics with the scrape otherwise.
    pub(crate) fn value(&self, series: &str) -> u64 {
        self.count(series)
            .unwrap_or_else(|| panic!("no {series} in the scrape:\n{}", self.text))
    }
}

/// Where the series of sample line `l` ends: after the closing `}` of its labels (quoted values
/// may hold `}`, spaces and escaped quotes), else at the first space.
fn series_end(l: &str) -> Option<usize> {
    let brace = l.find(['{', ' '])?;
    if l.as_bytes()[brace] == b' ' {
        return Some(brace);
    }
    let (mut quoted, mut escaped) = (false, false);
    for (i, c) in l.char_indices().skip_while(|(i, _)| *i <= brace) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i + 1),
            _ => {}
        }
    }
    None
}

impl Deref for Scrape {
    type Target = str;

    fn deref(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Scrape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Scrapes `http://{addr}/metrics` (a spawned binary's Prometheus listener); panics unless it
/// answers 200.
pub(crate) async fn scrape_addr(http: &reqwest::Client, addr: impl fmt::Display) -> Scrape {
    let r = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .expect("the Prometheus listener answers");
    assert_eq!(r.status(), 200, "GET /metrics");
    Scrape::parse(r.text().await.unwrap())
}

impl TestServer {
    /// Scrapes this service's Prometheus listener (started with `USE_PROMETHEUS=true` and
    /// `PROMETHEUS_ADDR=127.0.0.1:0`).
    pub(crate) async fn scrape(&self) -> Scrape {
        let addr = self.running().metrics_addr.expect("Prometheus listens");
        scrape_addr(&self.http, addr).await
    }
}

#[cfg(test)]
mod tests {
    use super::Scrape;

    #[test]
    fn series_are_read_with_their_labels_as_served() {
        let s = Scrape::parse(
            "# TYPE a counter\na 3\nb{x=\"1 }\\\"\",y=\"\"} 4.0 1700000000\nc{x=\"2\"} +Inf\n"
                .to_string(),
        );
        assert_eq!(s.count("a"), Some(3));
        assert_eq!(s.count("b{x=\"1 }\\\"\",y=\"\"}"), Some(4));
        assert_eq!(s.get("c{x=\"2\"}"), Some(f64::INFINITY));
        assert_eq!(s.get("b"), None, "a name alone is not a labelled series");
        assert!(s.contains("# TYPE a counter"));
    }
}
