//! The policy history against the real service, over real HTTP, on a real SQLite file and a real
//! PostgreSQL: every rule and override change is a version with its author (the token's name),
//! time, reason and before/after; a rollback puts an old version back (re-creating a deleted
//! rule) and is enforced at once; a dry run answers the diff and what explain would say of a
//! sample, writing nothing; read-only tokens read but never write; bad input is refused with a
//! 4xx that changes nothing; and a database created by the previous schema is upgraded in place
//! with its rows kept.

use std::borrow::Cow;
use std::os::unix::fs::PermissionsExt;

use crate::support::TestServer;
use crate::support::policy::{call, override_body};
use crate::support::postgres::shared_database;
use crate::support::require;
use reqwest::Method;
use serde_json::{Value, json};

const ALICE: &str = "alice-secret";
const BOB_READS: &str = "bob-secret";

/// A service with `ADMIN_TOKEN` and an `ADMIN_TOKENS_FILE` naming alice (admin) and bob (read),
/// on SQLite in `data` unless `env` says otherwise.
async fn start(data: &std::path::Path, env: &[(&str, &str)]) -> TestServer {
    let tokens = data.join("tokens");
    std::fs::write(
        &tokens,
        format!("# the ops team\nalice:{ALICE}:admin\n\nbob:{BOB_READS}:read\n"),
    )
    .unwrap();
    std::fs::set_permissions(&tokens, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = tokens.display().to_string();
    let mut all = vec![("ADMIN_TOKENS_FILE", file.as_str())];
    all.extend_from_slice(env);
    crate::support::policy::start(&data.join("db"), &all).await
}

fn rule(rpu: u32) -> Value {
    json!({
        "domain": "web",
        "descriptor": [{"key": "client_key", "value": "u1"}],
        "rate_limit": {"unit": "minute", "requests_per_unit": rpu},
    })
}

/// `body` (a JSON object) with the field `reason` set to `reason`.
fn with_reason(mut body: Value, reason: Value) -> Value {
    body["reason"] = reason;
    body
}

/// [`start`] on SQLite in `data`, with the rule `r1` ([`rule`] of 5) created by alice.
async fn start_with_r1(data: &std::path::Path) -> TestServer {
    let s = start(data, &[]).await;
    let (status, body) = as_alice(&s, Method::PUT, "/v1/policies/r1", Some(rule(5))).await;
    assert_eq!(status, 201, "{body}");
    s
}

async fn as_alice(s: &TestServer, m: Method, path: &str, body: Option<Value>) -> (u16, Value) {
    call(s, m, path, Some(ALICE), body).await
}

/// `POST path` (a rule's `…/rollback`, with its query) as alice, asking for `version`.
async fn roll_back(s: &TestServer, path: &str, version: u64) -> (u16, Value) {
    as_alice(s, Method::POST, path, Some(json!({"version": version}))).await
}

/// The `requests_per_unit` of the limit enforced on `client_key=u1` of domain `web`.
async fn enforced(s: &TestServer) -> Option<u32> {
    let r = s.rl("web", &[&[("client_key", "u1")]]).await;
    crate::support::st(&r, 0).1.map(|l| l.0)
}

async fn history(s: &TestServer, path: &str) -> Vec<Value> {
    let (status, body) = as_alice(s, Method::GET, path, None).await;
    assert_eq!(status, 200, "{body}");
    body["history"].as_array().unwrap().clone()
}

/// Creates, updates and deletes a rule, rolls it back, and checks the whole history.
async fn versions_authors_and_rollback(s: &TestServer) {
    let mut body = rule(5);
    body["reason"] = json!("launch week");
    let (status, created) = as_alice(s, Method::PUT, "/v1/policies/r1", Some(body)).await;
    assert_eq!(
        (status, created["version"].clone()),
        (201, json!(1)),
        "{created}"
    );
    let (status, updated) = as_alice(s, Method::PUT, "/v1/policies/r1", Some(rule(7))).await;
    assert_eq!((status, updated["version"].clone()), (200, json!(2)));
    assert_eq!(enforced(s).await, Some(7));
    let del = as_alice(
        s,
        Method::DELETE,
        "/v1/policies/r1",
        Some(json!({"reason": "too strict"})),
    )
    .await;
    assert_eq!(del.0, 204, "{}", del.1);
    assert_eq!(enforced(s).await, None);

    let rows = history(s, "/v1/policies/r1/history").await;
    let summary: Vec<(u64, &str, &str, &str)> = (rows.iter())
        .map(|r| {
            (
                r["version"].as_u64().unwrap(),
                r["kind"].as_str().unwrap(),
                r["actor"].as_str().unwrap(),
                r["reason"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (3, "policy.delete", "alice", "too strict"),
            (2, "policy.update", "alice", ""),
            (1, "policy.create", "alice", "launch week"),
        ]
    );
    assert_eq!(rows[2]["before"], Value::Null);
    assert_eq!(rows[2]["after"]["rate_limit"]["requests_per_unit"], 5);
    assert_eq!(rows[1]["before"]["rate_limit"]["requests_per_unit"], 5);
    assert_eq!(rows[1]["after"]["rate_limit"]["requests_per_unit"], 7);
    assert_eq!(rows[0]["after"], Value::Null);
    assert!(rows[0]["at"].as_str().unwrap().ends_with('Z'));

    // Rolling the deleted rule back to version 1 creates it again, in service at once.
    let back = json!({"version": 1, "reason": "restore the launch limit"});
    let (status, restored) =
        as_alice(s, Method::POST, "/v1/policies/r1/rollback", Some(back)).await;
    assert_eq!(status, 201, "{restored}");
    assert_eq!(restored["version"], 4);
    assert_eq!(enforced(s).await, Some(5));
    let rows = history(s, "/v1/policies/r1/history?limit=1").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0]["kind"].as_str(), rows[0]["version"].as_u64()),
        (Some("policy.rollback"), Some(4))
    );
    assert_eq!(rows[0]["reason"], "restore the launch limit");

    // Overrides are recorded too, with their own reason; the whole history pages by cursor.
    let (status, ov) = as_alice(
        s,
        Method::POST,
        "/v1/overrides",
        Some(override_body("u9", 50, "2999-01-01T00:00:00Z")),
    )
    .await;
    assert_eq!(status, 201, "{ov}");
    let id = ov["id"].as_str().unwrap().to_string();
    let gone = as_alice(s, Method::DELETE, &format!("/v1/overrides/{id}"), None).await;
    assert_eq!(gone.0, 204);
    let of_override = history(s, &format!("/v1/overrides/{id}/history")).await;
    let kinds: Vec<&str> = of_override
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["override.delete", "override.create"]);
    assert_eq!(of_override[1]["reason"], "launch week");
    assert_eq!(of_override[0]["before"]["requests_per_unit"], 50);

    let mut seen = Vec::new();
    let mut path = "/v1/history?limit=2".to_string();
    for _ in 0..10 {
        let (status, page) = as_alice(s, Method::GET, &path, None).await;
        assert_eq!(status, 200, "{page}");
        for r in page["history"].as_array().unwrap() {
            seen.push(r["seq"].as_u64().unwrap());
        }
        match page["next_cursor"].as_str() {
            Some(c) => path = format!("/v1/history?limit=2&cursor={c}"),
            None => break,
        }
    }
    assert_eq!(seen, [6, 5, 4, 3, 2, 1], "every row once, newest first");
    let only = history(s, "/v1/history?kind=policy.rollback").await;
    assert_eq!(only.len(), 1);
}

