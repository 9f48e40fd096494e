-- Adds to a shard only if its stock is there; otherwise warms it from the database's figures.
-- KEYS: 1 the shard's stock. ARGV: 1 units added, 2 the units the database says are left there.
-- Returns the units on sale in the shard.
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end
redis.call('SET', KEYS[1], ARGV[2])
return tonumber(ARGV[2])
