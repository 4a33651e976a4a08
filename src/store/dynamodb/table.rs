//! `ratelimitd dynamodb create-table`: creates the counters' table (key `k`, a string; billed per
//! request), waits until it is active, and turns on TTL on `e`. Run again on an existing table it
//! only makes sure TTL is on. An endpoint without the TTL API (dynalite) is told, not an error.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, KeySchemaElement, KeyType, ScalarAttributeType, TableStatus,
    TimeToLiveSpecification,
};

use super::errors::code_and_text;
use super::{DynamoSettings, client, item};
use ratelimitd_core::clock::Stopwatch;
use ratelimitd_core::store::StoreError;

/// How long the table may take to become active.
const ACTIVE_WITHIN: Duration = Duration::from_secs(120);

fn failed(what: &str, table: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("{what} of table {table} failed: {e}"))
}

/// Creates `s.table` (or finds it) and enables its TTL; returns what was done, one line each.
pub(crate) async fn create_table(s: &DynamoSettings) -> Result<String, StoreError> {
    let client = client::build(s, None).await?;
    let table = &s.table;
    let created = create(&client, table).await?;
    wait_active(&client, table).await?;
    let ttl = enable_ttl(&client, table).await?;
    Ok([created, ttl].join("\n"))
}

/// Creates the table with the store's key, billed per request; says so, or that it exists.
async fn create(client: &Client, table: &str) -> Result<String, StoreError> {
    let attr = |t: ScalarAttributeType| {
        AttributeDefinition::builder()
            .attribute_name(item::KEY)
            .attribute_type(t)
            .build()
    };
    let key = KeySchemaElement::builder()
        .attribute_name(item::KEY)
        .key_type(KeyType::Hash)
        .build();
    let created = client
        .create_table()
        .table_name(table)
        .attribute_definitions(
            attr(ScalarAttributeType::S).map_err(|e| failed("creation", table, e))?,
        )
        .key_schema(key.map_err(|e| failed("creation", table, e))?)
        .billing_mode(BillingMode::PayPerRequest)
        .send()
        .await;
    match created.map_err(|e| code_and_text(&e)) {
        Ok(_) => Ok(format!(
            "created table {table} (key {}: string, on demand)",
            item::KEY
        )),
        Err((Some(code), _)) if code == "ResourceInUseException" => {
            Ok(format!("table {table} already exists"))
        }
        Err((_, e)) => Err(failed("creation", table, e)),
    }
}

/// Waits until the table is active, at most [`ACTIVE_WITHIN`].
async fn wait_active(client: &Client, table: &str) -> Result<(), StoreError> {
    let watch = Stopwatch::start();
    loop {
        let described = client.describe_table().table_name(table).send().await;
        let status = described
            .map_err(|e| {
                failed(
                    "DescribeTable",
                    table,
                    aws_sdk_dynamodb::error::DisplayErrorContext(e),
                )
            })?
            .table
            .and_then(|t| t.table_status);
        if status == Some(TableStatus::Active) {
            return Ok(());
        }
        if watch.elapsed() >= ACTIVE_WITHIN {
            return Err(failed(
                "activation",
                table,
                format!("still {status:?} after {ACTIVE_WITHIN:?}"),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Turns on TTL on the expiry attribute; says so, or that it was on, or that the endpoint has
/// no TTL API.
async fn enable_ttl(client: &Client, table: &str) -> Result<String, StoreError> {
    let ttl = TimeToLiveSpecification::builder()
        .attribute_name(item::EXPIRES)
        .enabled(true)
        .build()
        .map_err(|e| failed("TTL", table, e))?;
    let enabled = client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(ttl)
        .send()
        .await;
    match enabled.map_err(|e| code_and_text(&e)) {
        Ok(_) => Ok(format!("TTL enabled on attribute {}", item::EXPIRES)),
        // DynamoDB refuses to enable TTL twice.
        Err((_, e)) if e.contains("already enabled") => Ok(format!(
            "TTL already enabled on attribute {}",
            item::EXPIRES
        )),
        // A local stand-in without the TTL API (dynalite): the store still reads expired items
        // as absent; nothing deletes them.
        Err((Some(code), _)) if code == "UnknownOperationException" => Ok(format!(
            "TTL not enabled: this endpoint does not implement UpdateTimeToLive; items past \
             their expiry (attribute {}) are ignored but not deleted",
            item::EXPIRES
        )),
        Err((_, e)) => Err(failed("UpdateTimeToLive", table, e)),
    }
}
