-- A rule's whole `rate_limit` body (JSON, the YAML fields: unit, requests_per_unit, algorithm,
-- burst, unit_multiplier, name, failure_mode, ...), compiled by the same validator as the files.
-- The typed columns of the baseline keep the main fields for queries.
ALTER TABLE rate_limit_rules ADD COLUMN rate_limit TEXT NOT NULL DEFAULT '{}';
