-- Before a replication wait (`infra/replication.rs`): which of the writes to be confirmed this
-- node holds, and a mark written on the waiting connection so that its `WAIT` covers every write
-- made to the node before it. A write absent here went to another node (the slot's master as a
-- client saw it then): this node's replicas cannot confirm it. Every key shares one hash tag.
--
-- KEYS: 1 the mark, then one key per write
-- ARGV: 1 the mark's ttl (ms; 0 writes no mark), then three per write, the i-th from
--       2 + 3(i - 1): +0 kind, +1/+2 what to find:
--       'member' a sorted set's member (+1), 'field' a hash's field (+1) holding +2,
--       'value' a string key holding +1, 'entry' a stream's entry of id +1 with a field
--       holding +2 (a deposed master and the replica promoted in its place may each write an
--       entry of the same id: only the content tells them apart; '' asks for the id alone)
-- Returns 1 or 0 per write: held here or not.

local ttl = tonumber(ARGV[1])
if not ttl or ttl < 0 or #ARGV ~= 1 + 3 * (#KEYS - 1) then
  return redis.error_reply('witness: ' .. #KEYS .. ' keys and ' .. #ARGV .. ' arguments')
end
local held = {}
for i = 2, #KEYS do
  local a = 2 + 3 * (i - 2)
  local kind, what, value = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local found = false
  if kind == 'member' then
    found = redis.call('ZSCORE', KEYS[i], what) ~= false
  elseif kind == 'field' then
    found = redis.call('HGET', KEYS[i], what) == value
  elseif kind == 'value' then
    found = redis.call('GET', KEYS[i]) == what
  elseif kind == 'entry' then
    local entry = redis.call('XRANGE', KEYS[i], what, what)[1]
    if entry and value == '' then
      found = true
    elseif entry then
      local fields = entry[2]
      for f = 2, #fields, 2 do
        if fields[f] == value then found = true end
      end
    end
  else
    return redis.error_reply('witness: kind ' .. kind)
  end
  held[#held + 1] = found and 1 or 0
end
if ttl > 0 then redis.call('SET', KEYS[1], '1', 'PX', ttl) end
return held
