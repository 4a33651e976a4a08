//! The store itself: which path each op takes (the local over-limit cache, this instance's token
//! lease, a fixed window's `ADD`, an optimistic update), every op of a request at once under one
//! breaker permit and the response timeout, and health.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::Credentials;
use aws_sdk_dynamodb::types::AttributeValue;
use futures_util::future::join_all;

use super::errors::{Failure, classify};
use super::lease::{Grant, Reservation};
use super::{DynamoSettings, client, item};
use crate::store::local_cache::OverLimitCache;
use crate::store::redis::RedisConfig;
use crate::store::{Answer, Op, Resilience, Store, StoreError};
use ratelimitd_core::algorithm::{Algorithm, Decision};
use ratelimitd_core::clock::{Clock, Timestamp};
use ratelimitd_core::resilience::{Breaker, Permit};
use ratelimitd_core::store::lease::{Leases, Serve};

/// The name of the store's one target (breaker, health, unavailable answers).
pub(super) const TARGET: &str = "dynamodb";

/// The key of the item [`Store::probe`] reads: never written, so reading it costs half a read unit.
const PROBE_KEY: &str = "ratelimitd:probe";

/// The DynamoDB-backed store.
#[derive(Debug)]
pub struct DynamoStore {
    pub(super) client: Client,
    pub(super) table: String,
    pub(super) timeout: Duration,
    pub(super) jitter_max_secs: u64,
    breaker: Option<Breaker>,
    local_cache: Option<OverLimitCache>,
    /// This instance's token leases (fixed windows and token buckets with `lease`).
    pub(super) leases: Leases,
    healthy: AtomicBool,
}

impl DynamoStore {
    /// A store on `d`'s table, behind a breaker (`r`) timed by `clock`, with the settings it
    /// shares with the Redis store: `LOCAL_CACHE_SIZE_IN_BYTES`, `EXPIRATION_JITTER_MAX_SECONDS`
    /// and `LEASE_DEFAULT_SIZE` (read from `shared`). Nothing is called yet:
    /// [`Store::probe`] checks the table.
    pub(crate) async fn new(
        d: &DynamoSettings,
        r: &Resilience,
        shared: &RedisConfig,
        clock: &Arc<dyn Clock>,
    ) -> Result<DynamoStore, StoreError> {
        Ok(DynamoStore {
            client: client::build(d, None).await?,
            table: d.table.clone(),
            timeout: d.response_timeout,
            jitter_max_secs: shared.expiration_jitter_max_seconds,
            breaker: (r.breaker_failures > 0).then(|| {
                Breaker::new(
                    TARGET,
                    r.breaker_failures,
                    r.breaker_cooldown,
                    clock.clone(),
                )
            }),
            local_cache: OverLimitCache::with_bytes(shared.local_cache_size_in_bytes),
            leases: Leases::new(shared.lease_default_size),
            healthy: AtomicBool::new(true),
        })
    }

    /// A store on `table` at `endpoint` (a local stand-in such as dynalite) signing with the
    /// fixed key `access_key`/`secret`, without breaker, local cache or jitter, leasing only
    /// what an op's own `lease` asks: for tests.
    pub async fn local(
        endpoint: &str,
        table: &str,
        access_key: &str,
        secret: &str,
    ) -> Result<DynamoStore, StoreError> {
        let settings = DynamoSettings {
            table: table.into(),
            region: Some("us-east-1".into()),
            endpoint: Some(endpoint.into()),
            response_timeout: Duration::from_secs(5),
        };
        let credentials = Credentials::new(access_key, secret, None, None, "ratelimitd-tests");
        Ok(DynamoStore {
            client: client::build(&settings, Some(credentials)).await?,
            table: settings.table,
            timeout: settings.response_timeout,
            jitter_max_secs: 0,
            breaker: None,
            local_cache: None,
            leases: Leases::new(0),
            healthy: AtomicBool::new(true),
        })
    }

    /// Drops this instance's over-limit cache entry and lease for `key` (the lease's hits are
    /// not given back: the item they were reserved from is being deleted).
    pub(super) fn forget_locally(&self, key: &str) {
        if let Some(cache) = &self.local_cache {
            cache.remove(key);
        }
        self.leases.forget(key);
    }

