//! Tests: the full CONFIG.md example, defaults, validation errors with key paths.

mod env;
mod errors;
mod storage;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use crate::config::model::*;
use crate::config::*;

pub(super) const FULL: &str = r#"
listen: 127.0.0.1:8080            # client-facing API (OpenAI / Anthropic wire formats)
tls:                              # optional; rustls on the client listener
  cert: /etc/switchyard/cert.pem
  key: /etc/switchyard/key.pem
admin:
  listen: 127.0.0.1:9090          # /metrics /healthz /readyz /admin/*
  token: ${SWITCHYARD_ADMIN_TOKEN} # Bearer token for /admin/*
storage:
  path: ./switchyard.db           # SQLite (WAL); ":memory:" for throwaway runs
debug_headers: false              # true: x-switchyard-route on every response
limits:
  max_body_bytes: 33554432
  header_read_timeout: 10s
  max_connections: 10000

timeouts:                         # R9
  upstream_header: 60s            # alias env OUTBOUND_HEADER_TIMEOUT_SECONDS
  image_upstream_header: 300s     # alias env OUTBOUND_IMAGE_HEADER_TIMEOUT_SECONDS
  first_byte: 30s
  keepalive: 15s
  non_stream: 600s                # default for channels whose non_stream_timeout is 0
  request_deadline: 900s          # whole request, all attempts and backoff included
  drain: 30s                      # graceful shutdown

routing:                          # R4
  retry_times: 3                  # attempts = retry_times + 1
  tier_walk: exhaust              # exhaust | one_per_tier
  failover_on: "100-199,300-399,401-407,409-499,500-503,505-523,525-599"
  never_failover_on: "504,524"
  retry_budget: {ratio: 0.2, min_per_second: 10, ttl: 10s}   # R4.7

auto_groups: [vip, default]       # R5: order tried for clients whose group is "auto"

resilience:                       # R6, R4.5 — global; each channel may override any field
  retry:
    max_retries: 3
    retry_on: "429,502,503,504,522,524"
    initial_backoff: 1s
    max_backoff: 30s
    backoff_factor: 2.0
    jitter_factor: 0.1
  circuit_breaker:
    enabled: true
    scope: provider               # provider | model
    failure_on: "429,5xx"
    failure_threshold: 5
    success_threshold: 2
    timeout: 30s
    slow_call_threshold: 0s       # 0 = off
  cooldown:                       # R6.4
    consecutive_retryable_failures: 0   # 0 = off; 2 is the logical-group preset
    duration: 600s

auto_disable:                     # R7
  enabled: true
  auto_enable: true
  statuses: "401"
  error_codes: [invalid_api_key, account_deactivated, billing_not_active, Arrearage]
  error_types: [insufficient_quota, authentication_error, permission_error, forbidden]
  keywords: []
  probe_interval: 60s

images_failover:                  # R10.3
  enabled: false                  # alias env IMAGES_FAILOVER_ENABLED
  include_ambiguous: false        # alias env IMAGES_FAILOVER_INCLUDE_AMBIGUOUS
  include_uncertain: false        # alias env IMAGES_FAILOVER_INCLUDE_UNCERTAIN
  key_retry_budget: 1             # alias env CHANNEL_RETRY_TIMES

channels:                         # R1–R4: one upstream endpoint each, keyed by name
  sensenova-1:
    kind: openai                  # openai | anthropic
    base_url: https://api.example.com/v1
    keys: ["${SENSENOVA_KEY_1}", "${SENSENOVA_KEY_2}"]
    models: [deepseek-chat, gpt-4o-mini]   # public model names it serves
    model_mapping: {deepseek-chat: deepseek-v3}   # public -> upstream name
    paths: []                     # extra /v1/* paths it serves as pass-through
    groups: [default]
    priority: 10                  # larger = tried first
    weight: 100
    enabled: true
    auto_ban: true
    status_code_mapping: {"429": "503"}
    stream_policy: ""             # "" | force_stream | force_non_stream
    non_stream_timeout: 0s        # 0 = timeouts.non_stream
    headers: {}                   # extra/overridden upstream headers
    resilience:                   # any subset of the global resilience block
      retry: {max_retries: 5}
  deepseek-official:
    kind: anthropic
    base_url: https://api.deepseek.com/anthropic/
    models: [deepseek-chat]
    groups: [vip]

virtual_models:                   # R3.4: ordered failover targets, channel/upstream-model
  resilient-chat:
    targets: [sensenova-1/deepseek-v3, deepseek-official/deepseek-chat]
    groups: [default]

affinity:                         # R8
  rules:
    - name: codex trace
      model: "^gpt-.*$"
      path: /v1/responses
      key: body.prompt_cache_key  # body.<json path> or header.<name>
      ttl: 2h
      skip_retry_on_failure: false
  sticky:
    conversation_ttl: 2h
    session_ttl: 2h
    user_model_ttl: 30m
    bucket_ttl: 10m

