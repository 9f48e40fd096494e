-- What a sale's public report (`/activities/{id}/report`) is made of beyond its orders.

-- Buy attempts per sale, second and outcome (`accepted` or the refusal's error code), as the
-- instances counted them: each adds its counts here once a second.
CREATE TABLE sale_attempts (
    activity_id BIGINT NOT NULL REFERENCES activities (id),
    second      TIMESTAMPTZ NOT NULL,
    outcome     TEXT NOT NULL,
    n           BIGINT NOT NULL CHECK (n >= 0),
    PRIMARY KEY (activity_id, second, outcome)
);

-- A waiting room's figures, which live in Redis only while the line does: kept here once the
-- sale has ended (the first instance to get there writes them; the others find the row).
CREATE TABLE sale_lines (
    activity_id BIGINT PRIMARY KEY REFERENCES activities (id),
    joined      BIGINT NOT NULL,
    admitted    BIGINT NOT NULL,
    lapsed      BIGINT NOT NULL,
    -- Waits from joining (or the start, for a place drawn before it) to admission: a histogram,
    -- the upper bound of each bucket in ms and the shoppers in it.
    wait_bounds_ms BIGINT[] NOT NULL,
    wait_counts    BIGINT[] NOT NULL,
    kept_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
