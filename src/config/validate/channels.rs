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
    collector: &mut Collector,
) -> Vec<Channel> {
    let mut out: Vec<Channel> = raw
        .iter()
        .filter_map(|(name, raw_channel)| {
            raw_channel
                .as_ref()
                .and_then(|raw_channel| channel(name, raw_channel, global, collector))
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub(crate) fn virtual_models(
    raw: &[(String, Option<RawVirtualModel>)],
    raw_channels: &[(String, Option<RawChannel>)],
    channels: &[Channel],
    resume: &StreamResume,
    collector: &mut Collector,
) -> Vec<VirtualModel> {
    let mut out = Vec::new();
    for (name, entry) in raw {
        let Some(raw_virtual_model) = entry else {
            continue;
        };
        let key = format!("virtual_models.{name}");
        let groups = names(
            collector,
            &format!("{key}.groups"),
            &raw_virtual_model.groups,
            &["default"],
        );
        let mut targets = Vec::new();
        let list = raw_virtual_model.targets.as_deref().unwrap_or_default();
        if list.is_empty() {
            collector.push(format!("{key}.targets"), "at least one target is required");
        }
        for (i, target) in list.iter().enumerate() {
            let target_key = format!("{key}.targets[{i}]");
            match target.trim().split_once('/') {
                Some((channel_name, upstream_model))
                    if !channel_name.is_empty() && !upstream_model.is_empty() =>
                {
                    if raw_channels
                        .iter()
                        .any(|(raw_name, _)| raw_name == channel_name)
                    {
                        targets.push(Target {
                            channel: channel_name.into(),
                            model: upstream_model.into(),
                        });
                    } else {
                        collector.push(
                            target_key,
                            format!("target {target:?} names channel {channel_name:?}, which does not exist"),
                        );
                    }
                }
                _ => collector.push(
                    target_key,
                    format!("target {target:?} must be channel/model"),
                ),
            }
        }
        for channel in channels {
            if channel.models.iter().any(|model| model == name)
                && channel.groups.iter().any(|group| groups.contains(group))
            {
                collector.push(&key, format!("virtual model {name:?} collides with a model served by channel {:?} in the same group", channel.name));
            }
        }
        out.push(VirtualModel {
            name: name.as_str().into(),
            targets,
            groups,
            stream_resume: raw_virtual_model.stream_resume.as_ref().map(|raw_resume| {
                StreamResume {
                    enabled: raw_resume.enabled.unwrap_or(resume.enabled),
                    max: raw_resume.max.unwrap_or(resume.max),
                }
            }),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

pub(crate) fn clients(
    raw: &[(String, Option<RawClient>)],
    collector: &mut Collector,
) -> Vec<Client> {
    let mut out = Vec::new();
    let mut seen: Vec<([u8; 32], String)> = Vec::new();
    for (name, entry) in raw {
        let Some(raw_client) = entry else { continue };
        let field_key = |field: &str| format!("clients.{name}.{field}");
        let key = match (&raw_client.key, &raw_client.key_sha256) {
            (Some(plain), None) if !plain.trim().is_empty() => {
                Some(ClientKey::Plain(Secret::new(plain.trim())))
            }
            (Some(_), None) => {
                collector.push(
                    field_key("key"),
                    "empty key (is its variable set to an empty value?)",
                );
                None
            }
            (None, Some(sha256_hex)) => {
                let mut buf = [0u8; 32];
                match hex::decode_to_slice(sha256_hex.trim(), &mut buf) {
                    Ok(()) => Some(ClientKey::Sha256(buf)),
                    Err(_) => {
                        collector.push(
                            field_key("key_sha256"),
                            "must be 64 hex characters (SHA-256)",
                        );
                        None
                    }
                }
            }
            (Some(_), Some(_)) => {
                collector.push(
                    format!("clients.{name}"),
                    "has both key and key_sha256; give exactly one",
                );
                None
            }
            (None, None) => {
                collector.push(format!("clients.{name}"), "needs key or key_sha256");
                None
            }
        };
        let Some(key) = key else { continue };
        let digest: [u8; 32] = match &key {
            ClientKey::Plain(secret) => Sha256::digest(secret.expose().as_bytes()).into(),
            ClientKey::Sha256(sha256) => *sha256,
        };
        if let Some((_, other)) = seen.iter().find(|(known, _)| *known == digest) {
            collector.push(field_key("key"), format!("same key as client {other:?}"));
        }
        seen.push((digest, name.clone()));
        let group = raw_client.group.clone().unwrap_or_else(|| "default".into());
        if group.trim().is_empty() {
            collector.push(field_key("group"), "must not be empty");
        }
        out.push(Client {
            name: name.as_str().into(),
            key,
            group: group.into(),
            cross_group_retry: raw_client.cross_group_retry.unwrap_or(false),
            quota: raw_client.quota,
            trusted: raw_client.trusted.unwrap_or(false),
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
    clients: &[Client],
    auto_groups: &[String],
    collector: &mut Collector,
) {
    let Some(declared) = declared else { return };
    for client in clients {
        if &*client.group != "auto" && !declared.contains(&*client.group) {
            collector.push(
                format!("clients.{}.group", client.name),
                format!(
                    "group {:?} is not declared by any channel or virtual model",
                    client.group
                ),
            );
        }
    }
    for (i, group) in auto_groups.iter().enumerate() {
        if !declared.contains(group) {
            collector.push(
                format!("auto_groups[{i}]"),
                format!("group {group:?} is not declared by any channel or virtual model"),
            );
        }
    }
}
