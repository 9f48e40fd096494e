-- Compare and set: the reconciler's repair writes only over the value it read.
-- KEYS: 1 the key. ARGV: 1 the value expected, 2 the new value. Returns 1 when it wrote.
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0
