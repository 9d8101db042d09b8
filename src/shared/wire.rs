//! The Redis layout of shared live state and the change messages (R17.1): key names
//! (hash-tagged so a Redis Cluster keeps each channel's, binding's and client's keys on one
//! slot), hash fields, the last-writer-wins value of a disabled state, and the JSON message
//! the scripts publish on [`EVENTS`]. Pure: no I/O.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `sy:epoch` | string | a random id set once per Redis life: a new id means Redis lost its data |
//! | `sy:ch:{CHANNEL}` | hash | `d` / `d:FP` disabled state (LWW by `at_ms`), `b:` / `b:MODEL` open breakers (opened and timeout, ms), `f:` / `f:MODEL` a closed breaker's consecutive failures (the deployment's count), `p:SCOPE` probe lease (owner and until), `c` route cooldown, `m:MODEL` "model not found", `k:FP` key cooldown (until, Redis ms) |
//! | `sy:aff:{HASH}` | string, `PX` = TTL | a sticky binding: kind and channel |
//! | (message only) | `f: "t"` | a task binding (client, task id, channel): published, not stored (the store holds it durably) |
//! | `sy:probe:{CHANNEL}:SCOPE` | string, `PX` = the probe interval | whose turn it is to send the active probe of that breaker (R19.2): one prober per interval deployment-wide |
//! | `sy:bud:{b}` | hash | the retry budget's window: `<second>:f` / `<second>:r` counts |
//! | `sy:lim:{c:CLIENT}:*`, `sy:lim:{k:CHANNEL/FP}:*` | hash / zset | rate-limit windows and leases (see `shared::limits`) |

use serde::{Deserialize, Serialize};

use crate::state::channel::Disabled;
use crate::state::KeyFp;

/// Times read from Redis are capped at this (30 days), so a corrupt value cannot overflow
/// a deadline.
pub const MAX_MS: u64 = 30 * 24 * 3600 * 1000;

/// The pub/sub channel every change is published on.
pub const EVENTS: &str = "sy:ev";
/// The key whose value changes when Redis starts empty.
pub const EPOCH: &str = "sy:epoch";
/// The retry budget's hash.
pub const BUDGET: &str = "sy:bud:{b}";
/// Prefix of sticky binding keys (for `SCAN`).
pub const BINDING_PREFIX: &str = "sy:aff:";

/// A name safe inside a `{hash tag}`: as written unless it holds a brace, else hex.
pub fn tag(name: &str) -> String {
    if name.contains(['{', '}']) {
        format!("x{}", hex::encode(name))
    } else {
        name.to_string()
    }
}

/// The hash holding one channel's shared state.
pub fn channel_key(channel: &str) -> String {
    format!("sy:ch:{{{}}}", tag(channel))
}

/// The key whose holder sends the next active probe of `channel`'s breaker `scope` (R19.2).
pub fn prober_key(channel: &str, scope: Option<&str>) -> String {
    format!("sy:probe:{{{}}}:{}", tag(channel), scope.unwrap_or(""))
}

/// One sticky binding's key.
pub fn binding_key(hash: u128) -> String {
    format!("{BINDING_PREFIX}{{{hash:032x}}}")
}

/// The binding hash back from its key.
pub fn binding_hash(key: &str) -> Option<u128> {
    let hex = key.strip_prefix(BINDING_PREFIX)?.strip_prefix('{')?;
    u128::from_str_radix(hex.strip_suffix('}')?, 16).ok()
}

/// Field of a disabled state: the channel's (`d`) or one key's (`d:<fp>`).
pub fn disabled_field(key: Option<&KeyFp>) -> String {
    key.map_or_else(|| "d".to_string(), |k| format!("d:{}", k.hex()))
}

/// Field of a breaker: the provider's (`b:`) or a model's (`b:<model>`).
pub fn breaker_field(scope: Option<&str>) -> String {
    format!("b:{}", scope.unwrap_or(""))
}

/// Field of a closed breaker's shared failure count.
pub fn failures_field(scope: Option<&str>) -> String {
    format!("f:{}", scope.unwrap_or(""))
}

