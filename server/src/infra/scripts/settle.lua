-- Ends a borrowing on the buyer's home shard: the token becomes `queued` (a shard lent the
-- units), or the held units are let go and the token forgotten (no shard had any). Once only.
--
-- KEYS: 1 token status, 2 holders, 3 idempotency record, 4 unsettled tokens
-- ARGV: 1 outcome (lent / none), 2 user id, 3 quantity (the token's own, from the gate), 4 token,
--       5 idempotency ttl (s),
--       6 idempotency key given (0/1), 7 now (ms)
-- Returns 1 if this call settled the token, 0 if it was settled before.

local qty = tonumber(ARGV[3])
if not qty or not tonumber(ARGV[5]) or not tonumber(ARGV[7]) then return redis.error_reply('bad arguments') end
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
if ARGV[1] == 'lent' then
  redis.call('HSET', KEYS[1], 'status', 'queued')
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[4])
  if ARGV[6] == '1' then redis.call('SET', KEYS[3], ARGV[4], 'EX', ARGV[5]) end
  return 1
end
if redis.call('HINCRBY', KEYS[2], ARGV[2], -qty) <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
redis.call('DEL', KEYS[1])
if ARGV[6] == '1' and redis.call('GET', KEYS[3]) == 'pending:' .. ARGV[4] .. ':' .. ARGV[3] then
  redis.call('DEL', KEYS[3])
end
return 1
