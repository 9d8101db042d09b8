//! Tests: bad input (each reported with its key path), interpolation, env overrides and aliases.

use std::path::Path;

use crate::config::tests::{env, errs, full_env, load, CH, FULL};
use crate::config::*;

fn one(yaml: &str, key: &str) {
    let errors = errs(yaml);
    assert!(
        errors.has_key(key),
        "expected an error at {key}, got:\n{errors}"
    );
}

#[test]
fn each_bad_input_names_its_key() {
    bad_channel_fields_name_their_key();
    bad_settings_name_their_key();
    bad_affinity_clients_and_pricing_name_their_key();
}

/// A channel's own fields, its base URL and its resilience.
fn bad_channel_fields_name_their_key() {
    let channel_yaml = |extra: &str| format!("{CH}    {extra}\n");
    one(&channel_yaml("weight: -1"), "channels.a.weight");
    one(&channel_yaml("kind: grpc"), "channels.a.kind");
    one(&channel_yaml("bogus: 1"), "channels.a");
    one(
        &channel_yaml("stream_policy: sometimes"),
        "channels.a.stream_policy",
    );
    one(
        &channel_yaml("status_code_mapping: {\"429\": \"700\"}"),
        "channels.a.status_code_mapping.429",
    );
    one(
        &channel_yaml("status_code_mapping: {\"abc\": \"503\"}"),
        "channels.a.status_code_mapping.abc",
    );
    one(
        &channel_yaml("headers: {host: x}"),
        "channels.a.headers.host",
    );
    one(
        &channel_yaml("headers: {\"bad name\": x}"),
        "channels.a.headers.bad name",
    );
    one(&channel_yaml("paths: [/v2/foo]"), "channels.a.paths[0]");
    one(&channel_yaml("keys: [\"\"]"), "channels.a.keys[0]");
    one(
        &channel_yaml("model_mapping: {x: \"\"}"),
        "channels.a.model_mapping.x",
    );
    one(
        &channel_yaml("non_stream_timeout: soon"),
        "channels.a.non_stream_timeout",
    );
    one(
        &channel_yaml("resilience: {retry: {retry_on: \"42\"}}"),
        "channels.a.resilience.retry.retry_on",
    );
    one(
        &channel_yaml("resilience: {retry: {backoff_factor: 0.5}}"),
        "channels.a.resilience.retry.backoff_factor",
    );
    one(
        &channel_yaml("resilience: {retry: {jitter_factor: 1.5}}"),
        "channels.a.resilience.retry.jitter_factor",
    );
    one(
        &channel_yaml("resilience: {circuit_breaker: {scope: global}}"),
        "channels.a.resilience.circuit_breaker.scope",
    );
    one(
        &channel_yaml("resilience: {circuit_breaker: {nope: 1}}"),
        "channels.a.resilience.circuit_breaker",
    );
    one(
        "channels:\n  a: {base_url: ftp://x/v1}\n",
        "channels.a.base_url",
    );
    one(
        "channels:\n  a: {base_url: \"http:///v1\"}\n",
        "channels.a.base_url",
    );
    one("channels:\n  a: {models: [m]}\n", "channels.a.base_url");
}

/// Routing, timeouts, listeners, TLS, unknown sections and virtual models.
fn bad_settings_name_their_key() {
    one(
        &format!("{CH}routing: {{tier_walk: random}}\n"),
        "routing.tier_walk",
    );
    one(
        &format!("{CH}routing: {{failover_on: \"5xx,,429\"}}\n"),
        "routing.failover_on",
    );
    one(
        &format!("{CH}routing: {{retry_budget: {{ratio: 2}}}}\n"),
        "routing.retry_budget.ratio",
    );
    one(
        &format!("{CH}timeouts: {{first_byte: 3 parsecs}}\n"),
        "timeouts.first_byte",
    );
    one(&format!("{CH}listen: nowhere\n"), "listen");
    one(
        &format!("{CH}admin: {{listen: \"1.2.3.4\"}}\n"),
        "admin.listen",
    );
    one(&format!("{CH}tls: {{cert: /a.pem}}\n"), "tls.key");
    one(&format!("{CH}unknown_section: 1\n"), "unknown_section");
    one(
        &format!("{CH}virtual_models:\n  v: {{targets: [ghost/m]}}\n"),
        "virtual_models.v.targets[0]",
    );
    one(
        &format!("{CH}virtual_models:\n  v: {{targets: [nochannel]}}\n"),
        "virtual_models.v.targets[0]",
    );
    one(
        &format!("{CH}virtual_models:\n  v: {{targets: []}}\n"),
        "virtual_models.v.targets",
    );
    one(
        &format!("{CH}virtual_models:\n  m: {{targets: [a/x]}}\n"),
        "virtual_models.m",
    );
}

