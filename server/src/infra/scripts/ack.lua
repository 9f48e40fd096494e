-- The relay's acknowledgement of journal entries the broker confirmed: XACK them, then trim the
-- journal below the oldest entry still unconfirmed (pending in the group), or, when none is, up
-- to the last entry handed out. Trimming from the head frees whole nodes of the stream at once;
-- deleting each entry (XDEL) cost more Redis time than the rest of the relay together.
-- KEYS: 1 journal
-- ARGV: 1 group, 2.. the entry ids
local acked = redis.call('XACK', KEYS[1], ARGV[1], unpack(ARGV, 2))
local pending = redis.call('XPENDING', KEYS[1], ARGV[1])
local below
if pending[1] > 0 then
  below = pending[2]
else
  for _, group in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
    local name, last
    for i = 1, #group, 2 do
      if group[i] == 'name' then
        name = group[i + 1]
      elseif group[i] == 'last-delivered-id' then
        last = group[i + 1]
      end
    end
    if name == ARGV[1] and last then
      local ms, seq = string.match(last, '^(%d+)%-(%d+)$')
      if ms then
        below = ms .. '-' .. string.format('%d', tonumber(seq) + 1)
      end
    end
  end
end
if below then
  redis.call('XTRIM', KEYS[1], 'MINID', below)
end
return acked