clients:                          # R11, R14: who may call, and their quota
  alice:
    key: ${ALICE_KEY}             # or key_sha256: "<hex>"
    group: default                # a group name, or "auto"
    cross_group_retry: false
    quota: 1000000                # credits; omit for unlimited
    trusted: false

pricing:                          # credits per million tokens, by public model
  deepseek-chat: {input: 0.27, output: 1.10}

tasks:
  paths: [/v1/videos]
"#;

pub(super) fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

pub(super) fn full_env() -> HashMap<String, String> {
    env(&[
        ("SWITCHYARD_ADMIN_TOKEN", "admin-secret-token"),
        ("SENSENOVA_KEY_1", "sk-canary-one-111"),
        ("SENSENOVA_KEY_2", "sk-canary-two-222"),
        ("ALICE_KEY", "alice-key-333"),
    ])
}

pub(super) fn load(yaml: &str) -> Result<Config, ConfigErrors> {
    load_str(yaml, Path::new("test.yaml"), &HashMap::new())
}

pub(super) fn errs(yaml: &str) -> ConfigErrors {
    match load(yaml) {
        Ok(_) => panic!("expected errors for:\n{yaml}"),
        Err(errors) => errors,
    }
}

pub(super) const CH: &str =
    "channels:\n  a:\n    base_url: http://127.0.0.1:1/v1\n    models: [m]\n";

