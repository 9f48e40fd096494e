-- A fixed window: counts one request unless the window is full (a refused request is not
-- counted). The sign-up budgets and sign-in's per-address budget.
-- KEYS: 1 the counter. ARGV: 1 limit, 2 window (ms).
-- Returns 0 when the request was counted, else ms until the window ends.
local n = redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2], 'NX')
if n > tonumber(ARGV[1]) then
  redis.call('DECR', KEYS[1])
  return math.max(redis.call('PTTL', KEYS[1]), 1)
end
return 0