/// Affinity rules, clients, auto groups, pricing and tasks.
fn bad_affinity_clients_and_pricing_name_their_key() {
    one(
        &format!("{CH}affinity:\n  rules:\n    - {{model: \"([\", path: /v1/x, key: body.k}}\n"),
        "affinity.rules[0].model",
    );
    one(
        &format!("{CH}affinity:\n  rules:\n    - {{model: x, path: /v1/x, key: cookie.k}}\n"),
        "affinity.rules[0].key",
    );
    one(
        &format!("{CH}clients:\n  bob: {{key: k1, key_sha256: \"ab\"}}\n"),
        "clients.bob",
    );
    one(
        &format!("{CH}clients:\n  bob: {{group: default}}\n"),
        "clients.bob",
    );
    one(
        &format!("{CH}clients:\n  bob: {{key_sha256: \"xyz\"}}\n"),
        "clients.bob.key_sha256",
    );
    one(
        &format!("{CH}clients:\n  bob: {{key: k1, group: nobody}}\n"),
        "clients.bob.group",
    );
    one(
        &format!("{CH}clients:\n  bob: {{key: k1}}\n  carol: {{key: k1}}\n"),
        "clients.carol.key",
    );
    one(&format!("{CH}auto_groups: [ghosts]\n"), "auto_groups[0]");
    one(&format!("{CH}pricing:\n  m: {{input: 1}}\n"), "pricing.m");
    one(
        &format!("{CH}tasks: {{paths: [videos]}}\n"),
        "tasks.paths[0]",
    );
}

#[test]
fn duplicate_sha_and_plain_key_is_detected_without_leaking() {
    let hex = "7fb95b08bb93d6b1d1ad2d1a5dda6f2bb5e0ee7ad3e1a4c31bd31a63a7a6c5c1";
    let yaml = format!("{CH}clients:\n  bob: {{key: k1}}\n  carol: {{key_sha256: \"{hex}\"}}\n");
    // hex above is not sha256("k1"); both load fine
    assert!(load(&yaml).is_ok());
    let real = hex::encode(<sha2::Sha256 as sha2::Digest>::digest(b"secret-k1"));
    let yaml =
        format!("{CH}clients:\n  bob: {{key: secret-k1}}\n  carol: {{key_sha256: \"{real}\"}}\n");
    let errors = errs(&yaml);
    assert!(errors.has_key("clients.carol.key"), "{errors}");
    assert!(!errors.to_string().contains("secret-k1"));
}

#[test]
fn all_errors_are_reported() {
    let yaml = format!(
        "{CH}    weight: -5\n  b:\n    base_url: http://x/v1\n    kind: nope\nrouting: {{tier_walk: zig}}\ntimeouts: {{drain: forever}}\nextra: 1\n"
    );
    let errors = errs(&yaml);
    for key in [
        "channels.a.weight",
        "channels.b.kind",
        "routing.tier_walk",
        "timeouts.drain",
        "extra",
    ] {
        assert!(errors.has_key(key), "missing {key} in:\n{errors}");
    }
    assert!(errors.0.len() >= 5);
    let line = errors.to_string();
    assert!(
        line.lines()
            .any(|printed| printed.starts_with("test.yaml:5: channels.a.weight: ")),
        "{line}"
    );
}

#[test]
fn missing_variable_is_reported_with_line() {
    let yaml = format!("{CH}    keys: [\"${{NOPE_KEY}}\"]\nadmin:\n  token: ${{ALSO_MISSING}}\n");
    let errors = errs(&yaml);
    let text = errors.to_string();
    assert!(
        text.contains("test.yaml:5: environment variable NOPE_KEY is not set"),
        "{text}"
    );
    assert!(
        text.contains("test.yaml:7: environment variable ALSO_MISSING is not set"),
        "{text}"
    );
    // comments are not interpolated; $${ is a literal
    let ok = format!("# ${{NOT_NEEDED}}\n{CH}    headers: {{x-tpl: \"$${{x}}\"}}\n");
    let cfg = load(&ok).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.channels[0].headers[0].1.expose(), "${x}");
}

