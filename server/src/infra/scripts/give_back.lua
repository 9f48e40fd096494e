-- Units of a reservation go back on sale (a cancelled or failed order), once: the returned mark
-- makes a second give-back of the same token do nothing.
-- KEYS: 1 the returned mark, 2 token record, 3 stock, 4 holders, 5 unsettled tokens, 6 their owners.
-- ARGV: 1 quantity, 2 user id, 3 status, 4 reason, 5 activity id, 6 ttl (s), 7 token.
-- Returns 1 when the units went back, 0 when they had already.
local qty = tonumber(ARGV[1])
local ttl = tonumber(ARGV[6])
if not qty or qty < 1 or not ttl or ARGV[2] == '' then return redis.error_reply('bad arguments') end
redis.call('ZREM', KEYS[5], ARGV[7])
redis.call('HDEL', KEYS[6], ARGV[7])
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ttl) then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then redis.call('INCRBY', KEYS[3], qty) end
if redis.call('HINCRBY', KEYS[4], ARGV[2], -qty) <= 0 then redis.call('HDEL', KEYS[4], ARGV[2]) end
redis.call('HSET', KEYS[2], 'status', ARGV[3], 'reason', ARGV[4], 'activity_id', ARGV[5], 'user_id', ARGV[2], 'quantity', qty)
redis.call('EXPIRE', KEYS[2], ttl)
return 1