#[tokio::test]
async fn every_change_is_a_version_with_its_author_and_a_rollback_restores_it_on_sqlite() {
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path(), &[]).await;
    versions_authors_and_rollback(&s).await;
}

#[tokio::test]
async fn every_change_is_a_version_with_its_author_and_a_rollback_restores_it_on_postgres() {
    require!(Postgres);
    let data = tempfile::tempdir().unwrap();
    let url = shared_database();
    let s = start(data.path(), &[("POLICY_DB_URL", url.as_str())]).await;
    versions_authors_and_rollback(&s).await;
}

#[tokio::test]
async fn bad_requests_are_refused_with_a_4xx_and_change_nothing() {
    let data = tempfile::tempdir().unwrap();
    let s = start_with_r1(data.path()).await;
    let before = history(&s, "/v1/history").await;

    // A read token reads everything but writes nothing.
    let read = |m: Method, path: &'static str, body: Option<Value>| {
        let s = &s;
        async move { call(s, m, path, Some(BOB_READS), body).await }
    };
    assert_eq!(read(Method::GET, "/v1/policies/r1", None).await.0, 200);
    assert_eq!(read(Method::GET, "/v1/history", None).await.0, 200);
    for (m, path, body) in [
        (Method::PUT, "/v1/policies/r1", Some(rule(1))),
        (Method::DELETE, "/v1/policies/r1", None),
        (
            Method::POST,
            "/v1/policies/r1/rollback",
            Some(json!({"version": 1})),
        ),
        (
            Method::POST,
            "/v1/overrides",
            Some(override_body("u1", 1, "2999-01-01T00:00:00Z")),
        ),
    ] {
        let (status, body) = read(m.clone(), path, body).await;
        assert_eq!(status, 403, "{m} {path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("'bob' has the role read"),
            "{body}"
        );
    }

    let cases: [(Method, &str, Option<Value>, u16, &str); 8] = [
        (
            Method::POST,
            "/v1/policies/r1/rollback",
            Some(json!({"version": 9})),
            404,
            "has no version 9",
        ),
        (
            Method::POST,
            "/v1/policies/nothing/rollback",
            Some(json!({"version": 1})),
            404,
            "policy 'nothing' has no version 1",
        ),
        (
            Method::POST,
            "/v1/policies/r1/rollback",
            Some(json!({"version": 0})),
            422,
            "version",
        ),
        (
            Method::POST,
            "/v1/policies/r1/rollback",
            Some(json!({})),
            422,
            "version",
        ),
        (
            Method::PUT,
            "/v1/policies/r1",
            Some(with_reason(rule(2), json!(7))),
            422,
            "reason",
        ),
        (
            Method::PUT,
            "/v1/policies/r1",
            Some(with_reason(rule(2), json!("x".repeat(1025)))),
            422,
            "reason",
        ),
        (
            Method::DELETE,
            "/v1/policies/r1",
            Some(json!({"reason": ["no"]})),
            422,
            "reason",
        ),
        (
            Method::PUT,
            "/v1/policies/r1?dry_run=maybe",
            Some(rule(2)),
            422,
            "dry_run",
        ),
    ];
    for (m, path, body, want, says) in cases {
        let (status, answer) = as_alice(&s, m.clone(), path, body).await;
        assert_eq!(status, want, "{m} {path}: {answer}");
        assert!(answer.to_string().contains(says), "{m} {path}: {answer}");
    }
    assert_eq!(
        as_alice(&s, Method::DELETE, "/v1/policies/r2", None)
            .await
            .0,
        404
    );
    assert_eq!(enforced(&s).await, Some(5), "the rule is unchanged");
    assert_eq!(
        history(&s, "/v1/history").await,
        before,
        "nothing was recorded"
    );
    // Version 2 is the deletion: nothing to put back.
    let del = as_alice(&s, Method::DELETE, "/v1/policies/r1", None).await;
    assert_eq!(del.0, 204);
    let (status, answer) = roll_back(&s, "/v1/policies/r1/rollback", 2).await;
    assert_eq!(status, 422, "{answer}");
    assert!(answer.to_string().contains("is its deletion"), "{answer}");
    assert_eq!(enforced(&s).await, None);
}

