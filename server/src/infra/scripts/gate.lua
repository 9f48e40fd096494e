-- The buy decisions of one stock shard for a batch of buys (one or many), atomically, in one
-- round trip. Each buy is decided exactly as if it came alone, in the order given: what one buy
-- writes, the next one reads. Every key below shares one hash tag, so on a Redis Cluster this
-- runs on one master. Every argument is checked before the first write: a script cannot roll back.
--
-- KEYS: 1 stock, 2 meta, 3 holders, 4 journal, 5 unsettled tokens, 6/7/8 the rate buckets of
--       the generations before the batch's, the batch's, and after it, 9 the unsettled tokens'
--       owners, 10 the Idempotency-Keys' first answers (a hash, field 'user:key'); then three per
--       buy, the i-th from 10 + 3(i - 1): +1 token record, +2 the release before's record of its
--       Idempotency-Key (read and written only with ARGV[14] = 1), +3 the spent mark of a proof of
--       work's challenge
--       (the journal takes one entry per call: `activity_id`, and `reservations`, a line
--       'token user quantity reserved_ms[ traceparent]' per reservation granted, in order)
-- ARGV: 1/2 user bucket capacity / refill per s, 3/4 address bucket capacity / refill per s,
--       5 strikes before a block, 6 strike window and block (ms), 7 token status ttl (s),
--       8 idempotency ttl (s), 9 activity id, 10 per-user limit, 11 shards of the sale,
--       12 a generation of rate buckets' ttl (ms), 13 a record per granted token too (1, for
--       the polls of the release before during a rollout) or not (0), 14 the release before's
--       records of Idempotency-Keys too (1: read where the hash has no answer, and written beside
--       it, during a rollout) or not (0); then ten per buy, the i-th from 14 + 10(i - 1):
--       +1 user id, +2 quantity, +3 token, +4 now (ms),
--       +5 bot check (0 not asked, 1 captcha right, 2 wrong, 3 proof of work verified by the
--       caller: good if its challenge is unspent), +6 its Idempotency-Key ('' when none),
--       +7 the challenge's expiry (ms), +8 the buy's W3C traceparent ('' when not traced: its
--       journal line then ends with the reserved time), +9/+10 the names of its user's and its
--       address's rate buckets
-- Returns {code, detail} per buy, flat: ok + token, borrow + 'token quantity', sold_out,
-- rate_limited + ms, blocked + 'user ms' or 'address ms' (the caller blocks that client
-- everywhere), paused, captcha_invalid, limit_reached, not_warm, bad_args.
--
-- `borrow`: this shard is out of units but others may have some. The user's units are held
-- here (the per-user limit has one home) and the token is `pending` until the caller got the
-- units from another shard (`lend.lua`) and settled (`settle.lua`). The quantity borrowed is the
-- one first asked for, whatever a keyed retry asks: it is what the holders count holds.
--
-- Lean by design: the shard's stock and pause switch are read once per batch, the holders'
-- counts by one HMGET, and each is written once at its end (one DECRBY, one HSET); the rate
-- buckets ('tokens ts strikes since', a field per client) by one HMGET per generation and one
-- HSET (and PEXPIRE) into the newest generation each bucket is in, kept out of the AOF and the
-- replicas (a failover forgets them: docs/reliability.md); the journal takes one XADD, the
-- unsettled tokens one ZADD and their owners one HSET (and EXPIRE) per batch, the keyed buys'
-- first answers one HMGET and one HSET (and EXPIRE) of the shard's hash per batch. A granted token
-- has no record of its own: its place in the unsettled set says `queued`, its owners entry
-- whose it is (a borrowing's token has one, `pending`, until `settle.lua` ends it).
--
-- The buckets' generations: a shard's buckets live in one hash per generation of time, long
-- enough that a bucket untouched for one is as good as new (full, no strikes). A batch reads the
-- generations around its own (the one before, its own, the one after: another instance's clock
-- or batch may be ahead) and takes each bucket from the newest it is in; it writes a bucket back
-- there, or into its own generation if that is newer. So each bucket has one home at a time, as
-- with a key of its own, and the hashes of generations past expire whole.

local COMMON, PER_BUY, FIRST_KEYS, KEYS_PER_BUY = 14, 10, 10, 3
local count = (#ARGV - COMMON) / PER_BUY
if count < 1 or count ~= math.floor(count) or #KEYS ~= FIRST_KEYS + KEYS_PER_BUY * count then
  return redis.error_reply('gate: ' .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
local n = {}
for i = 1, COMMON do
  if i ~= 9 then n[i] = tonumber(ARGV[i]) end
end
local common_bad = nil
for i = 1, COMMON do
  if i ~= 9 and not n[i] then common_bad = tostring(i) end
end
if ARGV[9] == '' then common_bad = '9' end
if n[12] and n[12] < 1 then common_bad = '12' end
if n[13] ~= 0 and n[13] ~= 1 then common_bad = '13' end
if n[14] ~= 0 and n[14] ~= 1 then common_bad = '14' end

local left = tonumber(redis.call('GET', KEYS[1]))
local left_at_start = left
local shards = n[11]
local paused = nil
local held, held_change, holders = {}, {}, {}
local firsts, firsts_written, strings_read = {}, {}, {}
local buckets, bucket_order = {}, {}
local unsettled = {}
local owners = {}
local granted = {}

-- The rate buckets of the whole batch, one read per generation, unless no buy can get that far
-- (a sold-out shard of a sale with one shard answers before the buckets).
if not (shards == 1 and left and left <= 0) and not common_bad then
  local names = {}
  for i = 1, count do
    local a = COMMON + PER_BUY * (i - 1)
    for _, who in ipairs({ARGV[a + 9], ARGV[a + 10]}) do
      if buckets[who] == nil then
        buckets[who] = {}
        names[#names + 1] = who
      end
    end
  end
  for generation = 6, 8 do
    local values = redis.call('HMGET', KEYS[generation], unpack(names))
    for j, who in ipairs(names) do
      if values[j] then
        local t, ts, st, since = string.match(values[j], '^(%S+) (%S+) (%S+) (%S+)$')
        buckets[who] = {tonumber(t), tonumber(ts), tonumber(st), tonumber(since), home = generation}
      end
    end
  end
end

-- The first answers of the batch's Idempotency-Keys in one read (false: none yet). Keys are
-- checked by the caller: [A-Za-z0-9_-], so 'user:key' names one pair.
if not common_bad then
  local fields = {}
  for i = 1, count do
    local a = COMMON + PER_BUY * (i - 1)
    if ARGV[a + 6] ~= '' then
      local field = ARGV[a + 1] .. ':' .. ARGV[a + 6]
      if firsts[field] == nil then
        firsts[field] = false
        fields[#fields + 1] = field
      end
    end
  end
  if #fields > 0 then
    local values = redis.call('HMGET', KEYS[10], unpack(fields))
    for j, field in ipairs(fields) do
      if values[j] then firsts[field] = values[j] end
    end
  end
end

-- A key's first answer: the hash's, else (during a rollout) the release before's record of it.
local function first_answer(field, before)
  if not firsts[field] and n[14] == 1 and not strings_read[field] then
    strings_read[field] = true
    firsts[field] = redis.call('GET', before)
  end
  return firsts[field]
end

local function keep_first(field, before, value)
  firsts[field] = value
  firsts_written[#firsts_written + 1] = field
  firsts_written[#firsts_written + 1] = value
  if n[14] == 1 then redis.call('SET', before, value, 'EX', n[8]) end
end

-- The holders' counts of the whole batch in one read, when a buy can get as far as them.
if not (shards == 1 and left and left <= 0) and not common_bad then
  for i = 1, count do
    local user = ARGV[COMMON + PER_BUY * (i - 1) + 1]
    if held[user] == nil then
      held[user] = false
      holders[#holders + 1] = user
    end
  end
  local counts = redis.call('HMGET', KEYS[3], unpack(holders))
  for j, user in ipairs(holders) do held[user] = tonumber(counts[j] or '0') end
end

local function hold(user, qty)
  held[user] = held[user] + qty
  held_change[user] = (held_change[user] or 0) + qty
end

-- Token buckets; a client that keeps hammering past its bucket collects strikes, and after
-- enough of them within the window the caller blocks it everywhere.
local function take(name, who, cap, refill, now)
  local b = buckets[name]
  local tokens = b[1] or cap
  local ts = b[2] or now
  local strikes = b[3] or 0
  local since = b[4] or now
  tokens = math.min(cap, tokens + math.max(0, now - ts) * refill / 1000)
  if now - since > n[6] then strikes, since = 0, now end
  local refused = nil
  if tokens < 1 then
    strikes = strikes + 1
    if strikes >= n[5] then
      strikes, since = 0, now
      refused = {'blocked', who .. ' ' .. tostring(n[6])}
    else
      refused = {'rate_limited', tostring(math.ceil((1 - tokens) * 1000 / refill))}
    end
  else
    tokens = tokens - 1
  end
  if not b.touched then
    b.touched = true
    bucket_order[#bucket_order + 1] = name
  end
  -- Kept as the string it is written as, so that the next buy of this batch reads what the next
  -- batch would.
  b[1], b[2], b[3], b[4] = tonumber(tostring(tokens)), now, strikes, since
  return refused
end

-- One buy: its keys from `k` on, its arguments from `a` on.
local function decide(k, a)
  local user, qty, token, now = ARGV[a + 1], tonumber(ARGV[a + 2]), ARGV[a + 3], tonumber(ARGV[a + 4])
  local check, keyed = ARGV[a + 5], ARGV[a + 6] ~= ''
  local field = user .. ':' .. ARGV[a + 6]
  if common_bad then return {'bad_args', common_bad} end
  if not qty or qty < 1 or not now or not string.match(user, '^%d+$') or not string.match(token, '^%S+$')
    or ARGV[a + 9] == '' or ARGV[a + 10] == '' then
    return {'bad_args', ''}
  end

  -- A retry of a request that was already granted gets the same token back and takes nothing;
  -- one whose units are still being borrowed resumes the borrowing.
  if keyed then
    local previous = first_answer(field, KEYS[k + 2])
    if previous then
      if string.sub(previous, 1, 8) == 'pending:' then
        -- 'pending:<token>:<quantity>'
        local first, held_qty = string.match(previous, '^pending:([^:]+):(%d+)$')
        if not first then return {'bad_args', 'pending record'} end
        return {'borrow', first .. ' ' .. held_qty}
      end
      return {'ok', previous}
    end
  end

  -- Sold out (one shard): said before the buckets, so it costs no token and no strike.
  if shards == 1 and left and left <= 0 then return {'sold_out', '0'} end

  local refused = take(ARGV[a + 9], 'user', n[1], n[2], now)
    or take(ARGV[a + 10], 'address', n[3], n[4], now)
  if refused then return refused end

  if paused == nil then paused = redis.call('HGET', KEYS[2], 'paused') == '1' end
  if paused then return {'paused', ''} end
  if check == '2' then return {'captcha_invalid', ''} end
  -- A proof of work is good once: its challenge is marked spent until it expires anyway.
  if check == '3' then
    local expires = tonumber(ARGV[a + 7])
    if not expires or expires <= now then return {'captcha_invalid', ''} end
    if not redis.call('SET', KEYS[k + 3], '1', 'NX', 'PX', expires - now) then
      return {'captcha_invalid', ''}
    end
  end

  if held[user] + qty > n[10] then return {'limit_reached', ''} end
  if not left then return {'not_warm', ''} end
  if left < qty and shards == 1 then return {'sold_out', tostring(left)} end

  hold(user, qty)
  if left >= qty then
    left = left - qty
    if n[13] == 1 then
      redis.call('HSET', KEYS[k + 1], 'status', 'queued', 'activity_id', ARGV[9], 'user_id', user, 'quantity', qty)
      redis.call('EXPIRE', KEYS[k + 1], n[7])
    end
    owners[#owners + 1] = token
    owners[#owners + 1] = user .. ' ' .. qty
    local line = string.format('%s %s %d %d', token, user, qty, now)
    if ARGV[a + 8] ~= '' then line = line .. ' ' .. ARGV[a + 8] end
    granted[#granted + 1] = line
    unsettled[#unsettled + 1] = now
    unsettled[#unsettled + 1] = token
    if keyed then keep_first(field, KEYS[k + 2], token) end
    return {'ok', token}
  end
  redis.call('HSET', KEYS[k + 1], 'status', 'pending', 'activity_id', ARGV[9], 'user_id', user, 'quantity', qty)
  redis.call('EXPIRE', KEYS[k + 1], n[7])
  if keyed then keep_first(field, KEYS[k + 2], 'pending:' .. token .. ':' .. qty) end
  return {'borrow', token .. ' ' .. qty}
end

local answers = {}
for i = 1, count do
  local answer = decide(FIRST_KEYS + KEYS_PER_BUY * (i - 1), COMMON + PER_BUY * (i - 1))
  answers[#answers + 1] = answer[1]
  answers[#answers + 1] = answer[2]
end

-- What the batch changed, written once.
if left ~= left_at_start then redis.call('DECRBY', KEYS[1], left_at_start - left) end
local counts = {}
for _, user in ipairs(holders) do
  if held_change[user] then
    counts[#counts + 1] = user
    counts[#counts + 1] = tostring(held[user])
  end
end
if #counts > 0 then redis.call('HSET', KEYS[3], unpack(counts)) end
-- A bucket lost at a failover or a restart starts full again: no promise rests on it.
redis.set_repl(redis.REPL_NONE)
local into = {}
for _, name in ipairs(bucket_order) do
  local b = buckets[name]
  local home = math.max(b.home or 7, 7)
  into[home] = into[home] or {}
  local fields = into[home]
  fields[#fields + 1] = name
  fields[#fields + 1] = tostring(b[1]) .. ' ' .. tostring(b[2]) .. ' ' .. tostring(b[3]) .. ' ' .. tostring(b[4])
end
for home = 7, 8 do
  if into[home] then
    redis.call('HSET', KEYS[home], unpack(into[home]))
    redis.call('PEXPIRE', KEYS[home], n[12])
  end
end
redis.set_repl(redis.REPL_ALL)
if #granted > 0 then
  redis.call('XADD', KEYS[4], '*', 'activity_id', ARGV[9], 'reservations', table.concat(granted, '\n'))
end
if #unsettled > 0 then
  redis.call('ZADD', KEYS[5], unpack(unsettled))
  redis.call('HSET', KEYS[9], unpack(owners))
  redis.call('EXPIRE', KEYS[9], n[7])
end
if #firsts_written > 0 then
  redis.call('HSET', KEYS[10], unpack(firsts_written))
  redis.call('EXPIRE', KEYS[10], n[8])
end
return answers
