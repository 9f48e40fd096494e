-- Sign-in's attempt settled: a success gives the failure back, an undecided one (the
-- verification could not run) gives both counts back; the verification's lease is released.
-- KEYS: as sign_in_reserve.lua's 1, 2 and 4.
-- ARGV: 1 outcome (`ok`, `failed` or `undecided`), 2 the attempt's id.
if ARGV[1] == 'ok' then redis.call('DEL', KEYS[1]) end
if ARGV[1] == 'undecided' and redis.call('DECR', KEYS[1]) <= 0 then redis.call('DEL', KEYS[1]) end
if ARGV[1] ~= 'failed' and redis.call('DECR', KEYS[2]) <= 0 then redis.call('DEL', KEYS[2]) end
if redis.call('GET', KEYS[3]) == ARGV[2] then redis.call('DEL', KEYS[3]) end
return 1
