//! Prometheus collectors kept once per stripe ([`ratelimitd_core::stripe`]): a counter or histogram that
//! every request updates would otherwise be one set of atomics written by every core. Each
//! thread updates its own stripe's collector; a scrape collects every stripe and adds them up
//! (counters by value, histograms bucket by bucket, series matched by their labels), so the
//! exposition is the same as one collector's.

use std::collections::HashMap;
use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{Metric, MetricFamily, MetricType};

use ratelimitd_core::stripe::{self, Padded};

/// One `C` per stripe, exposed as one. Clones share the stripes (register a clone).
#[derive(Clone, Debug)]
pub(crate) struct Striped<C> {
    stripes: Arc<[Padded<C>]>,
}

impl<C> Striped<C> {
    /// A collector per stripe, each made by `make` (the same name, help and labels).
    pub(crate) fn new(make: impl Fn() -> C) -> Striped<C> {
        Striped {
            stripes: (0..stripe::count()).map(|_| Padded(make())).collect(),
        }
    }

    /// The calling thread's collector: update this one.
    pub(crate) fn mine(&self) -> &C {
        &self.stripes[stripe::mine() % self.stripes.len()].0
    }
}

impl<C: Collector> Collector for Striped<C> {
    fn desc(&self) -> Vec<&Desc> {
        self.stripes[0].0.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut stripes = self.stripes.iter().map(|s| s.0.collect());
        let mut out = stripes.next().unwrap_or_default();
        for families in stripes {
            // Every stripe has the same descriptors, collected in the same order.
            for (into, from) in out.iter_mut().zip(families) {
                merge(into, from);
            }
        }
        out
    }
}

/// Adds the series of `from` into `into` (the same family from another stripe).
fn merge(into: &mut MetricFamily, mut from: MetricFamily) {
    let kind = into.get_field_type();
    let labels = |m: &Metric| -> Vec<(String, String)> {
        (m.get_label().iter())
            .map(|l| (l.name().to_string(), l.value().to_string()))
            .collect()
    };
    let at: HashMap<Vec<(String, String)>, usize> = (into.get_metric().iter())
        .enumerate()
        .map(|(i, m)| (labels(m), i))
        .collect();
    for m in from.take_metric() {
        let Some(&i) = at.get(&labels(&m)) else {
            into.mut_metric().push(m);
            continue;
        };
        let sum = &mut into.mut_metric()[i];
        match kind {
            MetricType::COUNTER => {
                let mut c = sum.get_counter().clone();
                c.set_value(c.get_value() + m.get_counter().get_value());
                sum.set_counter(c);
            }
            MetricType::HISTOGRAM => {
                let (mut h, other) = (sum.get_histogram().clone(), m.get_histogram());
                h.set_sample_count(h.get_sample_count() + other.get_sample_count());
                h.set_sample_sum(h.get_sample_sum() + other.get_sample_sum());
                let mut buckets = h.get_bucket().to_vec();
                for (b, o) in buckets.iter_mut().zip(other.get_bucket()) {
                    b.set_cumulative_count(b.cumulative_count() + o.cumulative_count());
                }
                h.set_bucket(buckets);
                sum.set_histogram(h);
            }
            // Only counters and histograms are striped.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};

    use super::*;

    #[test]
    fn stripes_add_up_by_label_and_bucket() {
        let counts =
            Striped::new(|| IntCounterVec::new(Opts::new("t_total", "test"), &["m"]).unwrap());
        let times = Striped::new(|| {
            HistogramVec::new(
                HistogramOpts::new("t_seconds", "test").buckets(vec![0.1, 1.0]),
                &["m"],
            )
            .unwrap()
        });
        // Stripe by stripe, as threads on different stripes would.
        for (i, s) in counts.stripes.iter().enumerate() {
            s.0.with_label_values(&["a"]).inc_by(i as u64 + 1);
        }
        counts.mine().with_label_values(&["b"]).inc();
        for s in times.stripes.iter() {
            s.0.with_label_values(&["a"]).observe(0.05);
            s.0.with_label_values(&["a"]).observe(0.5);
        }
        let n = stripe::count() as u64;
        let c = counts.collect();
        let value = |label: &str| {
            (c[0].get_metric().iter())
                .find(|m| m.get_label()[0].value() == label)
                .map(|m| m.get_counter().get_value() as u64)
        };
        assert_eq!(value("a"), Some(n * (n + 1) / 2));
        assert_eq!(value("b"), Some(1));
        let h = times.collect();
        assert_eq!(h[0].get_metric().len(), 1);
        let h = h[0].get_metric()[0].get_histogram();
        assert_eq!(h.get_sample_count(), 2 * n);
        let cumulative: Vec<u64> = (h.get_bucket().iter())
            .map(prometheus::proto::Bucket::cumulative_count)
            .collect();
        assert_eq!(cumulative, vec![n, 2 * n]);
        assert!((h.get_sample_sum() - 0.55 * n as f64).abs() < 1e-9);
    }
}
