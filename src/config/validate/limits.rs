//! Validation of the rate-limit keys (R15): `clients.NAME.limits`,
//! `groups.NAME.limits` (a client's own fields override its group's, field by field),
//! `channels.NAME.limits` (per key), `routing.balance` and `routing.max_upstream_cooldown`.
//! 0 or omitted = unlimited; negative values are errors; a client `tpm` below the
//! reservation of a request that names no `max_tokens` is a warning (logged at load).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::config::error::Collector;
use crate::config::load::raw::{RawClientLimits, RawGroup, RawKeyLimits};
use crate::config::load::scalars::{choice, dur_nonzero};
use crate::config::model::Balance;
use crate::config::model::{ClientLimits, KeyLimits, DEFAULT_MAX_TOKENS};

/// A day's worth of requests per second at most; beyond is a typo, not a limit.
const MAX_COUNT: i64 = 1 << 40;
/// Concurrency beyond this is a typo.
const MAX_CONCURRENCY: i64 = 1_000_000;

/// One count: omitted = 0 (unlimited), negative or absurd = error.
fn count(
    collector: &mut Collector,
    key: &str,
    field: &str,
    value: Option<i64>,
    max: i64,
) -> Option<u64> {
    match value {
        None => None,
        Some(number) if number < 0 => {
            collector.push(
                format!("{key}.{field}"),
                format!("must not be negative (got {number}); 0 or omitted means unlimited"),
            );
            None
        }
        Some(number) if number > max => {
            collector.push(format!("{key}.{field}"), format!("must be at most {max}"));
            None
        }
        Some(number) => Some(number as u64),
    }
}

/// The fields a client or group block sets (`None` = not written).
#[derive(Clone, Copy, Debug, Default)]
struct Partial {
    rpm: Option<u64>,
    rpd: Option<u64>,
    tpm: Option<u64>,
    concurrency: Option<u64>,
}

fn partial(collector: &mut Collector, key: &str, raw: Option<&RawClientLimits>) -> Partial {
    let Some(raw) = raw else {
        return Partial::default();
    };
    Partial {
        rpm: count(collector, key, "rpm", raw.rpm, MAX_COUNT),
        rpd: count(collector, key, "rpd", raw.rpd, MAX_COUNT),
        tpm: count(collector, key, "tpm", raw.tpm, MAX_COUNT),
        concurrency: count(
            collector,
            key,
            "concurrency",
            raw.concurrency,
            MAX_CONCURRENCY,
        ),
    }
}

/// `groups:` → each group's default limits, by name.
pub(crate) fn groups(
    raw: &[(String, Option<RawGroup>)],
    collector: &mut Collector,
) -> BTreeMap<String, RawGroupLimits> {
    let mut out = BTreeMap::new();
    for (name, entry) in raw {
        let Some(raw_group) = entry else { continue };
        let key = format!("groups.{name}.limits");
        out.insert(
            name.clone(),
            RawGroupLimits(partial(collector, &key, raw_group.limits.as_ref())),
        );
    }
    out
}

/// A group's validated default limits (fields it does not set stay unset).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RawGroupLimits(Partial);

/// A client's effective limits: its own fields, else its group's.
pub(crate) fn client_limits(
    name: &str,
    own: Option<&RawClientLimits>,
    group: Option<&RawGroupLimits>,
    collector: &mut Collector,
) -> ClientLimits {
    let own = partial(collector, &format!("clients.{name}.limits"), own);
    let group_limits = group.map(|group_limits| group_limits.0).unwrap_or_default();
    ClientLimits {
        rpm: own.rpm.or(group_limits.rpm).unwrap_or(0),
        rpd: own.rpd.or(group_limits.rpd).unwrap_or(0),
        tpm: own.tpm.or(group_limits.tpm).unwrap_or(0),
        concurrency: own.concurrency.or(group_limits.concurrency).unwrap_or(0) as u32,
    }
}

/// `channels.NAME.limits`: one key's published limits.
pub(crate) fn key_limits(
    key: &str,
    raw: Option<&RawKeyLimits>,
    collector: &mut Collector,
) -> KeyLimits {
    let Some(raw) = raw else {
        return KeyLimits::default();
    };
    KeyLimits {
        rpm: count(collector, key, "rpm", raw.rpm, MAX_COUNT).unwrap_or(0),
        tpm: count(collector, key, "tpm", raw.tpm, MAX_COUNT).unwrap_or(0),
        concurrency: count(
            collector,
            key,
            "concurrency",
            raw.concurrency,
            MAX_CONCURRENCY,
        )
        .unwrap_or(0) as u32,
    }
}

/// `routing.balance` and `routing.max_upstream_cooldown` (default 5 minutes).
pub(crate) fn balance(
    collector: &mut Collector,
    balance: &Option<String>,
    max_cooldown: &Option<String>,
) -> (Balance, Duration) {
    let chosen = choice(
        collector,
        "routing.balance",
        balance,
        &[
            ("weight", Balance::Weight),
            ("capacity", Balance::Capacity),
            ("latency", Balance::Latency),
        ],
        Balance::Weight,
    );
    let cooldown = dur_nonzero(
        collector,
        "routing.max_upstream_cooldown",
        max_cooldown,
        Duration::from_secs(300),
    );
    (chosen, cooldown)
}

/// The warnings a valid config may still deserve: a client whose `tpm` is below the
/// reservation of a request that names no `max_tokens` refuses every such request.
pub fn warnings(source: &Path, clients: &[crate::config::model::Client]) -> Vec<String> {
    clients
        .iter()
        .filter(|client| client.limits.tpm > 0 && client.limits.tpm < DEFAULT_MAX_TOKENS)
        .map(|client| {
            format!(
                "{}: clients.{}.limits.tpm: {} is below {DEFAULT_MAX_TOKENS}, the reservation \
                 of a request that names no max_tokens; such requests are refused (429, \
                 x-should-retry: false)",
                source.display(),
                client.name,
                client.limits.tpm
            )
        })
        .collect()
}
