-- Aggregated violations (issue 17): one row covers every denial of one (domain, descriptor,
-- limit, shadow) between two writes. `requests` counts them (1 for older rows, one per denial),
-- `hits` sums their hits, `at` is the first and `last_at` the last (NULL for older rows: `at`).
ALTER TABLE rate_limit_violations ADD COLUMN requests BIGINT NOT NULL DEFAULT 1;
ALTER TABLE rate_limit_violations ADD COLUMN last_at BIGINT;
