//! Validation of the channel list, virtual models and clients, and the checks across them
//! (R2.3). One channel's block is validated in `validate_channel`.

use std::collections::BTreeSet;

use sha2::{Digest, Sha256};

use crate::config::error::Collector;
use crate::config::load::raw::{RawChannel, RawClient, RawVirtualModel};
use crate::config::load::scalars::names;
use crate::config::model::*;
use crate::config::validate::channel::channel;
use crate::secret::Secret;

pub(crate) fn channels(
    raw: &[(String, Option<RawChannel>)],
    global: &Resilience,
    c: &mut Collector,
) -> Vec<Channel> {
    let mut out: Vec<Channel> = raw
        .iter()
        .filter_map(|(name, r)| r.as_ref().and_then(|r| channel(name, r, global, c)))
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub(crate) fn virtual_models(
    raw: &[(String, Option<RawVirtualModel>)],
    raw_channels: &[(String, Option<RawChannel>)],
    chans: &[Channel],
    resume: &StreamResume,
    c: &mut Collector,
) -> Vec<VirtualModel> {
    let mut out = Vec::new();
    for (name, vm) in raw {
        let Some(vm) = vm else { continue };
        let key = format!("virtual_models.{name}");
        let groups = names(c, &format!("{key}.groups"), &vm.groups, &["default"]);
        let mut targets = Vec::new();
        let list = vm.targets.as_deref().unwrap_or_default();
        if list.is_empty() {
            c.push(format!("{key}.targets"), "at least one target is required");
        }
        for (i, t) in list.iter().enumerate() {
            let tkey = format!("{key}.targets[{i}]");
            match t.trim().split_once('/') {
                Some((ch, m)) if !ch.is_empty() && !m.is_empty() => {
                    if raw_channels.iter().any(|(n, _)| n == ch) {
                        targets.push(Target {
                            channel: ch.into(),
                            model: m.into(),
                        });
                    } else {
                        c.push(
                            tkey,
                            format!("target {t:?} names channel {ch:?}, which does not exist"),
                        );
                    }
                }
                _ => c.push(tkey, format!("target {t:?} must be channel/model")),
            }
        }
        for ch in chans {
            if ch.models.iter().any(|m| m == name) && ch.groups.iter().any(|g| groups.contains(g)) {
                c.push(&key, format!("virtual model {name:?} collides with a model served by channel {:?} in the same group", ch.name));
            }
        }
        out.push(VirtualModel {
            name: name.clone(),
            targets,
            groups,
            stream_resume: vm.stream_resume.as_ref().map(|r| StreamResume {
                enabled: r.enabled.unwrap_or(resume.enabled),
                max: r.max.unwrap_or(resume.max),
            }),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub(crate) fn clients(raw: &[(String, Option<RawClient>)], c: &mut Collector) -> Vec<Client> {
    let mut out = Vec::new();
    let mut seen: Vec<([u8; 32], String)> = Vec::new();
    for (name, r) in raw {
        let Some(r) = r else { continue };
        let k = |f: &str| format!("clients.{name}.{f}");
        let key = match (&r.key, &r.key_sha256) {
            (Some(p), None) if !p.trim().is_empty() => {
                Some(ClientKey::Plain(Secret::new(p.trim())))
            }
            (Some(_), None) => {
                c.push(
                    k("key"),
                    "empty key (is its variable set to an empty value?)",
                );
                None
            }
            (None, Some(h)) => {
                let mut buf = [0u8; 32];
                match hex::decode_to_slice(h.trim(), &mut buf) {
                    Ok(()) => Some(ClientKey::Sha256(buf)),
                    Err(_) => {
                        c.push(k("key_sha256"), "must be 64 hex characters (SHA-256)");
                        None
                    }
                }
            }
            (Some(_), Some(_)) => {
                c.push(
                    format!("clients.{name}"),
                    "has both key and key_sha256; give exactly one",
                );
                None
            }
            (None, None) => {
                c.push(format!("clients.{name}"), "needs key or key_sha256");
                None
            }
        };
        let Some(key) = key else { continue };
        let digest: [u8; 32] = match &key {
            ClientKey::Plain(s) => Sha256::digest(s.expose().as_bytes()).into(),
            ClientKey::Sha256(d) => *d,
        };
        if let Some((_, other)) = seen.iter().find(|(d, _)| *d == digest) {
            c.push(k("key"), format!("same key as client {other:?}"));
        }
        seen.push((digest, name.clone()));
        let group = r.group.clone().unwrap_or_else(|| "default".into());
        if group.trim().is_empty() {
            c.push(k("group"), "must not be empty");
        }
        out.push(Client {
            name: name.clone(),
            key,
            group,
            cross_group_retry: r.cross_group_retry.unwrap_or(false),
            quota: r.quota,
            trusted: r.trusted.unwrap_or(false),
            limits: Default::default(), // set in validate_limits (group defaults)
            in_flight_gauge: Default::default(),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Groups named by clients and `auto_groups` must be declared by some channel or virtual model.
/// Entries that failed validation still declare their groups (no follow-on errors), and
/// nothing is checked when the declared groups cannot be told (`None`).
pub(crate) fn cross_check(
    declared: Option<&BTreeSet<String>>,
    cls: &[Client],
    auto_groups: &[String],
    c: &mut Collector,
) {
    let Some(declared) = declared else { return };
    for cl in cls {
        if cl.group != "auto" && !declared.contains(&cl.group) {
            c.push(
                format!("clients.{}.group", cl.name),
                format!(
                    "group {:?} is not declared by any channel or virtual model",
                    cl.group
                ),
            );
        }
    }
    for (i, g) in auto_groups.iter().enumerate() {
        if !declared.contains(g) {
            c.push(
                format!("auto_groups[{i}]"),
                format!("group {g:?} is not declared by any channel or virtual model"),
            );
        }
    }
}
