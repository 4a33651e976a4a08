-- Baseline policy schema (ratelimitd issue 16). Portable between SQLite and PostgreSQL: ids are
-- text chosen by the service, times are Unix seconds (BIGINT), and a descriptor path is a JSON
-- array of {"key": …, "value": …} entries, so a row addresses any domain and descriptor — the
-- classic client_key/endpoint pair is the path [{"key":"client_key"},{"key":"endpoint"}].

CREATE TABLE rate_limit_rules (
    id                TEXT PRIMARY KEY,
    domain            TEXT NOT NULL,
    descriptor        TEXT NOT NULL,
    algorithm         TEXT NOT NULL DEFAULT 'fixed_window',
    requests_per_unit BIGINT NOT NULL,
    unit              TEXT NOT NULL,
    unit_multiplier   BIGINT NOT NULL DEFAULT 1,
    burst             BIGINT,
    enabled           BOOLEAN NOT NULL DEFAULT TRUE,
    created_by        TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE INDEX rate_limit_rules_domain ON rate_limit_rules (domain);

CREATE TABLE rate_limit_overrides (
    id                TEXT PRIMARY KEY,
    domain            TEXT NOT NULL,
    descriptor        TEXT NOT NULL,
    rule_id           TEXT,
    requests_per_unit BIGINT NOT NULL,
    unit              TEXT NOT NULL,
    valid_until       BIGINT NOT NULL,
    reason            TEXT NOT NULL DEFAULT '',
    created_by        TEXT NOT NULL,
    created_at        BIGINT NOT NULL
);
CREATE INDEX rate_limit_overrides_valid_until ON rate_limit_overrides (valid_until);

CREATE TABLE rate_limit_violations (
    id                TEXT PRIMARY KEY,
    domain            TEXT NOT NULL,
    descriptor        TEXT NOT NULL,
    at                BIGINT NOT NULL,
    request_count     BIGINT NOT NULL,
    limit_value       BIGINT NOT NULL
);
CREATE INDEX rate_limit_violations_client_time ON rate_limit_violations (domain, descriptor, at);
CREATE INDEX rate_limit_violations_time ON rate_limit_violations (at);
