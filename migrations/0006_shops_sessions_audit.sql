-- Shops: a merchant belongs to one and sees only its sales. Everything that existed before
-- shops moves into one default shop.
CREATE TABLE shops (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       TEXT NOT NULL CHECK (char_length(name) BETWEEN 1 AND 80),
    created_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX shops_name_key ON shops (lower(name));
INSERT INTO shops (name) VALUES ('Default shop');

-- A platform operator creates shops and merchants and blocks users; it belongs to no shop.
ALTER TABLE users DROP CONSTRAINT users_role_check;
ALTER TABLE users
    ADD CONSTRAINT users_role_check CHECK (role IN ('shopper', 'merchant', 'operator')),
    ADD COLUMN shop_id BIGINT REFERENCES shops (id),
    -- Sessions issued under an older epoch are over (sign out everywhere, password change, block).
    ADD COLUMN session_epoch BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN blocked_at TIMESTAMPTZ;
UPDATE users SET shop_id = (SELECT id FROM shops WHERE name = 'Default shop') WHERE role = 'merchant';
ALTER TABLE users ADD CONSTRAINT users_merchant_shop CHECK ((role = 'merchant') = (shop_id IS NOT NULL));
CREATE INDEX users_shop ON users (shop_id) WHERE shop_id IS NOT NULL;

ALTER TABLE activities ADD COLUMN shop_id BIGINT REFERENCES shops (id);
UPDATE activities SET shop_id = (SELECT id FROM shops WHERE name = 'Default shop');
ALTER TABLE activities ALTER COLUMN shop_id SET NOT NULL;
CREATE INDEX activities_shop_starts_at ON activities (shop_id, starts_at DESC);

-- Sessions ended one by one (sign out), kept until the cookie would have expired anyway.
CREATE TABLE revoked_sessions (
    sid        TEXT PRIMARY KEY,
    user_id    BIGINT NOT NULL REFERENCES users (id),
    expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX revoked_sessions_expires ON revoked_sessions (expires_at);

-- Who did what, when, for every merchant and operator action.
CREATE TABLE audit_log (
    id       BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    actor_id BIGINT REFERENCES users (id),
    -- The actor's name at the time (or 'cli' for the command line).
    actor    TEXT NOT NULL,
    -- The shop the action concerns (NULL: a platform action, such as blocking a shopper).
    shop_id  BIGINT REFERENCES shops (id),
    action   TEXT NOT NULL,
    target   TEXT NOT NULL DEFAULT '',
    detail   TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_log_shop_at ON audit_log (shop_id, at DESC);
CREATE INDEX audit_log_at ON audit_log (at DESC);
