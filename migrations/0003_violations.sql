-- The violation log (issue 17): what a row needs to answer "why was this client throttled?".
-- `request_count` of the baseline holds the counter after the hits when one was read, else the
-- hits; `usage` is that counter or NULL when the decision had none (local cache, failure policy).
-- `client_key` copies the descriptor's `client_key` entry, so that it can be indexed.
ALTER TABLE rate_limit_violations ADD COLUMN client_key TEXT;
ALTER TABLE rate_limit_violations ADD COLUMN limit_name TEXT NOT NULL DEFAULT '';
ALTER TABLE rate_limit_violations ADD COLUMN unit TEXT NOT NULL DEFAULT '';
ALTER TABLE rate_limit_violations ADD COLUMN hits BIGINT NOT NULL DEFAULT 0;
ALTER TABLE rate_limit_violations ADD COLUMN usage BIGINT;
ALTER TABLE rate_limit_violations ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE rate_limit_violations ADD COLUMN shadow BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE rate_limit_violations ADD COLUMN instance TEXT NOT NULL DEFAULT '';
CREATE INDEX rate_limit_violations_domain_time ON rate_limit_violations (domain, at, id);
CREATE INDEX rate_limit_violations_client_key_time ON rate_limit_violations (client_key, at, id);