/// Field of a task binding in a message (bindings are not stored in Redis).
pub const TASK_FIELD: &str = "t";

/// A task binding as published: the JSON array `[client, task id, channel]` (any of
/// them may hold `|`).
pub fn encode_task(client: &str, id: &str, channel: &str) -> String {
    serde_json::json!([client, id, channel]).to_string()
}

pub fn decode_task(value: &str) -> Option<(String, String, String)> {
    let (client, id, channel): (String, String, String) = serde_json::from_str(value).ok()?;
    (!id.is_empty() && !channel.is_empty()).then_some((client, id, channel))
}

/// Field of a breaker's probe lease.
pub fn lease_field(scope: Option<&str>) -> String {
    format!("p:{}", scope.unwrap_or(""))
}

pub const COOLDOWN_FIELD: &str = "c";

pub fn missing_field(model: &str) -> String {
    format!("m:{model}")
}

pub fn key_cooldown_field(key: &str) -> String {
    format!("k:{key}")
}

/// Field of a binding in a message (bindings are keys of their own, not hash fields).
pub fn binding_field(hash: u128) -> String {
    format!("a:{hash:032x}")
}

/// What a hash field (or message field) names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Field<'a> {
    Disabled(Option<KeyFp>),
    Breaker(Option<&'a str>),
    /// A closed breaker's consecutive failures, counted by the deployment.
    Failures(Option<&'a str>),
    Lease,
    Cooldown,
    Missing(&'a str),
    KeyCooldown(&'a str),
    Binding(u128),
    Task,
    Reset,
    Unknown,
}

/// Read a field name.
pub fn field(name: &str) -> Field<'_> {
    fn scope(name: &str) -> Option<&str> {
        (!name.is_empty()).then_some(name)
    }
    match name.split_once(':') {
        None if name == "d" => Field::Disabled(None),
        None if name == COOLDOWN_FIELD => Field::Cooldown,
        None if name == "*reset" => Field::Reset,
        None if name == TASK_FIELD => Field::Task,
        Some(("d", k)) => KeyFp::parse(k).map_or(Field::Unknown, |k| Field::Disabled(Some(k))),
        Some(("b", s)) => Field::Breaker(scope(s)),
        Some(("f", s)) => Field::Failures(scope(s)),
        Some(("p", _)) => Field::Lease,
        Some(("m", m)) if !m.is_empty() => Field::Missing(m),
        Some(("k", k)) if !k.is_empty() => Field::KeyCooldown(k),
        Some(("a", h)) => u128::from_str_radix(h, 16).map_or(Field::Unknown, Field::Binding),
        _ => Field::Unknown,
    }
}

/// A disabled state as stored: `<at_ms>|<1 disabled, 0 enabled>|<1 auto>|<reason>`.
pub fn encode_disabled(state: Option<&Disabled>, at_ms: i64) -> String {
    match state {
        Some(d) => format!("{at_ms}|1|{}|{}", u8::from(d.auto), d.reason),
        None => format!("{at_ms}|0|1|"),
    }
}

/// The stored form back: (`at_ms`, state).
pub fn decode_disabled(value: &str) -> Option<(i64, Option<Disabled>)> {
    let mut it = value.splitn(4, '|');
    let at_ms: i64 = it.next()?.parse().ok()?;
    let on = it.next()?;
    let auto = it.next()? == "1";
    let reason = it.next()?.to_string();
    let state = match on {
        "1" => Some(Disabled {
            reason,
            at_ms,
            auto,
        }),
        "0" => None,
        _ => return None,
    };
    Some((at_ms, state))
}

/// A binding as stored: `<kind>|<channel>`.
pub fn encode_binding(kind: &str, channel: &str) -> String {
    format!("{kind}|{channel}")
}

pub fn decode_binding(value: &str) -> Option<(&str, &str)> {
    value.split_once('|').filter(|(_, c)| !c.is_empty())
}

/// `opened_ms|timeout_ms` of an open breaker: the time left at `now_ms` (Redis time).
pub fn breaker_remaining(value: &str, now_ms: i64) -> Option<i64> {
    let (opened, timeout) = value.split_once('|')?;
    let end = opened
        .parse::<i64>()
        .ok()?
        .saturating_add(timeout.parse::<i64>().ok()?);
    Some(end.saturating_sub(now_ms).clamp(0, MAX_MS as i64))
}

/// A change as the scripts publish it. `ms` is the time left (cooldowns, marks, breakers,
/// bindings), measured by Redis when it published.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Msg {
    /// The replica that made the change (its own messages are skipped).
    pub o: String,
    /// The channel name ("" for bindings).
    pub c: String,
    pub f: String,
    /// The value ("" for a deletion: a breaker closed).
    #[serde(default)]
    pub v: String,
    #[serde(default)]
    pub ms: f64,
}

impl Msg {
    pub fn parse(payload: &[u8]) -> Option<Msg> {
        serde_json::from_slice(payload).ok()
    }

    /// `ms` as a whole, non-negative number of milliseconds, at most [`MAX_MS`].
    pub fn millis(&self) -> u64 {
        if self.ms.is_finite() && self.ms > 0.0 {
            (self.ms as u64).min(MAX_MS)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_hash_tagged_and_round_trip() {
        assert_eq!(channel_key("openai-1"), "sy:ch:{openai-1}");
        assert_eq!(
            channel_key("we{ird}"),
            format!("sy:ch:{{x{}}}", hex::encode("we{ird}"))
        );
        let hash = 0xabcdef_u128 << 64 | 7;
        assert_eq!(binding_hash(&binding_key(hash)), Some(hash));
        assert_eq!(binding_hash("sy:aff:{zz}"), None);
    }

    #[test]
    fn fields_are_read_back() {
        let fp = KeyFp::parse("00112233445566778899aabbccddeeff").unwrap();
        assert_eq!(field(&disabled_field(None)), Field::Disabled(None));
        assert_eq!(field(&disabled_field(Some(&fp))), Field::Disabled(Some(fp)));
        assert_eq!(field(&breaker_field(None)), Field::Breaker(None));
        assert_eq!(
            field(&breaker_field(Some("gpt-x"))),
            Field::Breaker(Some("gpt-x"))
        );
        assert_eq!(field(&lease_field(None)), Field::Lease);
        assert_eq!(field(&failures_field(None)), Field::Failures(None));
        assert_eq!(
            field(&failures_field(Some("m"))),
            Field::Failures(Some("m"))
        );
        assert_eq!(field(TASK_FIELD), Field::Task);
        assert_eq!(field("c"), Field::Cooldown);
        assert_eq!(field(&missing_field("m:1")), Field::Missing("m:1"));
        assert_eq!(field(&binding_field(42)), Field::Binding(42));
        assert_eq!(field("d:nothex"), Field::Unknown);
        assert_eq!(field("zz"), Field::Unknown);
    }

    #[test]
    fn task_bindings_round_trip() {
        let encoded = encode_task("al|ice", "task_1|x", "v");
        assert_eq!(
            decode_task(&encoded),
            Some(("al|ice".into(), "task_1|x".into(), "v".into()))
        );
        assert_eq!(decode_task(&encode_task("a", "", "v")), None);
        assert_eq!(decode_task("[1,2]"), None);
    }

    #[test]
    fn disabled_states_round_trip() {
        let disabled = Disabled {
            reason: "upstream status 401 | really".into(),
            at_ms: 17,
            auto: true,
        };
        assert_eq!(
            decode_disabled(&encode_disabled(Some(&disabled), 17)),
            Some((17, Some(disabled)))
        );
        assert_eq!(decode_disabled(&encode_disabled(None, 9)), Some((9, None)));
        assert_eq!(decode_disabled("x|1|1|r"), None);
        assert_eq!(breaker_remaining("1000|30000", 21_000), Some(10_000));
        assert_eq!(breaker_remaining("1000|30000", 99_000), Some(0));
    }
}
