//! How the DynamoDB store reaches its table (`BACKEND_TYPE=dynamodb`): the table, the region, an
//! endpoint override for a local stand-in, and the call timeout. Credentials come from the
//! standard AWS chain (environment, profile, web identity, container or instance role) and are
//! never part of these settings. Read from `DYNAMODB_*` by the settings.

use std::time::Duration;

/// How ratelimitd reaches DynamoDB (`BACKEND_TYPE=dynamodb`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamoSettings {
    /// `DYNAMODB_TABLE` (default `ratelimitd`): the table holding the counters; its key is one
    /// string attribute `k`, its TTL attribute `e` (`ratelimitd dynamodb create-table` makes it).
    pub table: String,
    /// `DYNAMODB_REGION`: the region; unset, the AWS chain's (`AWS_REGION`, the profile).
    pub region: Option<String>,
    /// `DYNAMODB_ENDPOINT`: an `http://` or `https://` URL that replaces the region's endpoint
    /// (DynamoDB Local, dynalite, a VPC endpoint); unset, the region's.
    pub endpoint: Option<String>,
    /// `DYNAMODB_RESPONSE_TIMEOUT` (default 500ms): the most one op of a request may take,
    /// its optimistic retries included; past it the op answers by its limit's failure mode.
    pub response_timeout: Duration,
}

impl Default for DynamoSettings {
    fn default() -> DynamoSettings {
        DynamoSettings {
            table: "ratelimitd".into(),
            region: None,
            endpoint: None,
            response_timeout: Duration::from_millis(500),
        }
    }
}