#[tokio::test]
async fn a_dry_run_answers_the_diff_and_the_new_decision_and_writes_nothing() {
    let data = tempfile::tempdir().unwrap();
    let s = start_with_r1(data.path()).await;
    let sample = json!({"domain": "web", "descriptors": [{"entries": [{"key": "client_key", "value": "u1"}]}]});
    let mut body = rule(1);
    body["sample"] = sample.clone();
    let (status, dry) = as_alice(&s, Method::PUT, "/v1/policies/r1?dry_run=true", Some(body)).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(dry["kind"], "policy.update");
    assert_eq!(dry["changed"], json!(["rate_limit.requests_per_unit"]));
    let limit = |when: &str| {
        dry["decision"][when]["descriptors"][0]["limits"][0]["requests_per_unit"].clone()
    };
    assert_eq!((limit("now"), limit("after")), (json!(5), json!(1)));
    let version = |when: &str| dry["decision"][when]["config_version"].clone();
    assert!(version("now").is_u64(), "{dry}");
    assert_eq!(
        version("after"),
        Value::Null,
        "not in service: no version yet"
    );
    // Nothing was written or put in service.
    assert_eq!(enforced(&s).await, Some(5));
    assert_eq!(history(&s, "/v1/history").await.len(), 1);

    // The same for a delete, an override and a rollback.
    let del = json!({"sample": sample});
    let (status, dry) = as_alice(
        &s,
        Method::DELETE,
        "/v1/policies/r1?dry_run=true",
        Some(del),
    )
    .await;
    assert_eq!(
        (status, dry["kind"].as_str()),
        (200, Some("policy.delete")),
        "{dry}"
    );
    assert_eq!(
        dry["decision"]["after"]["descriptors"][0]["applies"],
        "no_limit"
    );
    let mut ov = override_body("u1", 99, "2999-01-01T00:00:00Z");
    ov["domain"] = json!("web");
    ov["sample"] = sample.clone();
    let (status, dry) = as_alice(&s, Method::POST, "/v1/overrides?dry_run=true", Some(ov)).await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(
        dry["decision"]["after"]["descriptors"][0]["limits"][0]["requests_per_unit"],
        99
    );
    let (status, dry) = roll_back(&s, "/v1/policies/r1/rollback?dry_run=true", 1).await;
    assert_eq!(
        (status, dry["kind"].as_str()),
        (200, Some("policy.rollback")),
        "{dry}"
    );
    assert_eq!(enforced(&s).await, Some(5));
    assert_eq!(history(&s, "/v1/history").await.len(), 1);
    let (_, overrides) = as_alice(&s, Method::GET, "/v1/overrides", None).await;
    assert_eq!(overrides["overrides"], json!([]));
}

