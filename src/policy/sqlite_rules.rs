//! Rule rows of the SQLite backend: the whole `rate_limit` body as JSON, with its main fields
//! copied into the baseline's typed columns for queries.

use super::rows::{micros, read_rule};
use super::rules::Rule;
use super::sqlite::SqliteStore;
use super::store::StoreError;
use ratelimitd_core::clock::Timestamp;

impl SqliteStore {
    pub(super) async fn upsert_rule(
        &self,
        rule: &Rule,
        who: &str,
        now: Timestamp,
    ) -> Result<(), StoreError> {
        let rl = &rule.rate_limit;
        let text = |k: &str| rl.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
        let int = |k: &str| rl.get(k).and_then(serde_json::Value::as_i64);
        sqlx::query(
            "INSERT INTO rate_limit_rules (id, domain, descriptor, algorithm, requests_per_unit, \
             unit, unit_multiplier, burst, enabled, created_by, created_at, updated_at, rate_limit) \
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET \
             domain = excluded.domain, descriptor = excluded.descriptor, \
             algorithm = excluded.algorithm, requests_per_unit = excluded.requests_per_unit, \
             unit = excluded.unit, unit_multiplier = excluded.unit_multiplier, \
             burst = excluded.burst, enabled = excluded.enabled, \
             created_by = excluded.created_by, updated_at = excluded.updated_at, \
             rate_limit = excluded.rate_limit",
        )
        .bind(&rule.id)
        .bind(&rule.domain)
        .bind(serde_json::to_string(&rule.descriptor).unwrap_or_default())
        .bind(Some(text("algorithm")).filter(|a| !a.is_empty()).unwrap_or("fixed_window".into()))
        .bind(int("requests_per_unit").unwrap_or(0))
        .bind(text("unit"))
        .bind(int("unit_multiplier").unwrap_or(1))
        .bind(int("burst"))
        .bind(rule.enabled)
        .bind(who)
        .bind(micros(now))
        .bind(micros(now))
        .bind(serde_json::Value::Object(rule.rate_limit.clone()).to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn select_rules(&self) -> Result<Vec<Rule>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, domain, descriptor, rate_limit, enabled FROM rate_limit_rules ORDER BY id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(read_rule).collect()
    }

    pub(super) async fn remove_rule(&self, id: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("DELETE FROM rate_limit_rules WHERE id = ?")
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }
}