#[test]
fn full_example_parses() {
    let cfg = load_str(FULL, Path::new("full.yaml"), &full_env()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(
        cfg.admin.token.as_ref().unwrap().expose(),
        "admin-secret-token"
    );
    assert!(cfg.tls.is_some());
    assert_eq!(cfg.channels.len(), 2);
    assert_eq!(cfg.channels[0].name, "deepseek-official");
    let sensenova = &cfg.channels[1];
    assert_eq!(sensenova.name, "sensenova-1");
    assert_eq!(sensenova.keys.len(), 2);
    assert_eq!(sensenova.keys[1].expose(), "sk-canary-two-222");
    assert_eq!(sensenova.models, vec!["deepseek-chat", "gpt-4o-mini"]);
    assert_eq!(sensenova.model_mapping["deepseek-chat"], "deepseek-v3");
    assert_eq!(sensenova.status_code_mapping[&429], 503);
    assert_eq!(sensenova.priority, 10);
    assert_eq!(sensenova.stream_policy, StreamPolicy::Passthrough);
    assert_eq!(sensenova.resilience.retry.max_retries, 5);
    assert_eq!(sensenova.resilience.circuit_breaker.failure_threshold, 5);
    assert_eq!(sensenova.base_url.path_prefix, "/v1");
    assert_eq!(sensenova.base_url.authority.as_str(), "api.example.com");
    let deepseek = &cfg.channels[0];
    assert_eq!(deepseek.kind, ChannelKind::Anthropic);
    assert_eq!(deepseek.base_url.path_prefix, "/anthropic");
    assert!(deepseek.keys.is_empty());
    assert_eq!(
        cfg.virtual_models[0].targets[1].channel,
        "deepseek-official"
    );
    assert_eq!(cfg.affinity.rules.len(), 1);
    assert_eq!(
        cfg.affinity.sticky.user_model_ttl,
        Duration::from_secs(1800)
    );
    assert_eq!(&*cfg.clients[0].group, "default");
    assert_eq!(cfg.clients[0].quota, Some(1_000_000));
    assert_eq!(cfg.pricing["deepseek-chat"].output, 1.10);
    assert_eq!(cfg.tasks.paths, vec!["/v1/videos"]);
    assert_eq!(
        cfg.auto_groups,
        vec![
            std::sync::Arc::<str>::from("vip"),
            std::sync::Arc::<str>::from("default")
        ]
    );
    assert_eq!(
        cfg.routing.failover_on.to_string(),
        "100-199,300-399,401-407,409-503,505-523,525-599"
    );
}

#[test]
fn defaults_apply() {
    let cfg = load(CH).unwrap();
    assert_eq!(cfg.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(cfg.admin.listen.to_string(), "127.0.0.1:9090");
    assert!(cfg.admin.token.is_none());
    assert_eq!(cfg.storage.path, "./switchyard.db");
    assert_eq!(cfg.limits.max_body_bytes, 33_554_432);
    assert_eq!(cfg.limits.max_connections, 10_000);
    let timeouts = &cfg.timeouts;
    let secs: Vec<u64> = [
        timeouts.upstream_header,
        timeouts.image_upstream_header,
        timeouts.first_byte,
        timeouts.keepalive,
        timeouts.non_stream,
        timeouts.request_deadline,
        timeouts.drain,
    ]
    .iter()
    .map(|duration| duration.as_secs())
    .collect();
    assert_eq!(secs, vec![60, 300, 30, 15, 600, 900, 30]);
    assert_eq!(cfg.routing.retry_times, 3);
    assert_eq!(cfg.routing.tier_walk, TierWalk::Exhaust);
    assert!(cfg.routing.failover_on.contains(429) && !cfg.routing.failover_on.contains(504));
    assert_eq!(cfg.routing.never_failover_on.to_string(), "504,524");
    assert_eq!(cfg.routing.retry_budget.ratio, 0.2);
    assert_eq!(cfg.resilience, merge::default_resilience());
    assert_eq!(
        cfg.resilience.retry.retry_on.to_string(),
        "429,502-504,522,524"
    );
    assert_eq!(cfg.auto_disable.statuses.to_string(), "401");
    assert_eq!(cfg.auto_disable.error_codes.len(), 4);
    assert!(!cfg.images_failover.enabled);
    assert_eq!(cfg.images_failover.key_retry_budget, 1);
    let channel = &cfg.channels[0];
    assert_eq!(
        (
            channel.priority,
            channel.weight,
            channel.enabled,
            channel.auto_ban
        ),
        (0, 100, true, true)
    );
    assert_eq!(channel.groups, vec!["default"]);
    assert_eq!(channel.kind, ChannelKind::OpenAi);
    let rules = &cfg.affinity.rules;
    assert_eq!(rules.len(), 2);
    assert!(rules[0].model.is_match("gpt-4o") && rules[0].path == "/v1/responses");
    assert!(matches!(&rules[1].key, AffinityKey::Body(path) if path == &["metadata", "user_id"]));
    assert_eq!(cfg.affinity.sticky.bucket_ttl, Duration::from_secs(600));
}

#[test]
fn empty_rules_list_means_no_rules() {
    let cfg = load(&format!("{CH}affinity:\n  rules: []\n")).unwrap();
    assert!(cfg.affinity.rules.is_empty());
}

#[test]
fn empty_file_is_all_defaults() {
    let cfg = load("# nothing\n").unwrap();
    assert!(cfg.channels.is_empty());
}

#[test]
fn missing_file_names_it() {
    let error = load_with_env(Path::new("/nonexistent/sw.yaml"), &HashMap::new()).unwrap_err();
    assert!(
        error.to_string().contains("/nonexistent/sw.yaml"),
        "{error}"
    );
}

#[test]
fn resilience_merge_matches_the_defaults_table() {
    let yaml = r#"
resilience:
  retry: {max_retries: 2}
  circuit_breaker: {failure_threshold: 3, timeout: 15s}
channels:
  openai: {base_url: "https://api.openai.com/v1", models: [a]}
  anthropic:
    kind: anthropic
    base_url: https://api.anthropic.com
    models: [b]
    resilience: {retry: {max_retries: 5}}
  ollama:
    base_url: http://127.0.0.1:11434/v1
    models: [c]
    resilience: {circuit_breaker: {failure_threshold: 10, timeout: 5s}}
  vllm:
    base_url: http://127.0.0.1:8000/v1
    models: [d]
    resilience: {circuit_breaker: {enabled: false}}
"#;
    let cfg = load(yaml).unwrap_or_else(|e| panic!("{e}"));
    let row = |name: &str| {
        let channel = cfg
            .channels
            .iter()
            .find(|candidate| candidate.name == name)
            .unwrap();
        let resilience = &channel.resilience;
        (
            resilience.retry.max_retries,
            resilience.circuit_breaker.enabled,
            resilience.circuit_breaker.failure_threshold,
            resilience.circuit_breaker.timeout.as_secs(),
        )
    };
    assert_eq!(row("openai"), (2, true, 3, 15));
    assert_eq!(row("anthropic"), (5, true, 3, 15));
    assert_eq!(row("ollama"), (2, true, 10, 5));
    assert_eq!(row("vllm"), (2, false, 3, 15));
    // untouched fields come from the built-in defaults
    let anthropic = &cfg.channels[0].resilience;
    assert_eq!(anthropic.retry.backoff_factor, 2.0);
    assert_eq!(anthropic.circuit_breaker.success_threshold, 2);
    let names: Vec<&str> = cfg
        .channels
        .iter()
        .map(|channel| channel.name.as_str())
        .collect();
    assert_eq!(names, vec!["anthropic", "ollama", "openai", "vllm"]);
}

#[test]
fn explain_shows_effective_values_not_keys() {
    let cfg = load_str(FULL, Path::new("full.yaml"), &full_env()).unwrap();
    let text = explain(&cfg);
    assert!(text.contains("channel sensenova-1:"), "{text}");
    assert!(text.contains("channel deepseek-official:"), "{text}");
    assert!(text.contains("max_retries=5"), "{text}");
    assert!(text.contains("max_retries=3"), "{text}");
    assert!(text.contains("keys=2"), "{text}");
    assert!(text.contains("failure_on=429,500-599"), "{text}");
    assert!(text.contains("non_stream_timeout=10m"), "{text}");
    assert!(text.contains("deepseek-chat->deepseek-v3"), "{text}");
    for secret in [
        "sk-canary-one-111",
        "sk-canary-two-222",
        "alice-key-333",
        "admin-secret-token",
    ] {
        assert!(!text.contains(secret), "explain leaked a key");
    }
}