#[test]
fn env_overrides_nest_and_beat_yaml() {
    let vars = env(&[
        ("SWITCHYARD_ROUTING__RETRY_TIMES", "5"),
        ("SWITCHYARD_DEBUG_HEADERS", "true"),
        ("SWITCHYARD_CHANNELS__A__WEIGHT", "7"),
        ("SWITCHYARD_CHANNELS__A__GROUPS", "[vip, default]"),
        ("SWITCHYARD_ADMIN__TOKEN", "12345"),
        ("SWITCHYARD_ADMIN_TOKEN", "not-an-override"),
        ("SWITCHYARD_RESILIENCE__RETRY__MAX_RETRIES", "9"),
        ("RETRY_MAX_RETRIES", "4"),
    ]);
    let yaml = format!("{CH}routing: {{retry_times: 1}}\n");
    let cfg = load_str(&yaml, Path::new("t.yaml"), &vars).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.routing.retry_times, 5);
    assert!(cfg.debug_headers);
    assert_eq!(cfg.channels[0].weight, 7);
    assert_eq!(cfg.channels[0].groups, vec!["vip", "default"]);
    assert_eq!(cfg.admin.token.as_ref().unwrap().expose(), "12345");
    // SWITCHYARD_ beats the seed alias
    assert_eq!(cfg.resilience.retry.max_retries, 9);
    let bad = env(&[("SWITCHYARD_ROUTING__RETRY_TIMES", "many")]);
    let err = load_str(CH, Path::new("t.yaml"), &bad).unwrap_err();
    assert!(err.has_key("routing.retry_times"), "{err}");
}

#[test]
fn seed_aliases_map_onto_settings() {
    let vars = env(&[
        ("OUTBOUND_HEADER_TIMEOUT_SECONDS", "45"),
        ("OUTBOUND_IMAGE_HEADER_TIMEOUT_SECONDS", "120"),
        ("IMAGES_FAILOVER_ENABLED", "true"),
        ("IMAGES_FAILOVER_INCLUDE_AMBIGUOUS", "true"),
        ("IMAGES_FAILOVER_INCLUDE_UNCERTAIN", "TRUE"),
        ("CHANNEL_RETRY_TIMES", "3"),
        ("RETRY_ON_STATUSES", "429,500-502"),
        ("RETRY_MAX_RETRIES", "6"),
        ("RETRY_INITIAL_BACKOFF", "500ms"),
        ("RETRY_MAX_BACKOFF", "10s"),
        ("RETRY_BACKOFF_FACTOR", "1.5"),
        ("RETRY_JITTER_FACTOR", "0.3"),
        ("CIRCUIT_BREAKER_FAILURE_ON_STATUSES", "5xx"),
        ("CIRCUIT_BREAKER_SCOPE", "model"),
        ("CIRCUIT_BREAKER_ENABLED", "false"),
        ("CIRCUIT_BREAKER_FAILURE_THRESHOLD", "8"),
        ("CIRCUIT_BREAKER_SUCCESS_THRESHOLD", "4"),
        ("CIRCUIT_BREAKER_TIMEOUT", "45s"),
        ("CIRCUIT_BREAKER_SLOW_CALL_THRESHOLD", "20s"),
    ]);
    let yaml = format!(
        "{CH}timeouts: {{upstream_header: 10s}}\nresilience: {{retry: {{max_retries: 1}}}}\n"
    );
    let cfg = load_str(&yaml, Path::new("t.yaml"), &vars).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.timeouts.upstream_header.as_secs(), 45);
    assert_eq!(cfg.timeouts.image_upstream_header.as_secs(), 120);
    let images_failover = &cfg.images_failover;
    assert!(
        images_failover.enabled
            && images_failover.include_ambiguous
            && images_failover.include_uncertain
    );
    assert_eq!(images_failover.key_retry_budget, 3);
    let retry = &cfg.resilience.retry;
    assert_eq!(retry.retry_on.to_string(), "429,500-502");
    assert_eq!(retry.max_retries, 6);
    assert_eq!(retry.initial_backoff.as_millis(), 500);
    assert_eq!(retry.max_backoff.as_secs(), 10);
    assert_eq!((retry.backoff_factor, retry.jitter_factor), (1.5, 0.3));
    let breaker = &cfg.resilience.circuit_breaker;
    assert_eq!(breaker.failure_on.to_string(), "500-599");
    assert_eq!(breaker.scope, model::BreakerScope::Model);
    assert!(!breaker.enabled);
    assert_eq!(
        (breaker.failure_threshold, breaker.success_threshold),
        (8, 4)
    );
    assert_eq!(
        (
            breaker.timeout.as_secs(),
            breaker.slow_call_threshold.as_secs()
        ),
        (45, 20)
    );
    // global only: the channel inherits, it has no block of its own
    assert_eq!(cfg.channels[0].resilience.retry.max_retries, 6);
    let bad = env(&[("OUTBOUND_HEADER_TIMEOUT_SECONDS", "1m")]);
    let err = load_str(CH, Path::new("t.yaml"), &bad).unwrap_err();
    assert!(err.has_key("timeouts.upstream_header"), "{err}");
}

