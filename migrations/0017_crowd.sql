-- Farms demoted at the draw (docs/storefront.md "The drawing"): a sale whose waiting room draws
-- its places groups the entries by network (the /24 or /48 each joined from, and the one its
-- account signed up from). Policy `off` groups nothing; `observe` counts the entries that would be
-- demoted and moves none; `demote` draws the entries of a group of more than `crowd_threshold`
-- entries after everyone else. Expand-only: the release before reads none of these columns.
ALTER TABLE activities ADD COLUMN crowd_policy TEXT NOT NULL DEFAULT 'off'
    CHECK (crowd_policy IN ('off', 'observe', 'demote'));
ALTER TABLE activities ADD COLUMN crowd_threshold INTEGER NOT NULL DEFAULT 100
    CHECK (crowd_threshold >= 2);
-- The network an account signed up from (`203.0.113.0/24`, `2001:db8:1::/48`); NULL for the
-- accounts made before it was kept.
ALTER TABLE users ADD COLUMN signup_network TEXT;
-- What the draw found and did (app's `CrowdOutcome`), written once at the start: the report reads
-- it after the line's keys have expired.
ALTER TABLE activities ADD COLUMN crowd_outcome JSONB;
