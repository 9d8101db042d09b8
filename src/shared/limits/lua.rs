//! The rate-limit scripts (R15.1 on Redis): the same conservative sliding windows as
//! `limits::window` — `slots` granules, the oldest partly-overlapping one counted whole, a
//! unit leaving the window at `(granule + slots + 1) × granule_ms` — plus concurrency
//! leases in a sorted set scored by expiry, so a dead replica's permits expire.
//!
//! All of a subject's keys share one hash tag (`sy:lim:{c:alice}:…`): one script sees them
//! on one Redis Cluster slot. Time is Redis's `TIME`, unless a test passes its own clock.

use std::sync::LazyLock;

use redis::Script;

/// `KEYS`: rpm, rpd, tpm (hashes granule → count), cc (zset id → lease expiry), done (this
/// admission's reply, kept 10 s: a call repeated with the same id after a lost reply returns
/// it and counts nothing again).
/// `ARGV`: rpm, rpd, tpm, concurrency (0 = unlimited), tokens, lease ms, admission id,
/// now ms (0 = Redis time).
/// Returns `{admitted, kind (1 rpm, 2 rpd, 3 tpm, 4 concurrency), wait ms (-1 never),
/// used rpm, used rpd, used tpm, held, reset rpm, reset rpd, reset tpm, granule rpm,
/// granule rpd, granule tpm}` — used and held after an admission, before a refusal.
const ADMIT: &str = r#"
local done = redis.call('GET', KEYS[5])
if done then return cjson.decode(done) end
local now = tonumber(ARGV[8])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local geo = {{1000, 60}, {300000, 288}, {1000, 60}}
local lim = {tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])}
local cost = {1, 1, tonumber(ARGV[5])}
local conc, lease, id = tonumber(ARGV[4]), tonumber(ARGV[6]), ARGV[7]
local used, waits, resets, cur = {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {-1, -1, -1}
for i = 1, 3 do
  if lim[i] > 0 then
    local g, slots = geo[i][1], geo[i][2]
    local c = math.floor(now / g)
    cur[i] = c
    local gs = {}
    local h = redis.call('HGETALL', KEYS[i])
    for j = 1, #h, 2 do
      local s, n = tonumber(h[j]), tonumber(h[j + 1])
      if s == nil or s < c - slots then
        redis.call('HDEL', KEYS[i], h[j])
      elseif n > 0 then
        used[i] = used[i] + n
        gs[#gs + 1] = {s, n}
      end
    end
    table.sort(gs, function(a, b) return a[1] < b[1] end)
    if #gs > 0 then resets[i] = (gs[#gs][1] + slots + 1) * g - now end
    if cost[i] > lim[i] then
      waits[i] = -1
    elseif used[i] + cost[i] > lim[i] then
      local left, w = used[i], nil
      for _, e in ipairs(gs) do
        left = left - e[2]
        if left + cost[i] <= lim[i] then w = (e[1] + slots + 1) * g - now break end
      end
      waits[i] = w or ((c + slots + 1) * g - now)
    end
  end
end
local held = 0
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  held = redis.call('ZCARD', KEYS[4])
end
local kind, wait = 0, 0
for i = 1, 3 do
  if lim[i] > 0 and waits[i] ~= 0 then
    if waits[i] == -1 then
      if wait ~= -1 then kind, wait = i, -1 end
    elseif wait ~= -1 and (kind == 0 or waits[i] > wait) then
      kind, wait = i, waits[i]
    end
  end
end
if conc > 0 and held >= conc and wait ~= -1 and (kind == 0 or 1000 > wait) then
  kind, wait = 4, 1000
end
if kind ~= 0 then
  return {0, kind, wait, used[1], used[2], used[3], held, resets[1], resets[2], resets[3], -1, -1, -1}
end
for i = 1, 3 do
  if lim[i] > 0 then
    local g, slots = geo[i][1], geo[i][2]
    redis.call('HINCRBY', KEYS[i], cur[i], cost[i])
    redis.call('PEXPIRE', KEYS[i], (slots + 2) * g)
    used[i] = used[i] + cost[i]
    resets[i] = (cur[i] + slots + 1) * g - now
  end
end
if conc > 0 then
  redis.call('ZADD', KEYS[4], now + lease, id)
  redis.call('PEXPIRE', KEYS[4], lease * 2)
  held = held + 1
end
local reply = {1, 0, 0, used[1], used[2], used[3], held, resets[1], resets[2], resets[3], cur[1], cur[2], cur[3]}
redis.call('SET', KEYS[5], cjson.encode(reply), 'PX', 10000)
return reply
"#;

/// `KEYS`: rpm, rpd, tpm, cc. `ARGV`: op (`settle` | `cancel` | `drop`), admission id,
/// granule rpm, granule rpd, granule tpm (-1 = not counted), reserved tokens, actual
/// tokens, now ms (0 = Redis time). `settle` gives back the unused reservation to its
/// granule (or counts the overrun now); `cancel` gives back the request and the
/// reservation; every op ends the concurrency lease. A granule that left the window has
/// nothing to give back.
const RELEASE: &str = r#"
local now = tonumber(ARGV[8])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local geo = {{1000, 60}, {300000, 288}, {1000, 60}}
local op, id = ARGV[1], ARGV[2]
local gran = {tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])}
local tokens, actual = tonumber(ARGV[6]), tonumber(ARGV[7])
local function give_back(i, amount)
  local g, slots = geo[i][1], geo[i][2]
  if gran[i] < 0 or amount <= 0 or gran[i] < math.floor(now / g) - slots then return end
  local have = tonumber(redis.call('HGET', KEYS[i], gran[i]) or '0') or 0
  local take = math.min(amount, have)
  if take > 0 then redis.call('HINCRBY', KEYS[i], gran[i], -take) end
end
if op == 'settle' and gran[3] >= 0 then
  if actual < tokens then
    give_back(3, tokens - actual)
  elseif actual > tokens then
    local c = math.floor(now / geo[3][1])
    redis.call('HINCRBY', KEYS[3], c, actual - tokens)
    redis.call('PEXPIRE', KEYS[3], (geo[3][2] + 2) * geo[3][1])
  end
elseif op == 'cancel' then
  give_back(1, 1)
  give_back(2, 1)
  give_back(3, tokens)
end
redis.call('ZREM', KEYS[4], id)
return 1
"#;

/// `KEYS`: cc. `ARGV`: lease ms, now ms (0 = Redis time), ids… — extend live leases.
const RENEW: &str = r#"
local now = tonumber(ARGV[2])
if now == 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local lease = tonumber(ARGV[1])
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], lease * 2)
return 1
"#;

pub static ADMIT_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(ADMIT));
pub static RELEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RELEASE));
pub static RENEW_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(RENEW));
