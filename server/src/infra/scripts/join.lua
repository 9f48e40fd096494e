-- Joins a sale's waiting room, or keeps the place already held (several tabs, reloads, a bot's
-- hundred joins: one user, one place). Before the start (by this Redis's clock, the one every
-- instance shares) the place depends on the sale's method: `draw_then_order` draws it (the score
-- the caller computed from the sale's secret seed and the join receipt, kept here with the
-- receipt), so arriving early gives no edge; the other methods number arrivals. After the start
-- a place is 2^50 + the arrival number, behind everyone who was there on time. With `again` a
-- user whose admission was used or lapsed queues once more, at the back.
-- `pass_through`: an arrival after the start whom nobody waits ahead of is admitted at once
-- while the admission rate has a token and the window room (what `admit.lua` would do a moment
-- later), and admission is not held back.
-- A shopper whose bot check failed `bound` times on the sale (0: no bound) takes no place: the
-- score is -1, and a place held is dropped unless it was drawn and the drawing is over (a drawn
-- place never moves once the start has published the seed).
-- An arrival after the start is timed (`joined`), so that its wait is known at its turn.
-- A drawn place keeps its entry's groups (`groups`: comma-separated network hashes, '' when the
-- sale groups none), which the draw counts at the start (`domain/crowd.rs`).
-- KEYS: line, in, meta, suspects, receipts, unclaimed, joined, groups. ARGV: user, start_ms, drawn
-- score, again (0|1), expire_at_ms, bound, receipt, method, rate (0: none now), claim_ms, groups.
-- Returns {the place's score, places numbered before the start, the receipt of a drawn place or
-- ''}: a place after the start is the `numbered + (score - 2^50)`-th in admission order.
local AFTER_START = 1125899906842624
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local user = ARGV[1]
local before = now < tonumber(ARGV[2])
local bound = tonumber(ARGV[6])
local function drawn()
  return tonumber(redis.call('HGET', KEYS[3], 'drawn')) or 0
end
if bound > 0 and (tonumber(redis.call('HGET', KEYS[4], user)) or 0) >= bound then
  local held = redis.call('ZSCORE', KEYS[1], user)
  if held and (before or tonumber(held) >= AFTER_START) then
    redis.call('ZREM', KEYS[1], user)
    if before then
      redis.call('HDEL', KEYS[5], user)
      redis.call('HDEL', KEYS[8], user)
      redis.call('HINCRBY', KEYS[3], 'drawn', -1)
    end
  end
  return {-1, drawn(), ''}
end
local score = redis.call('ZSCORE', KEYS[1], user)
if score and ARGV[4] == '1' then
  local cursor = redis.call('HGET', KEYS[3], 'cursor')
  if cursor and tonumber(score) <= tonumber(cursor) and not redis.call('ZSCORE', KEYS[2], user) then
    score = false
  end
end
if not score then
  if before then
    if ARGV[8] == 'draw_then_order' then
      score = tonumber(ARGV[3])
      -- Places are distinct, so that the admission cursor never skips a tie.
      while redis.call('ZCOUNT', KEYS[1], score, score) > 0 do
        score = score + 1
      end
      redis.call('HSET', KEYS[5], user, ARGV[7])
      redis.call('PEXPIREAT', KEYS[5], ARGV[5])
      if ARGV[11] ~= '' then
        redis.call('HSET', KEYS[8], user, ARGV[11])
        redis.call('PEXPIREAT', KEYS[8], ARGV[5])
      end
    else
      score = redis.call('HINCRBY', KEYS[3], 'early', 1)
    end
    redis.call('HINCRBY', KEYS[3], 'drawn', 1)
  else
    score = AFTER_START + redis.call('HINCRBY', KEYS[3], 'seq', 1)
    redis.call('HSET', KEYS[7], user, now)
    redis.call('PEXPIREAT', KEYS[7], ARGV[5])
  end
  redis.call('ZADD', KEYS[1], score, user)
  redis.call('PEXPIREAT', KEYS[1], ARGV[5])
  redis.call('PEXPIREAT', KEYS[3], ARGV[5])
  if not before and ARGV[8] == 'pass_through' then
    local m = redis.call('HMGET', KEYS[3], 'last', 'carry', 'cursor', 'stock', 'held')
    local rate = tonumber(ARGV[9])
    local from = m[3] and ('(' .. m[3]) or '-inf'
    local last = tonumber(m[1]) or tonumber(ARGV[2])
    local tokens = math.min((tonumber(m[2]) or 0) + math.max(0, now - last) * rate / 1000, rate)
    local window = math.ceil((tonumber(m[4]) or 0) * 2)
    if rate > 0 and (m[5] or '') == '' and tokens >= 1
        and redis.call('ZCOUNT', KEYS[1], from, '(' .. score) == 0
        and redis.call('ZCARD', KEYS[2]) < window then
      local deadline = now + tonumber(ARGV[10])
      redis.call('ZADD', KEYS[2], deadline, user)
      redis.call('ZADD', KEYS[6], deadline, user)
      redis.call('PEXPIREAT', KEYS[2], ARGV[5])
      redis.call('PEXPIREAT', KEYS[6], ARGV[5])
      redis.call('HSET', KEYS[3], 'cursor', score, 'last', now, 'carry', tokens - 1)
      redis.call('HINCRBY', KEYS[3], 'admitted', 1)
      redis.call('HINCRBY', KEYS[3], 'passed_through', 1)
      if tonumber(redis.call('HGET', KEYS[3], 'sec')) == math.floor(now / 1000) then
        redis.call('HINCRBY', KEYS[3], 'sec_n', 1)
      end
    end
  end
end
return {tonumber(score), drawn(), redis.call('HGET', KEYS[5], user) or ''}
