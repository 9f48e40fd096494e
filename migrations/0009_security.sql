-- When each session was ended and each user's session epoch last moved, so that every instance
-- re-reads, every few seconds, just what changed since its last look: a revocation whose
-- broadcast was lost is honoured within that period, not when the cookie expires.
ALTER TABLE revoked_sessions ADD COLUMN revoked_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp();
CREATE INDEX revoked_sessions_revoked_at ON revoked_sessions (revoked_at);
ALTER TABLE users ADD COLUMN session_epoch_at TIMESTAMPTZ;
CREATE INDEX users_session_epoch_at ON users (session_epoch_at) WHERE session_epoch_at IS NOT NULL;

-- The first answer to each of a merchant's create-sale and add-stock requests that carried an
-- Idempotency-Key, written in the same transaction as the change: a retry gets it back and
-- changes nothing. Kept a day.
CREATE TABLE admin_requests (
    merchant_id BIGINT NOT NULL REFERENCES users (id),
    key         TEXT NOT NULL,
    route       TEXT NOT NULL,
    status      SMALLINT,
    body        JSONB,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (merchant_id, key)
);
CREATE INDEX admin_requests_created_at ON admin_requests (created_at);
