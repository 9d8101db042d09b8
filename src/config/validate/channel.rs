//! Validation of one channel's block (R2.3): kind, base URL, keys, models and mappings,
//! paths, weight, status mapping, stream policy, headers, resilience, protocol.

use std::collections::{BTreeMap, BTreeSet};

use http::{HeaderName, HeaderValue};

use crate::config::error::Collector;
use crate::config::load::raw::RawChannel;
use crate::config::load::scalars::{choice, dur, glob_regex, is_pattern, names, v1_path};
use crate::config::merge::overlay;
use crate::config::model::*;
use crate::secret::Secret;

const FORBIDDEN_HEADERS: &[&str] = &["host", "content-length", "transfer-encoding", "connection"];

fn base_url(collector: &mut Collector, key: &str, value: &Option<String>) -> Option<BaseUrl> {
    let Some(url) = value
        .as_deref()
        .map(str::trim)
        .filter(|url| !url.is_empty())
    else {
        collector.push(key, "required");
        return None;
    };
    let bad = |collector: &mut Collector, why: &str| collector.push(key, format!("{url:?} {why}"));
    let uri: http::Uri = match url.parse() {
        Ok(parsed) => parsed,
        Err(_) => {
            bad(collector, "is not a valid URL");
            return None;
        }
    };
    let scheme = match uri.scheme_str() {
        Some("http") | Some("https") => uri.scheme().cloned(),
        _ => {
            bad(collector, "must use http or https");
            return None;
        }
    };
    let authority = uri.authority().cloned().filter(|a| !a.host().is_empty());
    let (Some(scheme), Some(authority)) = (scheme, authority) else {
        bad(collector, "has no host");
        return None;
    };
    if uri.query().is_some() {
        bad(collector, "must not have a query string");
        return None;
    }
    Some(BaseUrl {
        scheme,
        authority,
        path_prefix: uri.path().trim_end_matches('/').to_string(),
    })
}

fn status_code(text: &str) -> Option<u16> {
    text.trim()
        .parse::<u16>()
        .ok()
        .filter(|code| (100..=599).contains(code))
}

/// One channel's block; `None` (its errors collected) when anything in it is wrong.
pub(crate) fn channel(
    name: &str,
    raw: &RawChannel,
    global: &Resilience,
    collector: &mut Collector,
) -> Option<Channel> {
    let field_key = |field: &str| format!("channels.{name}.{field}");
    let before = collector.errors.len();
    let kind = choice(
        collector,
        &field_key("kind"),
        &raw.kind,
        KINDS,
        ChannelKind::OpenAi,
    );
    let base = base_url(collector, &field_key("base_url"), &raw.base_url);
    let keys = keys(name, raw, collector);
    let mapping = model_mapping(name, raw, collector);
    let models = models(name, raw, &mapping, collector);
    let paths = paths(name, raw, collector);
    let weight = weight(name, raw, collector);
    let status_mapping = status_code_mapping(name, raw, collector);
    let sending = sending(name, raw, global, collector);
    let limits = crate::config::validate::limits::key_limits(
        &field_key("limits"),
        raw.limits.as_ref(),
        collector,
    );
    let api_version = api_version(collector, &field_key("api_version"), kind, &raw.api_version);
    let compatibility = switches(name, raw, kind, collector);
    let base = base?;
    if collector.errors.len() != before {
        return None;
    }
    Some(Channel {
        name: name.to_string(),
        kind,
        base_url: base,
        keys,
        models,
        model_mapping: mapping,
        paths,
        groups: names(collector, &field_key("groups"), &raw.groups, &["default"]),
        priority: raw.priority.unwrap_or(0),
        weight,
        enabled: raw.enabled.unwrap_or(true),
        auto_ban: raw.auto_ban.unwrap_or(true),
        status_code_mapping: status_mapping,
        stream_policy: sending.stream_policy,
        non_stream_timeout: sending.non_stream_timeout,
        headers: sending.headers,
        forward_organization: raw.forward_organization.unwrap_or(false),
        traceparent: raw.traceparent.unwrap_or(true),
        resilience: sending.resilience,
        protocol: sending.protocol,
        include_usage: raw.include_usage.unwrap_or(openai_format(kind)),
        api_version,
        translate: raw.translate.unwrap_or(true),
        responses: compatibility.responses,
        limits,
        max_tokens_field: compatibility.max_tokens_field,
        reasoning_history: compatibility.reasoning_history,
        stream_stall: compatibility.stream_stall,
        prefill: compatibility.prefill,
    })
}

