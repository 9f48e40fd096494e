-- Joins a sale's waiting room, or keeps the place already held (several tabs, reloads, a bot's
-- hundred joins: one user, one place). Before the start (by this Redis's clock, the one every
-- instance shares) a place is a random number below 2^50, so arriving early gives no edge; after
-- the start it is 2^50 + the arrival number, behind everyone who was there on time. With `again`
-- a user whose admission was used or lapsed queues once more, at the back.
-- A shopper whose bot check failed `bound` times on the sale (0: no bound) takes no place and
-- loses the one held: the score is -1.
-- KEYS: line, in, meta, suspects. ARGV: user, start_ms, random place, again (0|1), expire_at_ms,
-- bound. Returns {the place's score, places drawn before the start}: a place after the start is
-- the `drawn + (score - 2^50)`-th in admission order.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local bound = tonumber(ARGV[6])
if bound > 0 and (tonumber(redis.call('HGET', KEYS[4], ARGV[1])) or 0) >= bound then
  redis.call('ZREM', KEYS[1], ARGV[1])
  return {-1, tonumber(redis.call('HGET', KEYS[3], 'drawn')) or 0}
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and ARGV[4] == '1' then
  local cursor = redis.call('HGET', KEYS[3], 'cursor')
  if cursor and tonumber(score) <= tonumber(cursor) and not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
    score = false
  end
end
if not score then
  if now < tonumber(ARGV[2]) then
    score = tonumber(ARGV[3])
    -- Places are distinct, so that the admission cursor never skips a tie.
    while redis.call('ZCOUNT', KEYS[1], score, score) > 0 do
      score = score + 1
    end
    redis.call('HINCRBY', KEYS[3], 'drawn', 1)
  else
    score = 1125899906842624 + redis.call('HINCRBY', KEYS[3], 'seq', 1)
  end
  redis.call('ZADD', KEYS[1], score, ARGV[1])
  redis.call('PEXPIREAT', KEYS[1], ARGV[5])
  redis.call('PEXPIREAT', KEYS[3], ARGV[5])
end
return {tonumber(score), tonumber(redis.call('HGET', KEYS[3], 'drawn')) or 0}