#[test]
fn durations_and_status_sets_accept_zero_and_numbers() {
    let yaml = format!("{CH}auto_disable: {{statuses: 401}}\nresilience: {{circuit_breaker: {{slow_call_threshold: 0, failure_threshold: 0}}}}\n");
    let cfg = load(&yaml).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.auto_disable.statuses.to_string(), "401");
    assert!(cfg.resilience.circuit_breaker.slow_call_threshold.is_zero());
    assert_eq!(cfg.resilience.circuit_breaker.failure_threshold, 0);
    let cfg = load(&format!("{CH}routing: {{never_failover_on: \"\"}}\n")).unwrap();
    assert!(cfg.routing.never_failover_on.is_empty());
}

#[test]
fn full_example_keys_never_in_errors() {
    let broken = FULL.replace("weight: 100", "weight: -100");
    let errors = load_str(&broken, Path::new("f.yaml"), &full_env()).unwrap_err();
    assert!(errors.has_key("channels.sensenova-1.weight"), "{errors}");
    assert!(!errors.to_string().contains("sk-canary"));
}

#[test]
fn sample_messages() {
    let yaml = format!("{CH}    bogus: 1\n  b: {{base_url: \"http://x\", weight: -1}}\nrouting: {{retry_budget: {{ratio: 0.1, extra: 1}}}}\nlimits: {{max_body_bytes: lots}}\n");
    let errors = errs(&yaml);
    let text = errors.to_string();
    assert!(
        text.contains("test.yaml:5: channels.a.bogus: unknown key \"bogus\"; the keys here are: kind, base_url,"),
        "{text}"
    );
    assert!(
        text.contains("channels.b.weight: weight -1 is negative"),
        "{text}"
    );
    assert!(text.contains("routing.retry_budget"), "{text}");
    assert!(text.contains("limits.max_body_bytes"), "{text}");
}

#[test]
fn a_broken_channel_still_declares_its_groups() {
    let yaml = "channels:\n  a: {base_url: \"ftp://x\", groups: [vip]}\nclients:\n  bob: {key: k1, group: vip}\nauto_groups: [vip]\n";
    let errors = errs(yaml);
    assert!(errors.has_key("channels.a.base_url"), "{errors}");
    assert_eq!(errors.0.len(), 1, "{errors}");
}

#[test]
fn yaml_syntax_error_and_numeric_map_keys() {
    let errors = errs("channels:\n  a: [unclosed\n");
    assert_eq!(errors.0.len(), 1, "{errors}");
    assert!(
        errors.to_string().starts_with("test.yaml:2: column "),
        "{errors}"
    );
    let cfg = load(&format!("{CH}    status_code_mapping: {{429: 503}}\n"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.channels[0].status_code_mapping.get(&429), Some(&503));
}

#[test]
fn load_reads_a_real_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sw.yaml");
    std::fs::write(&path, FULL).unwrap();
    let cfg = load_with_env(&path, &full_env()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.source, path);
    let errors = load_with_env(&path, &env(&[])).unwrap_err();
    assert!(errors.to_string().contains("SENSENOVA_KEY_1"), "{errors}");
}
