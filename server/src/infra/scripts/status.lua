-- Where one user stands, and the claim of an admission: the first time an admitted user asks,
-- the turn is theirs for a ticket's length (until then it lapses at the claim deadline). Returns
-- {state, ahead, waiting, ticket expiry ms, units left, place}: state is not_joined | drawing
-- (before the start) | admitted | passed (admitted before, no live ticket) | waiting; units left
-- as the admitter last saw them (-1: not yet seen); place in admission order (1 = the first
-- admitted) while waiting and once admitted, 0 before the start and once passed. A shopper whose
-- bot check failed `bound` times on the sale (0: no bound) is `shadow`: kept waiting, never
-- admitted, nothing claimed.
-- The claim also counts the shopper's wait, from joining (the start, for a place drawn before
-- it) to the claim, in bucket ceil(8·log2(ms + 1)) of `waits`: bucket b holds waits up to
-- 2^(b/8) − 1 ms, each 9 % wider than the one before.
-- KEYS: line, in, meta, unclaimed, suspects, joined, waits. ARGV: user, start_ms, ticket_ms, bound.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[3], 'cursor', 'stock', 'admitted')
local from = m[1] and ('(' .. m[1]) or '-inf'
local stock = tonumber(m[2]) or -1
local waiting = redis.call('ZCOUNT', KEYS[1], from, '+inf')
local bound = tonumber(ARGV[4])
if bound > 0 and (tonumber(redis.call('HGET', KEYS[5], ARGV[1])) or 0) >= bound then
  return {'shadow', 0, waiting, 0, stock, 0}
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  return {'not_joined', 0, waiting, 0, stock, 0}
end
if now < tonumber(ARGV[2]) then
  return {'drawing', 0, waiting, 0, stock, 0}
end
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if expiry and tonumber(expiry) > now then
  if redis.call('ZREM', KEYS[4], ARGV[1]) == 1 then
    expiry = now + tonumber(ARGV[3])
    redis.call('ZADD', KEYS[2], expiry, ARGV[1])
    local start = tonumber(ARGV[2])
    local joined = math.max(tonumber(redis.call('HGET', KEYS[6], ARGV[1])) or start, start)
    redis.call('HDEL', KEYS[6], ARGV[1])
    local bucket = math.ceil(8 * math.log(math.max(0, now - joined) + 1) / math.log(2))
    redis.call('HINCRBY', KEYS[7], bucket, 1)
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then
      redis.call('PEXPIRE', KEYS[7], ttl)
    end
  end
  -- The place of an admission: the admissions so far less those admitted after it.
  local place = 0
  if m[1] and tonumber(score) <= tonumber(m[1]) then
    place = math.max(0, (tonumber(m[3]) or 0) - redis.call('ZCOUNT', KEYS[1], '(' .. score, m[1]))
  end
  return {'admitted', 0, waiting, tonumber(expiry), stock, place}
end
if m[1] and tonumber(score) <= tonumber(m[1]) then
  return {'passed', 0, waiting, 0, stock, 0}
end
local ahead = redis.call('ZCOUNT', KEYS[1], from, '(' .. score)
return {'waiting', ahead, waiting, 0, stock, (tonumber(m[3]) or 0) + ahead + 1}
