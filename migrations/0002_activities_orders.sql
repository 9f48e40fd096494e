-- Sale activities, their orders, and the audit of stock additions.
-- Redis decides who gets a unit; these constraints have the last word.

CREATE TABLE activities (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    merchant_id         BIGINT NOT NULL REFERENCES users (id),
    title               TEXT NOT NULL CHECK (char_length(title) BETWEEN 1 AND 120),
    description         TEXT NOT NULL DEFAULT '' CHECK (char_length(description) <= 5000),
    image_url           TEXT,
    price_cents         BIGINT NOT NULL CHECK (price_cents >= 0),
    seckill_price_cents BIGINT NOT NULL CHECK (seckill_price_cents BETWEEN 0 AND price_cents),
    starts_at           TIMESTAMPTZ NOT NULL,
    ends_at             TIMESTAMPTZ NOT NULL,
    total_stock         BIGINT NOT NULL CHECK (total_stock >= 1),
    -- Units in orders that are confirmed or paid (not cancelled, not failed).
    sold                BIGINT NOT NULL DEFAULT 0,
    per_user_limit      INT NOT NULL CHECK (per_user_limit BETWEEN 1 AND 100),
    captcha_required    BOOLEAN NOT NULL,
    payment_window_secs INT NOT NULL CHECK (payment_window_secs BETWEEN 60 AND 86400),
    paused              BOOLEAN NOT NULL DEFAULT false,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT activities_window CHECK (ends_at > starts_at),
    CONSTRAINT activities_no_oversell CHECK (sold BETWEEN 0 AND total_stock)
);

CREATE INDEX activities_starts_at ON activities (starts_at DESC);

CREATE TABLE orders (
    id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The reservation token the gate handed out: one token, one row, whatever is redelivered.
    token            UUID NOT NULL UNIQUE,
    activity_id      BIGINT NOT NULL REFERENCES activities (id),
    user_id          BIGINT NOT NULL REFERENCES users (id),
    quantity         INT NOT NULL CHECK (quantity >= 1),
    unit_price_cents BIGINT NOT NULL CHECK (unit_price_cents >= 0),
    -- 'failed': the reservation could not be persisted (dead-lettered); its stock went back.
    status           TEXT NOT NULL CHECK (status IN ('confirmed', 'paid', 'cancelled', 'failed')),
    reason           TEXT,
    reserved_at      TIMESTAMPTZ NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    pay_by           TIMESTAMPTZ,
    paid_at          TIMESTAMPTZ,
    cancelled_at     TIMESTAMPTZ
);

CREATE INDEX orders_activity_status ON orders (activity_id, status);
CREATE INDEX orders_user_created ON orders (user_id, created_at DESC);

CREATE TABLE stock_additions (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    activity_id BIGINT NOT NULL REFERENCES activities (id),
    merchant_id BIGINT NOT NULL REFERENCES users (id),
    added       BIGINT NOT NULL CHECK (added >= 1),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX stock_additions_activity ON stock_additions (activity_id, created_at);
