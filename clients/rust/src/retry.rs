//! A retry helper for callers of rate-limited APIs (ratelimitd's `/check`, or any service behind a
//! rate limit), with the semantics of the Python client's `Retrying`: on `429` or `503` it waits
//! what the server asked — `Retry-After` (seconds or an HTTP date) or the `t` of an exhausted item
//! of the draft `RateLimit` header, whichever is longer — plus full jitter, never less, then tries
//! again, within a number of attempts, a total wait and an optional shared [`RetryBudget`].
//!
//! The jitter keeps a herd apart: clients denied together are told the same `Retry-After`, and had
//! they all come back after exactly that long they would be denied together again. So each waits
//! `hint + uniform(0, ceiling)`, where the ceiling is the exponential backoff `base × 2^attempt`
//! raised, when the server gave a hint, to `spread × hint`, and capped at `cap`. Without a hint it
//! is plain full-jitter exponential backoff.
//!
//! The wall clock (for HTTP dates), the monotonic clock of the budget, the sleep and the random
//! seed are parameters, so tests run without waiting.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode, header};

use crate::check::Decision;
use crate::clock::{Clock, Sleeper, SystemClock, WallClock, tokio_sleeper};
use crate::error::Error;

/// An outcome [`Retrying`] can judge: an HTTP answer (a status and headers) or not.
pub trait Retryable {
    /// This outcome's status and headers when it is an HTTP answer; `None` for one that is final
    /// whatever happens (a transport error, a value of another kind).
    fn answer(&self) -> Option<(StatusCode, Cow<'_, HeaderMap>)>;
}

impl Retryable for Decision {
    /// `200` when allowed, `429` when denied, with the answer's headers (and a `Retry-After` from
    /// [`Decision::retry_after`] when they lack one).
    fn answer(&self) -> Option<(StatusCode, Cow<'_, HeaderMap>)> {
        if self.allowed {
            return Some((StatusCode::OK, Cow::Borrowed(&self.headers)));
        }
        let mut headers = Cow::Borrowed(&self.headers);
        if !headers.contains_key(header::RETRY_AFTER) {
            headers
                .to_mut()
                .insert(header::RETRY_AFTER, self.retry_after.as_secs().into());
        }
        Some((StatusCode::TOO_MANY_REQUESTS, headers))
    }
}

impl Retryable for Error {
    /// A `503` ([`Error::Unavailable`]) with its `Retry-After`; every other error is final.
    fn answer(&self) -> Option<(StatusCode, Cow<'_, HeaderMap>)> {
        let Error::Unavailable { retry_after, .. } = self else {
            return None;
        };
        let mut headers = HeaderMap::new();
        if let Some(wait) = retry_after {
            headers.insert(header::RETRY_AFTER, wait.as_secs().into());
        }
        Some((StatusCode::SERVICE_UNAVAILABLE, Cow::Owned(headers)))
    }
}

impl<B> Retryable for http::Response<B> {
    fn answer(&self) -> Option<(StatusCode, Cow<'_, HeaderMap>)> {
        Some((self.status(), Cow::Borrowed(self.headers())))
    }
}

impl<T: Retryable, E: 'static> Retryable for Result<T, E> {
    /// `Ok` as its value; `Err` is final unless it is this crate's [`Error`] (a `503` is retried).
    fn answer(&self) -> Option<(StatusCode, Cow<'_, HeaderMap>)> {
        match self {
            Ok(value) => value.answer(),
            Err(e) => (e as &dyn std::any::Any)
                .downcast_ref::<Error>()
                .and_then(Retryable::answer),
        }
    }
}

/// Calls an async function, retrying while it answers a `429` or `503` (see the module docs).
///
/// When the attempts, the total wait or the budget run out, the last outcome is returned, so the
/// caller handles a final `429` as it would without retries.
///
/// ```no_run
/// use ratelimitd_client::{CheckRequest, Client, Retrying};
///
/// # async fn run() -> Result<(), ratelimitd_client::Error> {
/// let client = Client::new("http://127.0.0.1:8080")?;
/// let req = CheckRequest::new("user:42").endpoint("/api/v1/export");
/// let retrying = Retrying::new().max_attempts(3);
/// let decision = retrying.call(|| client.check(&req)).await?;
/// # Ok(())
/// # }
/// ```
pub struct Retrying {
    max_attempts: u32,
    base: Duration,
    cap: Duration,
    spread: f64,
    max_total_wait: Duration,
    statuses: Vec<StatusCode>,
    budget: Option<Arc<RetryBudget>>,
    clock: Arc<dyn WallClock>,
    sleeper: Sleeper,
    random: Mutex<SplitMix64>,
}

impl Default for Retrying {
    fn default() -> Self {
        Retrying::new()
    }
}