/// How requests are sent on a channel: its stream policy, headers, resilience, non-stream
/// timeout and protocol (validated in this order, so errors read in the block's order).
struct Sending {
    stream_policy: StreamPolicy,
    headers: Vec<(HeaderName, Secret)>,
    resilience: Resilience,
    non_stream_timeout: std::time::Duration,
    protocol: UpstreamProtocol,
}

fn sending(
    name: &str,
    raw: &RawChannel,
    global: &Resilience,
    collector: &mut Collector,
) -> Sending {
    let field_key = |field: &str| format!("channels.{name}.{field}");
    let stream_policy = choice(
        collector,
        &field_key("stream_policy"),
        &raw.stream_policy,
        STREAM_POLICIES,
        StreamPolicy::Passthrough,
    );
    let headers = headers(name, raw, collector);
    let resilience = raw.resilience.as_ref().map_or_else(
        || global.clone(),
        |block| overlay(global, block, &field_key("resilience"), collector),
    );
    let non_stream_timeout = dur(
        collector,
        &field_key("non_stream_timeout"),
        &raw.non_stream_timeout,
        std::time::Duration::ZERO,
    );
    let protocol = choice(
        collector,
        &field_key("protocol"),
        &raw.protocol,
        PROTOCOLS,
        UpstreamProtocol::Http1,
    );
    Sending {
        stream_policy,
        headers,
        resilience,
        non_stream_timeout,
        protocol,
    }
}

/// OpenAI-format kinds: they add `stream_options.include_usage` unless told not to.
fn openai_format(kind: ChannelKind) -> bool {
    matches!(kind, ChannelKind::OpenAi | ChannelKind::Azure)
}

/// A channel's compatibility switches, for native and translated requests alike.
struct Switches {
    max_tokens_field: MaxTokensChoice,
    reasoning_history: ReasoningChoice,
    stream_stall: std::time::Duration,
    responses: ResponsesMode,
    prefill: Option<bool>,
}

fn switches(
    name: &str,
    raw: &RawChannel,
    kind: ChannelKind,
    collector: &mut Collector,
) -> Switches {
    let field_key = |field: &str| format!("channels.{name}.{field}");
    Switches {
        max_tokens_field: choice(
            collector,
            &field_key("max_tokens_field"),
            &raw.max_tokens_field,
            MAX_TOKENS_FIELDS,
            MaxTokensChoice::Auto,
        ),
        reasoning_history: choice(
            collector,
            &field_key("reasoning_history"),
            &raw.reasoning_history,
            REASONING_HISTORY,
            ReasoningChoice::Auto,
        ),
        stream_stall: dur(
            collector,
            &field_key("stream_stall"),
            &raw.stream_stall,
            std::time::Duration::ZERO,
        ),
        responses: responses(collector, &field_key("responses"), kind, &raw.responses),
        prefill: choice(
            collector,
            &field_key("prefill"),
            &raw.prefill,
            &[("auto", None), ("true", Some(true)), ("false", Some(false))],
            None,
        ),
    }
}

/// The values of `max_tokens_field` and `reasoning_history`.
const MAX_TOKENS_FIELDS: &[(&str, MaxTokensChoice)] = &[
    ("auto", MaxTokensChoice::Auto),
    ("max_tokens", MaxTokensChoice::MaxTokens),
    (
        "max_completion_tokens",
        MaxTokensChoice::MaxCompletionTokens,
    ),
];
const REASONING_HISTORY: &[(&str, ReasoningChoice)] = &[
    ("auto", ReasoningChoice::Auto),
    ("reasoning_content", ReasoningChoice::ReasoningContent),
    ("drop", ReasoningChoice::Drop),
];

/// The values of `kind`, `stream_policy` and `protocol`.
const KINDS: &[(&str, ChannelKind)] = &[
    ("openai", ChannelKind::OpenAi),
    ("anthropic", ChannelKind::Anthropic),
    ("azure", ChannelKind::Azure),
    ("gemini", ChannelKind::Gemini),
];

