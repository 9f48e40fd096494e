-- A sale may be kept for accounts that existed before a given instant (e.g. when it was
-- announced): accounts made for the sale, by the thousand, cannot buy it.
ALTER TABLE activities ADD COLUMN accounts_created_before TIMESTAMPTZ
    CHECK (accounts_created_before IS NULL OR accounts_created_before <= starts_at);
