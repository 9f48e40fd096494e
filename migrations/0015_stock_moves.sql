-- Every change of a sale's stock that Redis must follow afterwards (units added, a cancelled
-- order's units given back) bumps the sale's stock_moves and stays owed until Redis has it. The
-- reconciler repairs only over figures that held still and owed nothing (pipeline/reconcile.rs).
-- Rows from before are taken as carried over: the release before this one never marks them.
ALTER TABLE activities ADD COLUMN stock_moves BIGINT NOT NULL DEFAULT 0;
ALTER TABLE stock_additions ADD COLUMN in_redis BOOLEAN NOT NULL DEFAULT true;
ALTER TABLE orders ADD COLUMN units_owed BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX stock_additions_owed ON stock_additions (activity_id) WHERE NOT in_redis;
CREATE INDEX orders_units_owed ON orders (activity_id) WHERE units_owed;