    /// One op against the table; `reserve`: it takes a lease grant too, recorded as it returns.
    async fn one(&self, op: &Op, now: Timestamp, reserve: bool) -> Result<Decision, Failure> {
        let r = match reserve {
            true => Reservation {
                size: u64::from(self.leases.size(op)),
                give_back: self.leases.take_outdated(op),
            },
            false => Reservation::default(),
        };
        let (d, grant) = match op.spec.algorithm {
            Algorithm::FixedWindow if reserve => self.fixed_reserve(op, now, r).await?,
            Algorithm::FixedWindow => (self.fixed(op, now).await?, Grant::default()),
            _ => self.cas(op, now, r).await?,
        };
        self.leases.counters.returned(grant.returned);
        self.leases.granted(op, &d, grant.granted, now);
        Ok(d)
    }

    /// `one` within the response timeout.
    async fn bounded(&self, op: &Op, now: Timestamp, reserve: bool) -> Result<Decision, Failure> {
        match tokio::time::timeout(self.timeout, self.one(op, now, reserve)).await {
            Ok(r) => r,
            Err(_) => Err(Failure::Down(format!(
                "no answer within {:?} (DYNAMODB_RESPONSE_TIMEOUT)",
                self.timeout
            ))),
        }
    }

    /// Answers the ops no call is needed for: an algorithm this store does not run, a key the
    /// local cache knows is over, a lease that serves the op. Returns the ops left to call and,
    /// by op, whether its call reserves a lease.
    fn answer_without_call(
        &self,
        ops: &[Op],
        now: Timestamp,
        answers: &mut [Option<Answer>],
    ) -> (Vec<usize>, Vec<bool>) {
        let mut reserve = vec![false; ops.len()];
        let mut to_call = Vec::with_capacity(ops.len());
        for (i, op) in ops.iter().enumerate() {
            if matches!(
                op.spec.algorithm,
                Algorithm::SlidingLog | Algorithm::Concurrency
            ) {
                // Refused at config load; one arriving anyway (an override) is not counted.
                tracing::warn!(key = %op.key, algorithm = op.spec.algorithm.name(), "not available with BACKEND_TYPE=dynamodb");
                answers[i] = Some(Answer::Unavailable {
                    target: TARGET,
                    breaker_open: false,
                });
                continue;
            }
            let cached = (self.local_cache.as_ref())
                .filter(|_| cacheable(op) && !op.refund)
                .and_then(|c| c.over_until(&op.key, now));
            if let Some(until) = cached {
                answers[i] = Some(Answer::CachedOver { until });
                continue;
            }
            // As on Redis, a usage report must reach the counter: never answered by a lease.
            let serve = match op.report {
                true => Serve::Plain,
                false => self.leases.serve(op, now),
            };
            match serve {
                Serve::Served(d) => answers[i] = Some(Answer::Leased(d)),
                Serve::Reserve => {
                    reserve[i] = true;
                    to_call.push(i);
                }
                Serve::Plain => to_call.push(i),
            }
        }
        (to_call, reserve)
    }

    /// Calls DynamoDB for the ops `to_call`: the ops on one key in order (a request may name a
    /// key twice), the keys at once. Each op's index with its result.
    async fn call(
        &self,
        ops: &[Op],
        now: Timestamp,
        to_call: &[usize],
        reserve: &[bool],
    ) -> Vec<(usize, Result<Decision, Failure>)> {
        let mut chains: Vec<Vec<usize>> = Vec::new();
        for &i in to_call {
            match chains.iter_mut().find(|c| ops[c[0]].key == ops[i].key) {
                Some(chain) => chain.push(i),
                None => chains.push(vec![i]),
            }
        }
        let runs = chains.iter().map(|chain| async move {
            let mut results = Vec::with_capacity(chain.len());
            for &i in chain {
                results.push((i, self.bounded(&ops[i], now, reserve[i]).await));
            }
            results
        });
        join_all(runs).await.into_iter().flatten().collect()
    }

    /// Turns the calls' results into answers (a failure is answered by the failure mode, a
    /// decision teaches the local cache); why DynamoDB was down, when a call says it was.
    fn settle(
        &self,
        ops: &[Op],
        now: Timestamp,
        results: Vec<(usize, Result<Decision, Failure>)>,
        answers: &mut [Option<Answer>],
    ) -> Option<String> {
        let mut down = None;
        for (i, result) in results {
            let op = &ops[i];
            let d = match result {
                Ok(d) => d,
                Err(failure) => {
                    match failure {
                        Failure::Down(why) => down = Some(why),
                        Failure::Contended | Failure::Conflict => {
                            tracing::warn!(key = %op.key, "DynamoDB item updated by others on every try; answered by the failure mode");
                        }
                        Failure::Unreadable(why) => {
                            tracing::warn!(key = %op.key, %why, "DynamoDB item unreadable; answered by the failure mode");
                        }
                    }
                    answers[i] = Some(Answer::Unavailable {
                        target: TARGET,
                        breaker_open: false,
                    });
                    continue;
                }
            };
            if let Some(c) = self.local_cache.as_ref().filter(|_| cacheable(op)) {
                c.learn(&op.key, op.refund, &d, now);
            }
            answers[i] = Some(Answer::Decided(d));
        }
        down
    }