/// The migrations of the previous schema (those the repository had before the history),
/// which is what a database written by the previous release holds.
fn previous_schema() -> sqlx::migrate::Migrator {
    use sqlx::migrate::{Migration, MigrationType};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let files = [
        (1, "baseline", "0001_baseline.sql"),
        (2, "rule body", "0002_rule_body.sql"),
        (3, "violations", "0003_violations.sql"),
        (4, "violation requests", "0004_violation_requests.sql"),
        (5, "violation class", "0005_violation_class.sql"),
    ];
    let migrations = (files.iter())
        .map(|(v, name, file)| {
            let sql = std::fs::read_to_string(root.join(file)).unwrap();
            Migration::new(
                *v,
                Cow::Borrowed(*name),
                MigrationType::Simple,
                Cow::Owned(sql),
                false,
            )
        })
        .collect();
    sqlx::migrate::Migrator {
        migrations: Cow::Owned(migrations),
        ..sqlx::migrate::Migrator::DEFAULT
    }
}

const OLD_RULE: &str = "INSERT INTO rate_limit_rules (id, domain, descriptor, algorithm, \
    requests_per_unit, unit, unit_multiplier, enabled, created_by, created_at, updated_at, \
    rate_limit) VALUES ('old', 'web', '[{\"key\":\"client_key\",\"value\":\"u1\"}]', \
    'fixed_window', 3, 'minute', 1, TRUE, 'admin', 1, 1, \
    '{\"unit\":\"minute\",\"requests_per_unit\":3}')";
const OLD_OVERRIDE: &str = "INSERT INTO rate_limit_overrides (id, domain, descriptor, \
    requests_per_unit, unit, valid_until, reason, created_by, created_at) VALUES ('ov_old', \
    'api', '[{\"key\":\"client_key\",\"value\":\"vip\"}]', 40, 'minute', 99999999999000000, \
    'kept', 'admin', 1)";

/// Writes into `pool` what the previous release left there (its schema, [`OLD_RULE`] and
/// [`OLD_OVERRIDE`]) and closes it; the same on SQLite and PostgreSQL.
async fn write_previous_release<DB>(pool: sqlx::Pool<DB>)
where
    DB: sqlx::Database,
    DB::Connection: sqlx::migrate::Migrate,
    for<'q> DB::Arguments<'q>: sqlx::IntoArguments<'q, DB>,
    for<'c> &'c mut DB::Connection: sqlx::Executor<'c, Database = DB>,
{
    previous_schema().run(&pool).await.unwrap();
    for insert in [OLD_RULE, OLD_OVERRIDE] {
        sqlx::query(insert).execute(&pool).await.unwrap();
    }
    pool.close().await;
}