/// `api_version`: required for azure (the `api-version` query value, e.g. `2024-10-21`),
/// meaningless elsewhere.
fn api_version(
    collector: &mut Collector,
    key: &str,
    kind: ChannelKind,
    value: &Option<String>,
) -> String {
    let version = value.as_deref().map(str::trim).unwrap_or("");
    let query_safe = version
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    match kind {
        ChannelKind::Azure if version.is_empty() => collector.push(
            key,
            "required for kind azure (the api-version query value, e.g. \"2024-10-21\")",
        ),
        ChannelKind::Azure if !query_safe => collector.push(
            key,
            format!("{version:?} is not an api-version (letters, digits, -, ., _)"),
        ),
        ChannelKind::Azure => {}
        _ if !version.is_empty() => collector.push(key, "only kind azure takes an api_version"),
        _ => {}
    }
    version.to_string()
}
/// `responses`: `native` and `chat` say how an OpenAI-format server serves it; the other
/// kinds only translate (`auto`) or do not serve it (`none`).
fn responses(
    collector: &mut Collector,
    key: &str,
    kind: ChannelKind,
    value: &Option<String>,
) -> ResponsesMode {
    let mode = choice(collector, key, value, RESPONSES_MODES, ResponsesMode::Auto);
    if !openai_format(kind) && matches!(mode, ResponsesMode::Native | ResponsesMode::Chat) {
        collector.push(
            key,
            format!(
                "{:?} is for openai and azure channels; a {} channel serves /v1/responses \
                 translated (auto) or not at all (none)",
                mode.as_str(),
                kind.as_str()
            ),
        );
    }
    mode
}
const RESPONSES_MODES: &[(&str, ResponsesMode)] = &[
    ("auto", ResponsesMode::Auto),
    ("native", ResponsesMode::Native),
    ("chat", ResponsesMode::Chat),
    ("none", ResponsesMode::Off),
];
const STREAM_POLICIES: &[(&str, StreamPolicy)] = &[
    ("", StreamPolicy::Passthrough),
    ("force_stream", StreamPolicy::ForceStream),
    ("force_non_stream", StreamPolicy::ForceNonStream),
];
const PROTOCOLS: &[(&str, UpstreamProtocol)] = &[
    ("http1", UpstreamProtocol::Http1),
    ("http2", UpstreamProtocol::Http2),
];

fn key(name: &str, field: &str) -> String {
    format!("channels.{name}.{field}")
}

/// `keys`: each non-empty key, trimmed, as a secret.
fn keys(name: &str, raw: &RawChannel, collector: &mut Collector) -> Vec<Secret> {
    let mut keys = Vec::new();
    for (i, raw_key) in raw.keys.iter().flatten().enumerate() {
        if raw_key.trim().is_empty() {
            collector.push(
                format!("{}[{i}]", key(name, "keys")),
                "empty key (is its variable set to an empty value?)",
            );
        } else {
            keys.push(Secret::new(raw_key.trim()));
        }
    }
    keys
}

/// `paths`: each a `/v1/...` path.
fn paths(name: &str, raw: &RawChannel, collector: &mut Collector) -> Vec<String> {
    let mut paths = Vec::new();
    for (i, path) in raw.paths.iter().flatten().enumerate() {
        if v1_path(collector, &format!("{}[{i}]", key(name, "paths")), path) {
            paths.push(path.clone());
        }
    }
    paths
}

/// `model_mapping`: public model → upstream model, neither empty.
fn model_mapping(
    name: &str,
    raw: &RawChannel,
    collector: &mut Collector,
) -> BTreeMap<String, String> {
    let mut mapping = BTreeMap::new();
    for (public, upstream) in raw.model_mapping.iter().flatten() {
        if public.trim().is_empty() {
            collector.push(key(name, "model_mapping"), "empty public model name");
        } else if upstream.trim().is_empty() {
            collector.push(
                format!("{}.{public}", key(name, "model_mapping")),
                "empty upstream model name",
            );
        } else {
            mapping.insert(public.clone(), upstream.clone());
        }
    }
    mapping
}

/// `models` and the mapped public names, sorted; a pattern must compile.
fn models(
    name: &str,
    raw: &RawChannel,
    mapping: &BTreeMap<String, String>,
    collector: &mut Collector,
) -> Vec<String> {
    let mut models: BTreeSet<String> = names(collector, &key(name, "models"), &raw.models, &[])
        .into_iter()
        .collect();
    models.extend(mapping.keys().cloned());
    for model in models.iter().filter(|model| is_pattern(model)) {
        if glob_regex(model).is_none() {
            collector.push(
                key(name, "models"),
                format!("pattern {model:?} is too long"),
            );
        }
    }
    models.into_iter().collect()
}

