-- The history of every change: one immutable row per create, update, delete or rollback of a rule
-- or an override, and per other recorded event (such as a counter reset). `seq` orders all rows;
-- `version` counts the changes of one `target` (`policy:<id>`, `override:<id>`, or an event's own
-- target) from 1. `before_json` / `after_json` are the target's JSON before and after the change
-- (NULL when it did not exist). Rows are only ever inserted.

CREATE TABLE policy_history (
    seq               BIGINT PRIMARY KEY,
    kind              TEXT NOT NULL,
    target            TEXT NOT NULL,
    version           BIGINT NOT NULL,
    actor             TEXT NOT NULL,
    at                BIGINT NOT NULL,
    reason            TEXT NOT NULL DEFAULT '',
    before_json       TEXT,
    after_json        TEXT
);
CREATE UNIQUE INDEX policy_history_target_version ON policy_history (target, version);