    /// The attributes `names` of the item of `key`, as a strongly consistent read sees it
    /// (`None`: absent).
    pub(super) async fn read(
        &self,
        key: &str,
        names: &[&str],
    ) -> Result<Option<item::Item>, Failure> {
        let mut call = self
            .client
            .get_item()
            .table_name(&self.table)
            .key(item::KEY, AttributeValue::S(key.into()))
            .consistent_read(true);
        let mut projection = Vec::with_capacity(names.len());
        for (i, name) in names.iter().enumerate() {
            projection.push(format!("#a{i}"));
            call = call.expression_attribute_names(format!("#a{i}"), *name);
        }
        let out = call
            .projection_expression(projection.join(", "))
            .send()
            .await
            .map_err(|e| classify(&e))?;
        Ok(out.item)
    }
}

/// Whether the local over-limit cache may know `op`'s key: fixed windows that count every hit
/// (a limit that sheds is over for one class and not another), never a refund or a report.
fn cacheable(op: &Op) -> bool {
    op.spec.algorithm == Algorithm::FixedWindow && !op.only_admitted && !op.report
}

#[async_trait]
impl Store for DynamoStore {
    async fn apply(&self, ops: &[Op], now: Timestamp) -> Result<Vec<Answer>, StoreError> {
        let mut answers: Vec<Option<Answer>> = vec![None; ops.len()];
        let (to_call, reserve) = self.answer_without_call(ops, now, &mut answers);
        if to_call.is_empty() {
            return ratelimitd_core::store::all_answered(answers, "dynamodb");
        }
        let permit = match &self.breaker {
            Some(b) => b.permit(),
            None => Permit::Call { epoch: 0 },
        };
        if permit == Permit::Rejected {
            for &i in &to_call {
                answers[i] = Some(Answer::Unavailable {
                    target: TARGET,
                    breaker_open: true,
                });
            }
            return ratelimitd_core::store::all_answered(answers, "dynamodb");
        }
        let results = self.call(ops, now, &to_call, &reserve).await;
        let down = self.settle(ops, now, results, &mut answers);
        if let Some(why) = &down {
            tracing::warn!(table = %self.table, error = %why, "DynamoDB call failed");
        }
        if let Some(b) = &self.breaker {
            b.record(permit, down.is_none());
        }
        // As for Redis: with a breaker, one failed call is not an outage until it leaves closed.
        let failing = down.is_some() && self.breaker.as_ref().is_none_or(|b| !b.is_closed());
        self.healthy.store(!failing, Ordering::Relaxed);
        ratelimitd_core::store::all_answered(answers, "dynamodb")
    }

    /// `DeleteItem` of each op's key (`reset.rs`).
    async fn reset(&self, ops: &[Op], now: Timestamp) -> Result<u64, StoreError> {
        self.reset_items(ops, now).await
    }

    /// DynamoDB cannot list keys without scanning the table.
    fn no_prefix_reset(&self) -> &'static str {
        super::reset::NO_PREFIX
    }

    fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }

    async fn release_leases(&self, now: Timestamp) -> u64 {
        self.leases.give_back_all(self, now).await
    }

    async fn expire_leases(&self, now: Timestamp) -> u64 {
        self.leases.give_back_expired(self, now).await
    }

    /// Reads one never-written item: healthy when the table answers within the timeout.
    async fn probe(&self) {
        let attempt = self.read(PROBE_KEY, &[item::KEY]);
        let ok = match tokio::time::timeout(self.timeout, attempt).await {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => {
                tracing::debug!(table = %self.table, error = ?e, "DynamoDB probe failed");
                false
            }
            Err(_) => false,
        };
        if let Some(b) = &self.breaker {
            b.probed(ok);
        }
        self.healthy.store(ok, Ordering::Relaxed);
    }
}
