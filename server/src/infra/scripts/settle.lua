-- Ends a borrowing on the buyer's home shard: the token becomes `queued` (a shard lent the
-- units), or the held units are let go and the token forgotten (no shard had any). Once only.
--
-- KEYS: 1 token status, 2 holders, 3 the shard's Idempotency-Key first answers (a hash, field
--       'user:key'), 4 unsettled tokens, 5 the release before's record of this key (touched only
--       with ARGV[8] = 1)
-- ARGV: 1 outcome (lent / none), 2 user id, 3 quantity (the token's own, from the gate), 4 token,
--       5 idempotency ttl (s), 6 the Idempotency-Key ('' when none), 7 now (ms), 8 the release
--       before's record too (0/1, as the gate's)
-- Returns 1 if this call settled the token, 0 if it was settled before.

local qty = tonumber(ARGV[3])
if not qty or not tonumber(ARGV[5]) or not tonumber(ARGV[7]) or (ARGV[8] ~= '0' and ARGV[8] ~= '1') then
  return redis.error_reply('bad arguments')
end
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
local keyed, before = ARGV[6] ~= '', ARGV[8] == '1'
local field = ARGV[2] .. ':' .. ARGV[6]
if ARGV[1] == 'lent' then
  redis.call('HSET', KEYS[1], 'status', 'queued')
  redis.call('ZADD', KEYS[4], ARGV[7], ARGV[4])
  if keyed then
    redis.call('HSET', KEYS[3], field, ARGV[4])
    redis.call('EXPIRE', KEYS[3], ARGV[5])
    if before then redis.call('SET', KEYS[5], ARGV[4], 'EX', ARGV[5]) end
  end
  return 1
end
if redis.call('HINCRBY', KEYS[2], ARGV[2], -qty) <= 0 then redis.call('HDEL', KEYS[2], ARGV[2]) end
redis.call('DEL', KEYS[1])
if keyed then
  local pending = 'pending:' .. ARGV[4] .. ':' .. ARGV[3]
  if redis.call('HGET', KEYS[3], field) == pending then redis.call('HDEL', KEYS[3], field) end
  if before and redis.call('GET', KEYS[5]) == pending then redis.call('DEL', KEYS[5]) end
end
return 1
