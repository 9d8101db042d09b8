//! Validation of channels, virtual models and clients, and the checks across them (R2.3).

use std::collections::{BTreeMap, BTreeSet};

use http::{HeaderName, HeaderValue};
use sha2::{Digest, Sha256};

use super::error::Collector;
use super::merge::overlay;
use super::model::*;
use super::raw::{RawChannel, RawClient, RawVirtualModel};
use super::scalars::{choice, dur, glob_regex, is_pattern, names, v1_path};
use crate::secret::Secret;

const FORBIDDEN_HEADERS: &[&str] = &["host", "content-length", "transfer-encoding", "connection"];

fn base_url(c: &mut Collector, key: &str, v: &Option<String>) -> Option<BaseUrl> {
    let Some(s) = v.as_deref().map(str::trim).filter(|s| !s.is_empty()) else {
        c.push(key, "required");
        return None;
    };
    let bad = |c: &mut Collector, why: &str| c.push(key, format!("{s:?} {why}"));
    let uri: http::Uri = match s.parse() {
        Ok(u) => u,
        Err(_) => {
            bad(c, "is not a valid URL");
            return None;
        }
    };
    let scheme = match uri.scheme_str() {
        Some("http") | Some("https") => uri.scheme().cloned(),
        _ => {
            bad(c, "must use http or https");
            return None;
        }
    };
    let authority = uri.authority().cloned().filter(|a| !a.host().is_empty());
    let (Some(scheme), Some(authority)) = (scheme, authority) else {
        bad(c, "has no host");
        return None;
    };
    if uri.query().is_some() {
        bad(c, "must not have a query string");
        return None;
    }
    Some(BaseUrl {
        scheme,
        authority,
        path_prefix: uri.path().trim_end_matches('/').to_string(),
    })
}

fn status_code(s: &str) -> Option<u16> {
    s.trim()
        .parse::<u16>()
        .ok()
        .filter(|n| (100..=599).contains(n))
}

fn channel(name: &str, r: &RawChannel, global: &Resilience, c: &mut Collector) -> Option<Channel> {
    let k = |f: &str| format!("channels.{name}.{f}");
    let before = c.errors.len();
    let kind = choice(
        c,
        &k("kind"),
        &r.kind,
        &[
            ("openai", ChannelKind::OpenAi),
            ("anthropic", ChannelKind::Anthropic),
        ],
        ChannelKind::OpenAi,
    );
    let base = base_url(c, &k("base_url"), &r.base_url);
    let mut keys = Vec::new();
    for (i, key) in r.keys.iter().flatten().enumerate() {
        if key.trim().is_empty() {
            c.push(
                format!("{}[{i}]", k("keys")),
                "empty key (is its variable set to an empty value?)",
            );
        } else {
            keys.push(Secret::new(key.trim()));
        }
    }
    let mut mapping = BTreeMap::new();
    for (public, upstream) in r.model_mapping.iter().flatten() {
        if public.trim().is_empty() {
            c.push(k("model_mapping"), "empty public model name");
        } else if upstream.trim().is_empty() {
            c.push(
                format!("{}.{public}", k("model_mapping")),
                "empty upstream model name",
            );
        } else {
            mapping.insert(public.clone(), upstream.clone());
        }
    }
    let mut models: BTreeSet<String> = names(c, &k("models"), &r.models, &[]).into_iter().collect();
    models.extend(mapping.keys().cloned());
    for m in models.iter().filter(|m| is_pattern(m)) {
        if glob_regex(m).is_none() {
            c.push(k("models"), format!("pattern {m:?} is too long"));
        }
    }
    let mut paths = Vec::new();
    for (i, p) in r.paths.iter().flatten().enumerate() {
        if v1_path(c, &format!("{}[{i}]", k("paths")), p) {
            paths.push(p.clone());
        }
    }
    let weight = match r.weight {
        None => 100,
        Some(w) if (0..=i64::from(u32::MAX)).contains(&w) => w as u32,
        Some(w) if w < 0 => {
            c.push(k("weight"), format!("weight {w} is negative"));
            100
        }
        Some(w) => {
            c.push(k("weight"), format!("{w} is larger than {}", u32::MAX));
            100
        }
    };
    let mut scm = BTreeMap::new();
    for (from, to) in r.status_code_mapping.iter().flatten() {
        let key = format!("{}.{from}", k("status_code_mapping"));
        match (status_code(from), status_code(to)) {
            (Some(a), Some(b)) => {
                scm.insert(a, b);
            }
            (None, _) => c.push(key, format!("{from:?} is not a status code (100-599)")),
            (_, None) => c.push(key, format!("{to:?} is not a status code (100-599)")),
        }
    }
    let stream_policy = choice(
        c,
        &k("stream_policy"),
        &r.stream_policy,
        &[
            ("", StreamPolicy::Passthrough),
            ("force_stream", StreamPolicy::ForceStream),
            ("force_non_stream", StreamPolicy::ForceNonStream),
        ],
        StreamPolicy::Passthrough,
    );
    let mut headers = Vec::new();
    for (hn, hv) in r.headers.iter().flatten() {
        let key = format!("{}.{hn}", k("headers"));
        let Ok(name) = HeaderName::from_bytes(hn.trim().to_ascii_lowercase().as_bytes()) else {
            c.push(key, "not a valid header name");
            continue;
        };
        if FORBIDDEN_HEADERS.contains(&name.as_str()) {
            c.push(
                key,
                "this header is managed by the gateway and cannot be set",
            );
            continue;
        }
        match HeaderValue::from_str(hv) {
            Ok(_) => headers.push((name, Secret::new(hv.as_str()))),
            Err(_) => c.push(key, "not a valid header value"),
        }
    }
    let resilience = match &r.resilience {
        Some(block) => overlay(global, block, &k("resilience"), c),
        None => global.clone(),
    };
    let non_stream_timeout = dur(
        c,
        &k("non_stream_timeout"),
        &r.non_stream_timeout,
        std::time::Duration::ZERO,
    );
    let protocol = choice(
        c,
        &k("protocol"),
        &r.protocol,
        &[
            ("http1", UpstreamProtocol::Http1),
            ("http2", UpstreamProtocol::Http2),
        ],
        UpstreamProtocol::Http1,
    );
    let base = base?;
    if c.errors.len() != before {
        return None;
    }
    Some(Channel {
        name: name.to_string(),
        kind,
        base_url: base,
        keys,
        models: models.into_iter().collect(),
        model_mapping: mapping,
        paths,
        groups: names(c, &k("groups"), &r.groups, &["default"]),
        priority: r.priority.unwrap_or(0),
        weight,
        enabled: r.enabled.unwrap_or(true),
        auto_ban: r.auto_ban.unwrap_or(true),
        status_code_mapping: scm,
        stream_policy,
        non_stream_timeout,
        headers,
        forward_organization: r.forward_organization.unwrap_or(false),
        resilience,
        protocol,
        include_usage: r.include_usage.unwrap_or(kind == ChannelKind::OpenAi),
    })
}

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
