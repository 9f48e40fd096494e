-- The buy decision on the buyer's home shard, atomically, in one round trip. Every key below
-- shares one hash tag, so on a Redis Cluster this runs on one master. Every argument is checked
-- before the first write: a script cannot roll back.
--
-- KEYS: 1 stock, 2 meta, 3 holders, 4 journal, 5 token status, 6 idempotency record,
--       7 user rate (bucket and strikes), 8 address rate, 9 unsettled tokens,
--       10 the spent mark of a proof of work's challenge
-- ARGV: 1 user id, 2 quantity, 3 token, 4 now (ms), 5 bot check (0 not asked, 1 captcha right,
--       2 wrong, 3 proof of work verified by the caller: good if its challenge is unspent),
--       6 idempotency key given (0/1), 7/8 user bucket capacity / refill per s,
--       9/10 address bucket capacity / refill per s, 11 strikes before a block,
--       12 strike window and block (ms), 13 token status ttl (s), 14 idempotency ttl (s),
--       15 activity id, 16 per-user limit, 17 shards of the sale, 18 the challenge's expiry (ms)
-- Returns {code, detail}: ok + token, borrow + 'token quantity', sold_out, rate_limited + ms, blocked + 'user ms' or
-- 'address ms' (the caller blocks that client everywhere), paused,
-- captcha_invalid, limit_reached, not_warm, bad_args.
--
-- `borrow`: this shard is out of units but others may have some. The user's units are held
-- here (the per-user limit has one home) and the token is `pending` until the caller got the
-- units from another shard (`lend.lua`) and settled (`settle.lua`). The quantity borrowed is the
-- one first asked for, whatever a keyed retry asks: it is what the holders count holds.

local qty = tonumber(ARGV[2])
local now = tonumber(ARGV[4])
local n = {}
for i = 7, 17 do
  if i ~= 15 then
    n[i] = tonumber(ARGV[i])
    if not n[i] then return {'bad_args', tostring(i)} end
  end
end
if not qty or qty < 1 or not now or ARGV[1] == '' or ARGV[3] == '' or ARGV[15] == '' then
  return {'bad_args', ''}
end

-- A retry of a request that was already granted gets the same token back and takes nothing;
-- one whose units are still being borrowed resumes the borrowing.
if ARGV[6] == '1' then
  local previous = redis.call('GET', KEYS[6])
  if previous then
    if string.sub(previous, 1, 8) == 'pending:' then
      -- 'pending:<token>:<quantity>'
      local token, held_qty = string.match(previous, '^pending:([^:]+):(%d+)$')
      if not token then return {'bad_args', 'pending record'} end
      return {'borrow', token .. ' ' .. held_qty}
    end
    return {'ok', previous}
  end
end

-- Sold out (one shard): said before the buckets, so it costs no token and no strike.
local left = tonumber(redis.call('GET', KEYS[1]))
if n[17] == 1 and left and left <= 0 then return {'sold_out', '0'} end

-- Token buckets; a client that keeps hammering past its bucket collects strikes, and after
-- enough of them within the window the caller blocks it everywhere. One hash per client.
local function take(key, who, cap, refill)
  local b = redis.call('HMGET', key, 'tokens', 'ts', 'strikes', 'since')
  local tokens = tonumber(b[1]) or cap
  local ts = tonumber(b[2]) or now
  local strikes = tonumber(b[3]) or 0
  local since = tonumber(b[4]) or now
  tokens = math.min(cap, tokens + math.max(0, now - ts) * refill / 1000)
  if now - since > n[12] then strikes, since = 0, now end
  local refused = nil
  if tokens < 1 then
    strikes = strikes + 1
    if strikes >= n[11] then
      strikes, since = 0, now
      refused = {'blocked', who .. ' ' .. tostring(n[12])}
    else
      refused = {'rate_limited', tostring(math.ceil((1 - tokens) * 1000 / refill))}
    end
  else
    tokens = tokens - 1
  end
  redis.call('HSET', key, 'tokens', tostring(tokens), 'ts', tostring(now), 'strikes', strikes, 'since', since)
  redis.call('PEXPIRE', key, math.max(math.ceil(cap * 1000 / refill) + 1000, n[12]))
  return refused
end
local refused = take(KEYS[7], 'user', n[7], n[8]) or take(KEYS[8], 'address', n[9], n[10])
if refused then return refused end

if redis.call('HGET', KEYS[2], 'paused') == '1' then return {'paused', ''} end
if ARGV[5] == '2' then return {'captcha_invalid', ''} end
-- A proof of work is good once: its challenge is marked spent until it expires anyway.
if ARGV[5] == '3' then
  local expires = tonumber(ARGV[18])
  if not expires or expires <= now then return {'captcha_invalid', ''} end
  if not redis.call('SET', KEYS[10], '1', 'NX', 'PX', expires - now) then
    return {'captcha_invalid', ''}
  end
end

local held = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
if held + qty > n[16] then return {'limit_reached', ''} end

-- Nothing above wrote the stock: the figure read at the top still holds.
if not left then return {'not_warm', ''} end
if left < qty and n[17] == 1 then return {'sold_out', tostring(left)} end

redis.call('HINCRBY', KEYS[3], ARGV[1], qty)
if left >= qty then
  redis.call('DECRBY', KEYS[1], qty)
  redis.call('HSET', KEYS[5], 'status', 'queued', 'activity_id', ARGV[15], 'user_id', ARGV[1], 'quantity', qty)
  redis.call('EXPIRE', KEYS[5], n[13])
  redis.call('XADD', KEYS[4], '*', 'token', ARGV[3], 'activity_id', ARGV[15], 'user_id', ARGV[1],
    'quantity', qty, 'reserved_ms', now)
  redis.call('ZADD', KEYS[9], now, ARGV[3])
  if ARGV[6] == '1' then redis.call('SET', KEYS[6], ARGV[3], 'EX', n[14]) end
  return {'ok', ARGV[3]}
end
redis.call('HSET', KEYS[5], 'status', 'pending', 'activity_id', ARGV[15], 'user_id', ARGV[1], 'quantity', qty)
redis.call('EXPIRE', KEYS[5], n[13])
if ARGV[6] == '1' then redis.call('SET', KEYS[6], 'pending:' .. ARGV[3] .. ':' .. qty, 'EX', n[14]) end
return {'borrow', ARGV[3] .. ' ' .. qty}
