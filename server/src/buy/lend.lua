-- Another shard of the same sale lends units to a buyer whose home shard ran out: the units
-- leave this shard's stock and the reservation enters this shard's journal. Good once per
-- token, so a resumed borrowing takes nothing more from a shard that already lent.
--
-- KEYS: 1 stock, 2 journal, 3 lent marker of the token
-- ARGV: 1 token, 2 activity id, 3 user id, 4 quantity, 5 now (ms), 6 marker ttl (s)
-- Returns 'ok' or 'empty'.

local qty = tonumber(ARGV[4])
local ttl = tonumber(ARGV[6])
if not qty or qty < 1 or not ttl or ARGV[1] == '' then return redis.error_reply('bad arguments') end
if redis.call('EXISTS', KEYS[3]) == 1 then return 'ok' end
local left = tonumber(redis.call('GET', KEYS[1]))
if not left or left < qty then return 'empty' end
redis.call('DECRBY', KEYS[1], qty)
redis.call('XADD', KEYS[2], '*', 'token', ARGV[1], 'activity_id', ARGV[2], 'user_id', ARGV[3],
  'quantity', qty, 'reserved_ms', ARGV[5])
redis.call('SET', KEYS[3], '1', 'EX', ttl)
return 'ok'
