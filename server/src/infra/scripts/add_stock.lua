-- Adds one stock addition's share to a shard, once: the addition's mark makes a retried or late
-- call do nothing. A shard whose stock is not there is warmed from the database's figures instead
-- (which count the addition).
-- KEYS: 1 the shard's stock, 2 the addition's mark on this shard.
-- ARGV: 1 units added here, 2 the units the database says are left here, 3 the mark's ttl (s).
-- Returns the units on sale in the shard.
local ttl = tonumber(ARGV[3])
if not tonumber(ARGV[1]) or not tonumber(ARGV[2]) or not ttl then
  return redis.error_reply('bad arguments')
end
if not redis.call('SET', KEYS[2], '1', 'NX', 'EX', ttl) then
  return tonumber(redis.call('GET', KEYS[1]) or '0')
end
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('INCRBY', KEYS[1], ARGV[1]) end
redis.call('SET', KEYS[1], ARGV[2])
return tonumber(ARGV[2])