impl Retrying {
    /// The defaults: 5 attempts, base 100 ms, cap 60 s, spread 1, at most 120 s of waits in all,
    /// retrying `429` and `503`, no budget, tokio's timer, a seed from the time and a counter.
    pub fn new() -> Self {
        Retrying {
            max_attempts: 5,
            base: Duration::from_millis(100),
            cap: Duration::from_secs(60),
            spread: 1.0,
            max_total_wait: Duration::from_secs(120),
            statuses: vec![
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::SERVICE_UNAVAILABLE,
            ],
            budget: None,
            clock: Arc::new(SystemClock),
            sleeper: tokio_sleeper(),
            random: Mutex::new(SplitMix64::seeded_by_time()),
        }
    }

    /// Calls in all, the first included (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The backoff's first ceiling, doubled after each attempt.
    pub fn base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// The largest ceiling of the jitter (the server's hint itself is always waited in full).
    pub fn cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// With a hint, the jitter's ceiling is at least `spread × hint` (default 1: one more hint's
    /// length). A negative or not-a-number spread counts as 0.
    pub fn spread(mut self, spread: f64) -> Self {
        self.spread = if spread.is_finite() && spread > 0.0 {
            spread
        } else {
            0.0
        };
        self
    }

    /// Gives up rather than wait past this much in all.
    pub fn max_total_wait(mut self, total: Duration) -> Self {
        self.max_total_wait = total;
        self
    }

    /// The statuses retried (default `429` and `503`).
    pub fn statuses(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> Self {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// Takes each retry from `budget`, shared by every caller that should not multiply the load of
    /// a struggling dependency.
    pub fn budget(mut self, budget: Arc<RetryBudget>) -> Self {
        self.budget = Some(budget);
        self
    }

    /// Reads the time of day from `clock` (to measure a `Retry-After` given as an HTTP date).
    pub fn clock(mut self, clock: Arc<dyn WallClock>) -> Self {
        self.clock = clock;
        self
    }

    /// Waits with `sleeper` instead of tokio's timer (tests record the waits).
    pub fn sleeper(mut self, sleeper: Sleeper) -> Self {
        self.sleeper = sleeper;
        self
    }

    /// Seeds the jitter, for a reproducible sequence of waits.
    pub fn seed(self, seed: u64) -> Self {
        *self.random.lock().unwrap_or_else(|p| p.into_inner()) = SplitMix64(seed);
        self
    }

    /// How long to wait after failed attempt number `attempt` (0 for the first) whose answer
    /// carried `headers`: never less than the server's hint.
    pub fn wait_for(&self, attempt: u32, headers: &HeaderMap) -> Duration {
        let hint = server_hint(headers, self.clock.system_time());
        let backoff = 2u32
            .checked_pow(attempt)
            .map_or(Duration::MAX, |m| self.base.saturating_mul(m));
        let mut ceiling = backoff.min(self.cap);
        if !hint.is_zero() {
            let spread =
                Duration::try_from_secs_f64(hint.as_secs_f64() * self.spread).unwrap_or(self.cap);
            ceiling = ceiling.max(spread.min(self.cap));
        }
        let unit = self.random.lock().unwrap_or_else(|p| p.into_inner()).unit();
        hint.saturating_add(ceiling.mul_f64(unit))
    }

    /// The wait before the next attempt after `outcome`, or `None` when it is final or the
    /// retries are spent.
    fn wait_after(
        &self,
        outcome: &impl Retryable,
        attempt: u32,
        waited: Duration,
    ) -> Option<Duration> {
        let (status, headers) = outcome.answer()?;
        if !self.statuses.contains(&status) || attempt.saturating_add(1) >= self.max_attempts {
            return None;
        }
        let wait = self.wait_for(attempt, &headers);
        if waited.saturating_add(wait) > self.max_total_wait {
            return None;
        }
        if let Some(budget) = &self.budget
            && !budget.try_retry()
        {
            return None;
        }
        Some(wait)
    }

    /// `f().await`, retried as described above; the last outcome when the retries end.
    pub async fn call<T, F, Fut>(&self, mut f: F) -> T
    where
        T: Retryable,
        F: FnMut() -> Fut,
        Fut: Future<Output = T>,
    {
        if let Some(budget) = &self.budget {
            budget.record_call();
        }
        let (mut attempt, mut waited) = (0u32, Duration::ZERO);
        loop {
            let outcome = f().await;
            let Some(wait) = self.wait_after(&outcome, attempt, waited) else {
                return outcome;
            };
            (self.sleeper)(wait).await;
            waited = waited.saturating_add(wait);
            attempt += 1;
        }
    }
}

impl std::fmt::Debug for Retrying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retrying")
            .field("max_attempts", &self.max_attempts)
            .field("base", &self.base)
            .field("cap", &self.cap)
            .field("spread", &self.spread)
            .field("max_total_wait", &self.max_total_wait)
            .field("statuses", &self.statuses)
            .field("budget", &self.budget)
            .finish_non_exhaustive()
    }
}

/// Retries allowed across every call sharing this budget: `min_retries` plus `ratio` of the calls
/// made in the last `window`. When a dependency is down for everyone, retries then add at most
/// `ratio` to its load instead of multiplying it. Memory is one counter pair per second of the
/// window.
pub struct RetryBudget {
    ratio: f64,
    min_retries: u32,
    window: Duration,
    clock: Arc<dyn Clock>,
    start: Instant,
    /// (second since `start`, calls, retries), oldest first.
    seconds: Mutex<VecDeque<(u64, u64, u64)>>,
}