/// `weight`: 0 to u32::MAX, 100 when absent.
fn weight(name: &str, raw: &RawChannel, collector: &mut Collector) -> u32 {
    match raw.weight {
        None => 100,
        Some(weight) if (0..=i64::from(u32::MAX)).contains(&weight) => weight as u32,
        Some(weight) if weight < 0 => {
            collector.push(key(name, "weight"), format!("weight {weight} is negative"));
            100
        }
        Some(weight) => {
            collector.push(
                key(name, "weight"),
                format!("{weight} is larger than {}", u32::MAX),
            );
            100
        }
    }
}

/// `status_code_mapping`: status → status, both 100-599.
fn status_code_mapping(
    name: &str,
    raw: &RawChannel,
    collector: &mut Collector,
) -> BTreeMap<u16, u16> {
    let mut status_mapping = BTreeMap::new();
    for (from, to) in raw.status_code_mapping.iter().flatten() {
        let entry_key = format!("{}.{from}", key(name, "status_code_mapping"));
        match (status_code(from), status_code(to)) {
            (Some(from_status), Some(to_status)) => {
                status_mapping.insert(from_status, to_status);
            }
            (None, _) => collector.push(
                entry_key,
                format!("{from:?} is not a status code (100-599)"),
            ),
            (_, None) => {
                collector.push(entry_key, format!("{to:?} is not a status code (100-599)"))
            }
        }
    }
    status_mapping
}

/// `headers`: valid names and values, none the gateway manages; values are secrets.
fn headers(name: &str, raw: &RawChannel, collector: &mut Collector) -> Vec<(HeaderName, Secret)> {
    let mut headers = Vec::new();
    for (raw_name, raw_value) in raw.headers.iter().flatten() {
        let entry_key = format!("{}.{raw_name}", key(name, "headers"));
        let Ok(header_name) =
            HeaderName::from_bytes(raw_name.trim().to_ascii_lowercase().as_bytes())
        else {
            collector.push(entry_key, "not a valid header name");
            continue;
        };
        if FORBIDDEN_HEADERS.contains(&header_name.as_str()) {
            collector.push(
                entry_key,
                "this header is managed by the gateway and cannot be set",
            );
            continue;
        }
        match HeaderValue::from_str(raw_value) {
            Ok(_) => headers.push((header_name, Secret::new(raw_value.as_str()))),
            Err(_) => collector.push(entry_key, "not a valid header value"),
        }
    }
    headers
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use crate::config::model::{ChannelKind, ResponsesMode};

    fn load(kind: &str, extra: &str) -> Result<crate::config::model::Config, String> {
        let yaml = format!(
            "channels:\n  c:\n    kind: {kind}\n    base_url: http://x\n    models: [m]\n{extra}clients:\n  a: {{key: k}}\n"
        );
        crate::config::load_str(&yaml, Path::new("t.yaml"), &HashMap::new())
            .map_err(|e| e.to_string())
    }

    /// R16.4: `channels.*.responses` is auto by default; native and chat only for the
    /// OpenAI-format kinds; other words are named.
    #[test]
    fn responses_mode() {
        let cfg = load("openai", "").unwrap();
        assert_eq!(cfg.channels[0].responses, ResponsesMode::Auto);
        for (word, mode) in [
            ("native", ResponsesMode::Native),
            ("chat", ResponsesMode::Chat),
            ("none", ResponsesMode::Off),
            ("auto", ResponsesMode::Auto),
        ] {
            for kind in ["openai", "azure"] {
                let extra = format!("    responses: {word}\n");
                let extra = if kind == "azure" {
                    format!("{extra}    api_version: \"2024-10-21\"\n")
                } else {
                    extra
                };
                let cfg = load(kind, &extra).unwrap();
                assert_eq!(cfg.channels[0].responses, mode, "{kind} {word}");
            }
        }
        let cfg = load("anthropic", "    responses: none\n").unwrap();
        assert_eq!(cfg.channels[0].kind, ChannelKind::Anthropic);
        assert_eq!(cfg.channels[0].responses, ResponsesMode::Off);
        for (kind, word) in [("anthropic", "chat"), ("gemini", "native")] {
            let error = load(kind, &format!("    responses: {word}\n")).unwrap_err();
            assert!(
                error.contains("channels.c.responses") && error.contains("openai and azure"),
                "{error}"
            );
        }
        let cfg = load("openai", "    responses: chat\n").unwrap();
        let shown = crate::config::explain::explain(&cfg);
        assert!(shown.contains("translate=true responses=chat"), "{shown}");
        let error = load("openai", "    responses: maybe\n").unwrap_err();
        assert!(
            error.contains("channels.c.responses") && error.contains("\"maybe\""),
            "{error}"
        );
    }
}
