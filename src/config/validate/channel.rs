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

/// One channel's block; `None` (its errors collected) when anything in it is wrong.
pub(crate) fn channel(
    name: &str,
    r: &RawChannel,
    global: &Resilience,
    c: &mut Collector,
) -> Option<Channel> {
    let k = |f: &str| format!("channels.{name}.{f}");
    let before = c.errors.len();
    let kind = choice(c, &k("kind"), &r.kind, KINDS, ChannelKind::OpenAi);
    let base = base_url(c, &k("base_url"), &r.base_url);
    let keys = keys(name, r, c);
    let mapping = model_mapping(name, r, c);
    let models = models(name, r, &mapping, c);
    let paths = paths(name, r, c);
    let weight = weight(name, r, c);
    let scm = status_code_mapping(name, r, c);
    let stream_policy = choice(
        c,
        &k("stream_policy"),
        &r.stream_policy,
        STREAM_POLICIES,
        StreamPolicy::Passthrough,
    );
    let headers = headers(name, r, c);
    let resilience = r.resilience.as_ref().map_or_else(
        || global.clone(),
        |block| overlay(global, block, &k("resilience"), c),
    );
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
        PROTOCOLS,
        UpstreamProtocol::Http1,
    );
    let limits = crate::config::validate::limits::key_limits(&k("limits"), r.limits.as_ref(), c);
    let api_version = api_version(c, &k("api_version"), kind, &r.api_version);
    let sw = switches(name, r, kind, c);
    let base = base?;
    if c.errors.len() != before {
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
        traceparent: r.traceparent.unwrap_or(true),
        resilience,
        protocol,
        include_usage: r.include_usage.unwrap_or(openai_format(kind)),
        api_version,
        translate: r.translate.unwrap_or(true),
        responses: sw.responses,
        limits,
        max_tokens_field: sw.max_tokens_field,
        reasoning_history: sw.reasoning_history,
        stream_stall: sw.stream_stall,
        prefill: sw.prefill,
    })
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

