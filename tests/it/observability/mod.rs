//! What ratelimitd publishes for operators: Prometheus counters, StatsD, promtool's checks and the
//! Grafana dashboard against the metrics that exist.

mod concurrency_gauge;
mod dogstatsd;
mod grafana_dashboard;
mod limit_usage;
mod metrics;
mod promtool;
mod statsd;
mod store_health;
