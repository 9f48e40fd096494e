-- Another shard of the same sale lends units to a buyer whose home shard ran out: the units
-- leave this shard's stock and the reservation enters this shard's journal. Decided once per
-- token, either way: a resumed or concurrent borrowing of the same token gets the same answer
-- from every shard (a shard that refused keeps refusing that token even after stock was added),
-- so asking the shards in the token's order always ends at the same lender, or at none.
--
-- KEYS: 1 stock, 2 journal (an entry of one reservation, in the form gate.lua writes its batch),
--       3 this shard's answer to the token ('1' lent, '0' refused)
-- ARGV: 1 token, 2 activity id, 3 user id, 4 quantity, 5 now (ms), 6 marker ttl (s)
-- Returns 'ok' or 'empty'.

local qty = tonumber(ARGV[4])
local ttl = tonumber(ARGV[6])
local user, now = tonumber(ARGV[3]), tonumber(ARGV[5])
if not qty or qty < 1 or not ttl or not user or not now or ARGV[1] == '' or ARGV[2] == '' then
  return redis.error_reply('bad arguments')
end
local answered = redis.call('GET', KEYS[3])
if answered == '1' then return 'ok' end
if answered == '0' then return 'empty' end
local left = tonumber(redis.call('GET', KEYS[1]))
if not left or left < qty then
  redis.call('SET', KEYS[3], '0', 'EX', ttl)
  return 'empty'
end
redis.call('DECRBY', KEYS[1], qty)
redis.call('XADD', KEYS[2], '*', 'activity_id', ARGV[2], 'reservations',
  string.format('%s %d %d %d', ARGV[1], user, qty, now))
redis.call('SET', KEYS[3], '1', 'EX', ttl)
return 'ok'
