//! ratelimitd behind a real Envoy: the HTTP filter's 200/429 and headers, refunds, the
//! `rate_limit_quota` (RLQS) filter, the Envoy Gateway recipe, and which limit fired in an access log.

mod concurrency;
mod e2e;
mod gateway_recipe;
mod matching;
mod priority;
mod refunds;
mod rlqs;
mod rolling_restart;
mod usage;
mod which_limit;
