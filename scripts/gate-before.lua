-- The gate script as it was before the lean-down (issue "Scale-out I"), kept only so that
-- `make bench` can measure both under redis-benchmark in the same run. The server never loads it.

-- The buy decision, atomically, in one round trip. Every argument is checked before the first
-- write: a script cannot roll back.
--
-- KEYS: 1 stock, 2 meta, 3 holders, 4 journal, 5 token status, 6 captcha answer,
--       7 idempotency record, 8/9/10 user bucket/strikes/block, 11/12/13 address bucket/strikes/block
-- ARGV: 1 user id, 2 quantity, 3 token, 4 now (ms), 5 captcha required (0/1), 6 captcha answer,
--       7 idempotency key given (0/1), 8/9 user bucket capacity / refill per s,
--       10/11 address bucket capacity / refill per s, 12 strikes before a block, 13 block (ms),
--       14 token status ttl (s), 15 idempotency ttl (s), 16 activity id, 17 per-user limit
-- Returns {code, detail}.

local qty = tonumber(ARGV[2])
local now = tonumber(ARGV[4])
local nums = {}
for i = 8, 17 do
  if i ~= 16 then
    nums[i] = tonumber(ARGV[i])
    if not nums[i] then return {'bad_args', tostring(i)} end
  end
end
if not qty or qty < 1 or not now or ARGV[1] == '' or ARGV[3] == '' or ARGV[16] == '' then
  return {'bad_args', ''}
end

-- A retry of a request that was already granted gets the same token back, and takes nothing.
if ARGV[7] == '1' then
  local previous = redis.call('GET', KEYS[7])
  if previous then return {'ok', previous} end
end

-- Sold out: said before the buckets, so it costs no token and no strike (a crowd that keeps
-- asking after the end hears "sold out", not "rate limited", and every instance's flag is set again).
local left = tonumber(redis.call('GET', KEYS[1]))
if left and left <= 0 then return {'sold_out', '0'} end

-- Blocked clients (user or address) are refused outright.
for _, k in ipairs({KEYS[10], KEYS[13]}) do
  local ttl = redis.call('PTTL', k)
  if ttl > 0 then return {'blocked', tostring(ttl)} end
end

-- Token buckets; a client that keeps hammering past its bucket collects strikes, then a block.
local function take(bucket, strikes, block, cap, refill)
  local b = redis.call('HMGET', bucket, 'tokens', 'ts')
  local tokens = tonumber(b[1]) or cap
  local ts = tonumber(b[2]) or now
  tokens = math.min(cap, tokens + math.max(0, now - ts) * refill / 1000)
  local idle_ms = math.ceil(cap * 1000 / refill) + 1000
  if tokens < 1 then
    redis.call('HSET', bucket, 'tokens', tostring(tokens), 'ts', tostring(now))
    redis.call('PEXPIRE', bucket, idle_ms)
    local n = redis.call('INCR', strikes)
    if n == 1 then redis.call('PEXPIRE', strikes, nums[13]) end
    if n >= nums[12] then
      redis.call('SET', block, '1', 'PX', nums[13])
      redis.call('DEL', strikes)
      return {'blocked', tostring(nums[13])}
    end
    return {'rate_limited', tostring(math.ceil((1 - tokens) * 1000 / refill))}
  end
  redis.call('HSET', bucket, 'tokens', tostring(tokens - 1), 'ts', tostring(now))
  redis.call('PEXPIRE', bucket, idle_ms)
  return nil
end
local refused = take(KEYS[8], KEYS[9], KEYS[10], nums[8], nums[9])
  or take(KEYS[11], KEYS[12], KEYS[13], nums[10], nums[11])
if refused then return refused end

if redis.call('HGET', KEYS[2], 'paused') == '1' then return {'paused', ''} end

-- A captcha answer is good once: it is consumed whether right or wrong.
if ARGV[5] == '1' then
  local expected = redis.call('GET', KEYS[6])
  if expected then redis.call('DEL', KEYS[6]) end
  if not expected or string.lower(expected) ~= string.lower(ARGV[6]) then
    return {'captcha_invalid', ''}
  end
end

local held = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if held + qty > nums[17] then return {'limit_reached', ''} end

-- Nothing above wrote the stock: the figure read at the top still holds.
local stock = left
if not stock then return {'not_warm', ''} end
if stock < qty then return {'sold_out', tostring(stock)} end

redis.call('DECRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[3], ARGV[1], qty)
redis.call('HSET', KEYS[5], 'status', 'queued', 'activity_id', ARGV[16], 'user_id', ARGV[1], 'quantity', qty)
redis.call('EXPIRE', KEYS[5], nums[14])
redis.call('XADD', KEYS[4], '*', 'token', ARGV[3], 'activity_id', ARGV[16], 'user_id', ARGV[1],
  'quantity', qty, 'reserved_ms', now)
if ARGV[7] == '1' then redis.call('SET', KEYS[7], ARGV[3], 'EX', nums[15]) end
return {'ok', ARGV[3]}