/// The service on a database of the previous schema: its rule and override are kept and in
/// service, and the first change of the old rule is its version 1, with the old rule as before.
async fn upgraded_in_place_keeps_the_data(s: &TestServer) {
    assert_eq!(enforced(s).await, Some(3), "the old rule is in service");
    let (status, ov) = as_alice(s, Method::GET, "/v1/overrides/ov_old", None).await;
    assert_eq!((status, ov["reason"].as_str()), (200, Some("kept")), "{ov}");
    assert!(history(s, "/v1/history").await.is_empty());
    let mut body = rule(4);
    body["reason"] = json!("first change after the upgrade");
    let (status, _) = as_alice(s, Method::PUT, "/v1/policies/old", Some(body)).await;
    assert_eq!(status, 200, "replaced, not created");
    let rows = history(s, "/v1/policies/old/history").await;
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0]["version"].as_u64(), rows[0]["kind"].as_str()),
        (Some(1), Some("policy.update"))
    );
    assert_eq!(rows[0]["before"]["rate_limit"]["requests_per_unit"], 3);
    let (status, _) = roll_back(s, "/v1/policies/old/rollback", 1).await;
    assert_eq!(status, 200);
    assert_eq!(
        enforced(s).await,
        Some(4),
        "version 1 is the first recorded state"
    );
}

#[tokio::test]
async fn a_sqlite_database_of_the_previous_schema_is_upgraded_in_place() {
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
    let data = tempfile::tempdir().unwrap();
    let db = data.path().join("db");
    std::fs::create_dir_all(&db).unwrap();
    {
        let options = SqliteConnectOptions::new()
            .filename(db.join("policy.db"))
            .create_if_missing(true);
        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .unwrap();
        write_previous_release(pool).await;
    }
    let s = start(data.path(), &[]).await;
    upgraded_in_place_keeps_the_data(&s).await;
}

#[tokio::test]
async fn a_postgres_database_of_the_previous_schema_is_upgraded_in_place() {
    require!(Postgres);
    let url = shared_database();
    {
        let pool = sqlx::postgres::PgPoolOptions::new()
            .connect(&url)
            .await
            .unwrap();
        write_previous_release(pool).await;
    }
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path(), &[("POLICY_DB_URL", url.as_str())]).await;
    upgraded_in_place_keeps_the_data(&s).await;
}

/// A counter reset is a row of the history: `counters.reset` on `counters:<domain>`, its author
/// (the token's name), its reason and what was reset; a read token may not reset (403, nothing
/// reset, nothing recorded).
#[tokio::test]
async fn a_counter_reset_is_recorded_with_its_author_and_needs_an_admin_token() {
    let data = tempfile::tempdir().unwrap();
    let s = start(data.path(), &[]).await;
    let spend = || async {
        for _ in 0..2 {
            s.rl("api", &[&[("client_key", "k1")]]).await;
        }
    };
    spend().await;
    let over = s.rl("api", &[&[("client_key", "k1")]]).await;
    assert_eq!(
        crate::support::overall(&over),
        crate::support::Code::OverLimit
    );
    let body = json!({
        "domain": "api",
        "descriptor": [{"key": "client_key", "value": "k1"}],
        "reason": "support ticket 12",
    });
    let path = "/v1/counters/reset";
    let (status, refused) = call(&s, Method::POST, path, Some(BOB_READS), Some(body.clone())).await;
    assert_eq!(status, 403, "{refused}");
    let still = s.rl("api", &[&[("client_key", "k1")]]).await;
    assert_eq!(
        crate::support::overall(&still),
        crate::support::Code::OverLimit,
        "nothing reset"
    );
    assert!(
        history(&s, "/v1/history?kind=counters.reset")
            .await
            .is_empty()
    );

    let (status, done) = as_alice(&s, Method::POST, path, Some(body)).await;
    assert_eq!((status, done["reset"].clone()), (200, json!(1)), "{done}");
    let again = s.rl("api", &[&[("client_key", "k1")]]).await;
    assert_eq!(
        crate::support::overall(&again),
        crate::support::Code::Ok,
        "reset"
    );
    let rows = history(&s, "/v1/history?kind=counters.reset").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let row = &rows[0];
    assert_eq!(row["target"], "counters:api", "{row}");
    assert_eq!(row["actor"], "alice", "{row}");
    assert_eq!(row["reason"], "support ticket 12", "{row}");
    assert_eq!(row["after"]["reset"], 1, "{row}");
}
