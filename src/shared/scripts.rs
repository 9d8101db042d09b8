//! The Lua scripts of shared channel state (R17.1). Each runs atomically on the server and
//! publishes what it changed on `sy:ev` in the same step, so the stored state and the
//! notification can never disagree. Times are Redis's own (`TIME`), so replicas' clocks
//! need not agree. Each script touches one hash-tagged key.

use std::sync::LazyLock;

use redis::Script;

/// Write one field of a channel's hash and publish it.
///
/// `KEYS[1]` the channel hash; `ARGV`: origin, channel, op, field, value, ms.
/// Ops: `stamp` (a new disabled state: its version is Redis's time, or one past the stored
/// version when that is later — never a replica's clock — and the script returns it; issue
/// 29 item 4), `lww` (a disabled state pushed again, with the version Redis gave it; kept
/// only when newer), `until` (a cooldown
/// or mark `ms` from now; the later deadline is kept), `open` (a breaker open for `ms`
/// from now, unless it is already open longer; a new opening drops the probe lease and
/// the failure count), `close` (a breaker closed; lease and count dropped), `reset`
/// (breakers, leases, counts, cooldown and marks dropped), `fail` (one more failure of the
/// closed breaker whose count is `f:SCOPE`; `v` the threshold, `ms` the timeout: the count
/// is published, and the failure that reaches the threshold opens the breaker instead —
/// published as an opening; returns the count, or 0 when the breaker is open in Redis and
/// nothing was counted), `zero` (a closed breaker's count dropped after a success).
/// Returns 1 when something changed (and was published), 0 when a newer state was kept.
const PUT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h, op, f, v, ms = KEYS[1], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
if op == 'lww' then
  local cur = redis.call('HGET', h, f)
  if cur then
    local cat = tonumber(string.match(cur, '^(%-?%d+)|'))
    local nat = tonumber(string.match(v, '^(%-?%d+)|'))
    if cat and nat and cat >= nat then return 0 end
  end
  redis.call('HSET', h, f, v)
elseif op == 'stamp' then
  local ver = now
  local cur = redis.call('HGET', h, f)
  if cur then
    local cat = tonumber(string.match(cur, '^(%-?%d+)|'))
    if cat and cat >= ver then ver = cat + 1 end
  end
  v = ver .. (string.match(v, '^%-?%d+(|.*)$') or '|0|1|')
  redis.call('HSET', h, f, v)
  redis.call('PUBLISH', 'sy:ev', cjson.encode({o = ARGV[1], c = ARGV[2], f = f, v = v, ms = ms}))
  return ver
elseif op == 'until' then
  local cur = tonumber(redis.call('HGET', h, f) or '0') or 0
  if cur >= now + ms then return 0 end
  redis.call('HSET', h, f, now + ms)
elseif op == 'open' then
  local cur = redis.call('HGET', h, f)
  if cur then
    local o, d = string.match(cur, '^(%d+)|(%d+)$')
    if o and tonumber(o) + tonumber(d) >= now + ms then return 0 end
  end
  redis.call('HSET', h, f, now .. '|' .. ms)
  redis.call('HDEL', h, 'p:' .. string.sub(f, 3), 'f:' .. string.sub(f, 3))
elseif op == 'close' then
  if redis.call('HDEL', h, f) == 0 then return 0 end
  redis.call('HDEL', h, 'p:' .. string.sub(f, 3), 'f:' .. string.sub(f, 3))
  v = ''
elseif op == 'fail' then
  local scope = string.sub(f, 3)
  if redis.call('HEXISTS', h, 'b:' .. scope) == 1 then return 0 end
  local n = redis.call('HINCRBY', h, f, 1)
  if n >= (tonumber(v) or 1) then
    redis.call('HDEL', h, f, 'p:' .. scope)
    f = 'b:' .. scope
    redis.call('HSET', h, f, now .. '|' .. ms)
    v = 'open'
  else
    v = tostring(n)
    ms = 0
  end
  redis.call('PUBLISH', 'sy:ev', cjson.encode({o = ARGV[1], c = ARGV[2], f = f, v = v, ms = ms}))
  return n
elseif op == 'zero' then
  if redis.call('HDEL', h, f) == 0 then return 0 end
  v = '0'
elseif op == 'reset' then
  for _, k in ipairs(redis.call('HKEYS', h)) do
    local p = string.sub(k, 1, 2)
    if p == 'b:' or p == 'p:' or p == 'f:' or p == 'm:' or k == 'c' then redis.call('HDEL', h, k) end
  end
end
redis.call('PUBLISH', 'sy:ev', cjson.encode({o = ARGV[1], c = ARGV[2], f = f, v = v, ms = ms}))
return 1
"#;

/// Take (or renew) the probe lease of one breaker.
///
/// `KEYS[1]` the channel hash; `ARGV`: owner, scope, ttl ms. Returns `{1, ttl}` when the
/// caller holds the lease now, `{0, ms}` when another replica holds it for `ms` more, and
/// `{2, 0}` when the breaker is not open in Redis (closed elsewhere: no probe is needed).
const LEASE: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local h, owner, scope, ttl = KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[3])
if redis.call('HEXISTS', h, 'b:' .. scope) == 0 then return {2, 0} end
local cur = redis.call('HGET', h, 'p:' .. scope)
if cur then
  local who, untilv = string.match(cur, '^(.*)|(%d+)$')
  untilv = tonumber(untilv)
  if who ~= owner and untilv and untilv > now then return {0, untilv - now} end
end
redis.call('HSET', h, 'p:' .. scope, owner .. '|' .. (now + ttl))
return {1, ttl}
"#;

/// Add this replica's retry-budget counts to the deployment's window and return the
/// window's totals.
///
/// `KEYS[1]` the budget hash; `ARGV`: firsts, retries, window seconds. Returns
/// `{firsts, retries}` summed over the last `window` seconds (Redis time); older fields go.
const BUDGET: &str = r#"
local t = redis.call('TIME')
local s = tonumber(t[1])
local h, f, r, w = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if f > 0 then redis.call('HINCRBY', h, s .. ':f', f) end
if r > 0 then redis.call('HINCRBY', h, s .. ':r', r) end
local all = redis.call('HGETALL', h)
local sf, sr = 0, 0
for i = 1, #all, 2 do
  local sec, kind = string.match(all[i], '^(%d+):(%a)$')
  sec = tonumber(sec)
  if sec == nil or sec <= s - w then
    redis.call('HDEL', h, all[i])
  elseif kind == 'f' then sf = sf + tonumber(all[i + 1])
  else sr = sr + tonumber(all[i + 1]) end
end
redis.call('PEXPIRE', h, (w + 5) * 1000)
return {sf, sr}
"#;

pub static PUT_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(PUT));
pub static LEASE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(LEASE));
pub static BUDGET_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(BUDGET));
