-- One admission step of a sale's waiting room, run by every instance a few times a second (the
-- steps share their state here, so more instances do not admit faster). Admits the next places in
-- order at `rate` per second, and only while the admitted shoppers who may still buy number fewer
-- than `window` (about twice the units left). An admission is first a claim: unclaimed at
-- `claim_ms` it lapses (counted) and its slot goes to the next in line; claimed (`status.lua`),
-- it lasts a ticket's length. Tickets lapse at their expiry and leave when their holder is done
-- buying. Records the units left for the shoppers' status.
-- `rate` is the sale's rate times what the pipeline's health allows (0: stopped); `held` says why
-- it is held back ('' when it is not), for the board and the console.
-- KEYS: line, in, meta, unclaimed. ARGV: start_ms, rate, window, claim_ms, expire_at_ms, units
-- left, held. Returns {admitted now, admitted with a live ticket}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('HSET', KEYS[3], 'stock', ARGV[6], 'held', ARGV[7])
redis.call('PEXPIREAT', KEYS[3], ARGV[5])
if now < tonumber(ARGV[1]) then
  return {0, 0}
end
local lapsed = redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
if lapsed > 0 then
  redis.call('HINCRBY', KEYS[3], 'lapsed', lapsed)
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local m = redis.call('HMGET', KEYS[3], 'last', 'carry', 'cursor', 'sec', 'sec_n')
local rate = tonumber(ARGV[2])
local last = tonumber(m[1]) or tonumber(ARGV[1])
-- At most one second's admissions pile up while nobody waits or the stock is covered.
local tokens = math.min((tonumber(m[2]) or 0) + math.max(0, now - last) * rate / 1000, rate)
local live = redis.call('ZCARD', KEYS[2])
local n = math.floor(math.min(tokens, tonumber(ARGV[3]) - live))
local admitted = 0
if n > 0 then
  local from = m[3] and ('(' .. m[3]) or '-inf'
  local next = redis.call('ZRANGEBYSCORE', KEYS[1], from, '+inf', 'WITHSCORES', 'LIMIT', 0, n)
  local deadline = now + tonumber(ARGV[4])
  for i = 1, #next, 2 do
    redis.call('ZADD', KEYS[2], deadline, next[i])
    redis.call('ZADD', KEYS[4], deadline, next[i])
  end
  admitted = #next / 2
  if admitted > 0 then
    redis.call('HSET', KEYS[3], 'cursor', next[#next])
    redis.call('HINCRBY', KEYS[3], 'admitted', admitted)
    redis.call('PEXPIREAT', KEYS[2], ARGV[5])
    redis.call('PEXPIREAT', KEYS[4], ARGV[5])
  end
  tokens = tokens - admitted
end
-- Admissions per second for the console: this second's count and the last complete second's.
local sec = math.floor(now / 1000)
local sec_n = tonumber(m[5]) or 0
if tonumber(m[4]) ~= sec then
  local prev = (tonumber(m[4]) == sec - 1) and sec_n or 0
  redis.call('HSET', KEYS[3], 'prev_n', prev, 'sec', sec)
  sec_n = 0
end
redis.call('HSET', KEYS[3], 'last', now, 'carry', tokens, 'sec_n', sec_n + admitted)
return {admitted, live + admitted}
