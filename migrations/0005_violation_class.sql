-- Violations of limits with priority classes or a soft zone: `class` is the request's class (a
-- name from the configuration; NULL for a plain limit or a limit without classes) and `soft` is
-- TRUE when the denial came from the soft zone's draw rather than a hard bound.
ALTER TABLE rate_limit_violations ADD COLUMN class TEXT;
ALTER TABLE rate_limit_violations ADD COLUMN soft BOOLEAN NOT NULL DEFAULT FALSE;
