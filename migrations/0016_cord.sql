-- The emergency cord (docs/operations.md "The cord"). A stop holds every sale of a shop, or of
-- the platform, at once (places in the waiting rooms kept); a sale's fail-open lets its shoppers
-- past the bot check and the waiting room (the stock and the per-user limit still hold). Every
-- pull is a row of cord_pulls, beside its audit_log entry, and stays: a sale's report lists those
-- that touched it. The release before reads neither column and never sets them.
ALTER TABLE activities ADD COLUMN halted BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE activities ADD COLUMN fail_open BOOLEAN NOT NULL DEFAULT false;

CREATE TABLE cord_pulls (
    id          BIGSERIAL PRIMARY KEY,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor_id    BIGINT REFERENCES users (id),
    actor       TEXT NOT NULL,
    -- A stop or its release: the shop it holds, NULL for the whole platform.
    shop_id     BIGINT REFERENCES shops (id),
    -- A fail-open or its end: the sale.
    activity_id BIGINT REFERENCES activities (id),
    action      TEXT NOT NULL CHECK (action IN ('stop', 'release', 'fail_open', 'fail_closed')),
    reason      TEXT NOT NULL,
    -- The sales whose state the pull changed.
    sales       BIGINT[] NOT NULL
);
CREATE INDEX cord_pulls_at ON cord_pulls (at DESC);

-- The stops in force: one per scope, 0 for the platform, else the shop's id.
CREATE TABLE halts (
    scope   BIGINT PRIMARY KEY,
    pull_id BIGINT NOT NULL REFERENCES cord_pulls (id)
);