fn switches(name: &str, r: &RawChannel, kind: ChannelKind, c: &mut Collector) -> Switches {
    let k = |f: &str| format!("channels.{name}.{f}");
    Switches {
        max_tokens_field: choice(
            c,
            &k("max_tokens_field"),
            &r.max_tokens_field,
            MAX_TOKENS_FIELDS,
            MaxTokensChoice::Auto,
        ),
        reasoning_history: choice(
            c,
            &k("reasoning_history"),
            &r.reasoning_history,
            REASONING_HISTORY,
            ReasoningChoice::Auto,
        ),
        stream_stall: dur(
            c,
            &k("stream_stall"),
            &r.stream_stall,
            std::time::Duration::ZERO,
        ),
        responses: responses(c, &k("responses"), kind, &r.responses),
        prefill: choice(
            c,
            &k("prefill"),
            &r.prefill,
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
fn api_version(c: &mut Collector, key: &str, kind: ChannelKind, v: &Option<String>) -> String {
    let version = v.as_deref().map(str::trim).unwrap_or("");
    let query_safe = version
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    match kind {
        ChannelKind::Azure if version.is_empty() => c.push(
            key,
            "required for kind azure (the api-version query value, e.g. \"2024-10-21\")",
        ),
        ChannelKind::Azure if !query_safe => c.push(
            key,
            format!("{version:?} is not an api-version (letters, digits, -, ., _)"),
        ),
        ChannelKind::Azure => {}
        _ if !version.is_empty() => c.push(key, "only kind azure takes an api_version"),
        _ => {}
    }
    version.to_string()
}
/// `responses`: `native` and `chat` say how an OpenAI-format server serves it; the other
/// kinds only translate (`auto`) or do not serve it (`none`).
fn responses(c: &mut Collector, key: &str, kind: ChannelKind, v: &Option<String>) -> ResponsesMode {
    let mode = choice(c, key, v, RESPONSES_MODES, ResponsesMode::Auto);
    if !openai_format(kind) && matches!(mode, ResponsesMode::Native | ResponsesMode::Chat) {
        c.push(
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
fn keys(name: &str, r: &RawChannel, c: &mut Collector) -> Vec<Secret> {
    let mut keys = Vec::new();
    for (i, k) in r.keys.iter().flatten().enumerate() {
        if k.trim().is_empty() {
            c.push(
                format!("{}[{i}]", key(name, "keys")),
                "empty key (is its variable set to an empty value?)",
            );
        } else {
            keys.push(Secret::new(k.trim()));
        }
    }
    keys
}

/// `paths`: each a `/v1/...` path.
fn paths(name: &str, r: &RawChannel, c: &mut Collector) -> Vec<String> {
    let mut paths = Vec::new();
    for (i, p) in r.paths.iter().flatten().enumerate() {
        if v1_path(c, &format!("{}[{i}]", key(name, "paths")), p) {
            paths.push(p.clone());
        }
    }
    paths
}

/// `model_mapping`: public model → upstream model, neither empty.
fn model_mapping(name: &str, r: &RawChannel, c: &mut Collector) -> BTreeMap<String, String> {
    let mut mapping = BTreeMap::new();
    for (public, upstream) in r.model_mapping.iter().flatten() {
        if public.trim().is_empty() {
            c.push(key(name, "model_mapping"), "empty public model name");
        } else if upstream.trim().is_empty() {
            c.push(
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
    r: &RawChannel,
    mapping: &BTreeMap<String, String>,
    c: &mut Collector,
) -> Vec<String> {
    let mut models: BTreeSet<String> = names(c, &key(name, "models"), &r.models, &[])
        .into_iter()
        .collect();
    models.extend(mapping.keys().cloned());
    for m in models.iter().filter(|m| is_pattern(m)) {
        if glob_regex(m).is_none() {
            c.push(key(name, "models"), format!("pattern {m:?} is too long"));
        }
    }
    models.into_iter().collect()
}

/// `weight`: 0 to u32::MAX, 100 when absent.
fn weight(name: &str, r: &RawChannel, c: &mut Collector) -> u32 {
    match r.weight {
        None => 100,
        Some(w) if (0..=i64::from(u32::MAX)).contains(&w) => w as u32,
        Some(w) if w < 0 => {
            c.push(key(name, "weight"), format!("weight {w} is negative"));
            100
        }
        Some(w) => {
            c.push(
                key(name, "weight"),
                format!("{w} is larger than {}", u32::MAX),
            );
            100
        }
    }
}

/// `status_code_mapping`: status → status, both 100-599.
fn status_code_mapping(name: &str, r: &RawChannel, c: &mut Collector) -> BTreeMap<u16, u16> {
    let mut scm = BTreeMap::new();
    for (from, to) in r.status_code_mapping.iter().flatten() {
        let k = format!("{}.{from}", key(name, "status_code_mapping"));
        match (status_code(from), status_code(to)) {
            (Some(a), Some(b)) => {
                scm.insert(a, b);
            }
            (None, _) => c.push(k, format!("{from:?} is not a status code (100-599)")),
            (_, None) => c.push(k, format!("{to:?} is not a status code (100-599)")),
        }
    }
    scm
}

/// `headers`: valid names and values, none the gateway manages; values are secrets.
fn headers(name: &str, r: &RawChannel, c: &mut Collector) -> Vec<(HeaderName, Secret)> {
    let mut headers = Vec::new();
    for (hn, hv) in r.headers.iter().flatten() {
        let k = format!("{}.{hn}", key(name, "headers"));
        let Ok(h) = HeaderName::from_bytes(hn.trim().to_ascii_lowercase().as_bytes()) else {
            c.push(k, "not a valid header name");
            continue;
        };
        if FORBIDDEN_HEADERS.contains(&h.as_str()) {
            c.push(k, "this header is managed by the gateway and cannot be set");
            continue;
        }
        match HeaderValue::from_str(hv) {
            Ok(_) => headers.push((h, Secret::new(hv.as_str()))),
            Err(_) => c.push(k, "not a valid header value"),
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
            let e = load(kind, &format!("    responses: {word}\n")).unwrap_err();
            assert!(
                e.contains("channels.c.responses") && e.contains("openai and azure"),
                "{e}"
            );
        }
        let cfg = load("openai", "    responses: chat\n").unwrap();
        let shown = crate::config::explain::explain(&cfg);
        assert!(shown.contains("translate=true responses=chat"), "{shown}");
        let e = load("openai", "    responses: maybe\n").unwrap_err();
        assert!(
            e.contains("channels.c.responses") && e.contains("\"maybe\""),
            "{e}"
        );
    }
}
