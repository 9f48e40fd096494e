-- A sale's stock may be split over several Redis keys (on a cluster, several masters); the count
-- is fixed at creation, since every user's holdings live in the shard their id hashes to.
ALTER TABLE activities ADD COLUMN stock_shards smallint NOT NULL DEFAULT 1 CHECK (stock_shards BETWEEN 1 AND 64);
