-- Who orders a drawn line by its crowd policy (`buy/queue/crowd.rs`), once, after the start by
-- this Redis's clock (the one `join.lua` decides "before the start" by: no entry is drawn after
-- this says the start has come). A holder that dies leaves the turn to the next after `lock_ms`.
-- KEYS: meta. ARGV: start_ms, lock_ms.
-- Returns 0 before the start, 1 the caller's turn, 2 done, 3 another instance's turn.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < tonumber(ARGV[1]) then
  return 0
end
if redis.call('HGET', KEYS[1], 'crowd_done') then
  return 2
end
if (tonumber(redis.call('HGET', KEYS[1], 'crowd_lock')) or 0) > now then
  return 3
end
redis.call('HSET', KEYS[1], 'crowd_lock', now + tonumber(ARGV[2]))
return 1
