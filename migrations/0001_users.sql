-- Accounts: shoppers register themselves; merchants are created by an operator.
CREATE TABLE users (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      TEXT NOT NULL CHECK (char_length(username) BETWEEN 3 AND 32),
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('shopper', 'merchant')),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Usernames are unique without regard to case: "Ann" and "ann" are one person.
CREATE UNIQUE INDEX users_username_key ON users (lower(username));
