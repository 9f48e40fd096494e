-- Shoppers who asked to be reminded of a sale before its start: one per shopper and sale. A
-- withdrawn reminder is deleted; the count of a sale's rows is what its console shows.
CREATE TABLE reminders (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    activity_id BIGINT NOT NULL REFERENCES activities (id),
    user_id     BIGINT NOT NULL REFERENCES users (id),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (activity_id, user_id)
);
