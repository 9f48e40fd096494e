-- Where one user stands. Returns {state, ahead, waiting, ticket expiry ms, units left}: state is
-- not_joined | drawing (before the start) | admitted | passed (admitted before, no live ticket) |
-- waiting; units left as the admitter last saw them (-1: not yet seen).
-- KEYS: line, in, meta. ARGV: user, start_ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local m = redis.call('HMGET', KEYS[3], 'cursor', 'stock')
local from = m[1] and ('(' .. m[1]) or '-inf'
local stock = tonumber(m[2]) or -1
local waiting = redis.call('ZCOUNT', KEYS[1], from, '+inf')
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then
  return {'not_joined', 0, waiting, 0, stock}
end
if now < tonumber(ARGV[2]) then
  return {'drawing', 0, waiting, 0, stock}
end
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if expiry and tonumber(expiry) > now then
  return {'admitted', 0, waiting, tonumber(expiry), stock}
end
if m[1] and tonumber(score) <= tonumber(m[1]) then
  return {'passed', 0, waiting, 0, stock}
end
return {'waiting', redis.call('ZCOUNT', KEYS[1], from, '(' .. score), waiting, 0, stock}