impl RetryBudget {
    /// `min_retries` + `ratio` × calls per `window` (the Python client's defaults are 10, 0.2 and
    /// 10 s); a window under a second counts as one second.
    pub fn new(ratio: f64, min_retries: u32, window: Duration) -> Self {
        RetryBudget {
            ratio: if ratio.is_finite() && ratio > 0.0 {
                ratio
            } else {
                0.0
            },
            min_retries,
            window: window.max(Duration::from_secs(1)),
            clock: Arc::new(SystemClock),
            start: SystemClock.now(),
            seconds: Mutex::new(VecDeque::new()),
        }
    }

    /// Reads time from `clock` (tests pass a manual one).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.start = clock.now();
        self.clock = clock;
        self
    }

    /// The current second's counters, after dropping the seconds that left the window.
    fn with_bucket<R>(&self, f: impl FnOnce(&mut VecDeque<(u64, u64, u64)>) -> R) -> R {
        let elapsed = self.clock.now().saturating_duration_since(self.start);
        let second = elapsed.as_secs();
        let mut seconds = self.seconds.lock().unwrap_or_else(|p| p.into_inner());
        while let Some(&(s, ..)) = seconds.front() {
            if Duration::from_secs(s) + self.window <= elapsed {
                seconds.pop_front();
            } else {
                break;
            }
        }
        if seconds.back().is_none_or(|&(s, ..)| s != second) {
            seconds.push_back((second, 0, 0));
        }
        f(&mut seconds)
    }

    /// Counts a first attempt.
    pub fn record_call(&self) {
        self.with_bucket(|s| {
            if let Some(b) = s.back_mut() {
                b.1 += 1;
            }
        });
    }

    /// Takes one retry from the budget, or says there is none left.
    pub fn try_retry(&self) -> bool {
        self.with_bucket(|s| {
            let calls: u64 = s.iter().map(|b| b.1).sum();
            let retries: u64 = s.iter().map(|b| b.2).sum();
            if retries as f64 >= f64::from(self.min_retries) + self.ratio * calls as f64 {
                return false;
            }
            if let Some(b) = s.back_mut() {
                b.2 += 1;
            }
            true
        })
    }
}

impl std::fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetryBudget")
            .field("ratio", &self.ratio)
            .field("min_retries", &self.min_retries)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

/// How long the server asked to wait: the longer of `Retry-After` (seconds or an HTTP date,
/// measured from `now`) and the `t` of an exhausted item (`r=0`) of the draft `RateLimit` header;
/// zero when it said neither (or nothing readable).
pub fn server_hint(headers: &HeaderMap, now: SystemTime) -> Duration {
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|v| parse_retry_after(v, now));
    let ratelimit = headers
        .get_all("ratelimit")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(parse_ratelimit)
        .max();
    retry_after.max(ratelimit).unwrap_or(Duration::ZERO)
}

/// A `Retry-After` value: delta-seconds or an HTTP date (after `now`; a past date is zero).
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // More seconds than a u64 holds is still a request to wait: as long as can be.
        return Some(text.parse().map_or(Duration::MAX, Duration::from_secs));
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The longest `t` of the exhausted items (`r` at most 0) of a draft `RateLimit` field value, e.g.
/// `"per-client";r=99;t=13, "search";r=0;t=13` is 13 s; `None` when no item is exhausted.
pub fn parse_ratelimit(value: &str) -> Option<Duration> {
    let mut longest = None;
    for item in split_items(value) {
        let (mut r, mut t) = (None, None);
        for param in item.split(';').skip(1) {
            let (k, v) = param.split_once('=').unwrap_or((param, ""));
            match k.trim().to_ascii_lowercase().as_str() {
                "r" => r = v.trim().parse::<i64>().ok(),
                "t" => t = v.trim().parse::<f64>().ok(),
                _ => {}
            }
        }
        let (Some(r), Some(t)) = (r, t) else { continue };
        if r <= 0
            && let Ok(t) = Duration::try_from_secs_f64(t)
        {
            longest = longest.max(Some(t));
        }
    }
    longest
}

/// Splits a structured-field list on the commas outside quoted strings.
fn split_items(value: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in value.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' && quoted {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == ',' && !quoted {
            items.push(&value[start..i]);
            start = i + 1;
        }
    }
    items.push(&value[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .collect()
}

/// SplitMix64: a small, fast generator for jitter (not for secrets).
struct SplitMix64(u64);

impl SplitMix64 {
    /// A seed from the time of day and a process-wide counter, so helpers made at once differ.
    fn seeded_by_time() -> Self {
        static MADE: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemClock
            .system_time()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let mut mix = SplitMix64(nanos ^ MADE.fetch_add(1, Ordering::Relaxed).rotate_left(32));
        SplitMix64(mix.next())
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests;
