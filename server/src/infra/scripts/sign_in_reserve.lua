-- Sign-in takes its attempt from a username's budgets before the password is verified.
-- KEYS: 1 this address's failures for the username, 2 its failures from everywhere, 3 the slow
--       lane, 4 the verification in flight.
-- ARGV: 1 per-address limit, 2 everywhere limit, 3 window (ms), 4 how long a verification may
--       hold the username (ms), 5 this attempt's id.
-- Returns 0 (the attempt is taken, counted as a failure until it succeeds), or ms to wait.
local mine = tonumber(redis.call('GET', KEYS[1]) or '0')
if mine >= tonumber(ARGV[1]) then return math.max(redis.call('PTTL', KEYS[1]), 1) end
local all = tonumber(redis.call('GET', KEYS[2]) or '0')
if all >= tonumber(ARGV[2]) and not redis.call('SET', KEYS[3], '1', 'NX', 'PX', 1000) then
  return math.max(redis.call('PTTL', KEYS[3]), 1)
end
if not redis.call('SET', KEYS[4], ARGV[5], 'NX', 'PX', ARGV[4]) then return 1000 end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3], 'NX')
redis.call('INCR', KEYS[2])
redis.call('PEXPIRE', KEYS[2], ARGV[3], 'NX')
return 0
