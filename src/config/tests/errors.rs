//! Tests (B-config-errors): one mistake is one error, at its file and line or at the
//! variable it came from, worded in the config's terms.

use std::path::Path;

use crate::config::tests::{env, errs, load, CH};
use crate::config::*;

/// No parser-library or Rust wording in any message.
fn plain(errors: &ConfigErrors) {
    let text = errors.to_string();
    for jargon in [
        "expected i64",
        "expected u32",
        "expected u64",
        "expected f64",
        "DuplicateKeyPolicy",
        "Options",
        "<input>",
        "invalid type:",
        "struct Raw",
        "unknown field",
        "a sequence",
        "humantime",
    ] {
        assert!(!text.contains(jargon), "{jargon:?} in:\n{text}");
    }
}

#[test]
fn a_typo_in_one_channel_is_one_error_with_its_line() {
    // R2.3: the broken channel still declares group vip, so nothing else is reported.
    let yaml = "channels:\n  mock-b:\n    base_url: http://x/v1\n    wieght: 5\n    groups: [vip]\nauto_groups: [vip, gold]\nclients:\n  bob: {key: k1, group: vip}\n  carol: {key: k2, group: gold}\nvirtual_models:\n  v: {targets: [mock-b/m], groups: [gold], bogus: 1}\n";
    let errors = errs(yaml);
    plain(&errors);
    assert_eq!(errors.0.len(), 2, "{errors}");
    let first = errors.0[0].to_string();
    let (head, keys) = first
        .split_once(" the keys here are: ")
        .expect("the error lists the keys");
    assert_eq!(
        head,
        "test.yaml:4: channels.mock-b.wieght: unknown key \"wieght\"; did you mean \"weight\"?"
    );
    let keys: Vec<&str> = keys.split(", ").collect();
    for field in ["kind", "base_url", "keys", "models", "weight", "resilience"] {
        assert!(keys.contains(&field), "{field} missing from {keys:?}");
    }
    assert!(
        errors.0[1]
            .to_string()
            .starts_with("test.yaml:11: virtual_models.v.bogus: unknown key \"bogus\""),
        "{errors}"
    );
    // A misspelled section is one error too (it may be the one that declares the groups).
    let errors = errs("channel:\n  a: {base_url: http://x/v1, groups: [vip]}\nclients:\n  bob: {key: k1, group: vip}\n");
    assert_eq!(errors.0.len(), 1, "{errors}");
    assert!(
        errors.to_string().starts_with(
            "test.yaml:1: channel: unknown key \"channel\"; did you mean \"channels\"?"
        ),
        "{errors}"
    );
    // A group nobody declares is still an error.
    let errors = errs(&format!(
        "{CH}clients:\n  bob: {{key: k1, group: nobody}}\n"
    ));
    assert_eq!(errors.0.len(), 1, "{errors}");
    assert!(
        errors
            .to_string()
            .starts_with("test.yaml:6: clients.bob.group: "),
        "{errors}"
    );
}

#[test]
fn an_error_from_a_variable_names_the_variable_not_the_file() {
    let vars = env(&[("SWITCHYARD_ROUTING__RETRY_TIMES", "many")]);
    let yaml = format!("{CH}routing:\n  retry_times: 2\n");
    let err = load_str(&yaml, Path::new("test.yaml"), &vars).unwrap_err();
    assert_eq!(
        err.to_string(),
        "environment variable SWITCHYARD_ROUTING__RETRY_TIMES: routing.retry_times: \"many\" is not a whole number from 0 to 4294967295"
    );
    // A seed alias, and a channel that only a variable created.
    let vars = env(&[
        ("RETRY_MAX_RETRIES", "lots"),
        ("SWITCHYARD_CHANNELS__GHOST__WEIGHT", "5"),
        ("OUTBOUND_HEADER_TIMEOUT_SECONDS", "1m"),
    ]);
    let err = load_str(CH, Path::new("test.yaml"), &vars).unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("test.yaml"), "{text}");
    for line in [
        "environment variable RETRY_MAX_RETRIES: resilience.retry.max_retries: \"lots\" is not a whole number",
        "environment variable SWITCHYARD_CHANNELS__GHOST__WEIGHT: channels.ghost.base_url: required",
        "environment variable OUTBOUND_HEADER_TIMEOUT_SECONDS: timeouts.upstream_header: \"1m\" is not a whole number of seconds",
    ] {
        assert!(text.lines().any(|printed| printed.starts_with(line)), "{line:?} not in:\n{text}");
    }
    // A value interpolated from ${VAR} names the variable next to the line.
    let vars = env(&[("EMPTY_KEY", " ")]);
    let yaml = format!("{CH}    keys: [\"${{EMPTY_KEY}}\"]\n");
    let err = load_str(&yaml, Path::new("test.yaml"), &vars).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("test.yaml:5: channels.a.keys[0]: empty key")
            && err
                .to_string()
                .ends_with("(the value comes from ${EMPTY_KEY})"),
        "{err}"
    );
}

#[test]
fn channels_with_dashes_are_overridden_from_the_environment() {
    let yaml = "channels:\n  mock-b:\n    base_url: http://x/v1\n    models: [m]\n  Mock.C:\n    base_url: http://y/v1\n    models: [m]\n";
    let vars = env(&[
        ("SWITCHYARD_CHANNELS__MOCK_B__WEIGHT", "7"),
        ("SWITCHYARD_CHANNELS__MOCK_C__PRIORITY", "3"),
    ]);
    let cfg = load_str(yaml, Path::new("t.yaml"), &vars).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = cfg
        .channels
        .iter()
        .map(|channel| channel.name.as_str())
        .collect();
    assert_eq!(names, ["Mock.C", "mock-b"], "no new channel is created");
    assert_eq!(cfg.channels[1].weight, 7);
    assert_eq!(cfg.channels[0].priority, 3);
}

#[test]
fn every_message_speaks_the_configs_terms_with_a_line() {
    each_bad_value_names_file_line_key_and_reason();
    a_duplicate_key_and_broken_yaml_name_their_place();
}

/// Each wrong value: `test.yaml:LINE: KEY: REASON`, worded in the config's terms.
fn each_bad_value_names_file_line_key_and_reason() {
    let cases = [
        (
            "routing: {retry_times: -1}",
            "routing.retry_times",
            "-1 is not a whole number from 0 to 4294967295",
        ),
        (
            "routing: {retry_times: [1]}",
            "routing.retry_times",
            "expected a whole number from 0 to 4294967295, found a list",
        ),
        (
            "debug_headers: maybe",
            "debug_headers",
            "\"maybe\" is not true or false",
        ),
        (
            "auto_groups: vip",
            "auto_groups",
            "expected a list, such as [a, b], found \"vip\"",
        ),
        (
            "limits: {max_body_bytes: 1.5}",
            "limits.max_body_bytes",
            "expected a whole number, 0 or more, found 1.5",
        ),
        (
            "pricing:\n  m: {input: 1}",
            "pricing.m",
            "required key \"output\" is missing",
        ),
        (
            "pricing: {m: {input: x, output: 1}}",
            "pricing.m.input",
            "\"x\" is not a number",
        ),
        (
            "pricing: {m: {input: 1, output: 1, max_output: 0}}",
            "pricing.m.max_output",
            "must be greater than zero",
        ),
        (
            "timeouts: {first_byte: 30}",
            "timeouts.first_byte",
            "30 has no unit; write it with one, such as 30s or 30ms",
        ),
        (
            "timeouts: {first_byte: soon}",
            "timeouts.first_byte",
            "\"soon\" is not a duration",
        ),
        (
            "limits: 5",
            "limits",
            "expected a mapping of settings, found 5",
        ),
    ];
    for (tail, key, reason) in cases {
        let yaml = format!("{CH}{tail}\n");
        let errors = errs(&yaml);
        plain(&errors);
        let line = 5 + tail.matches('\n').count();
        let want = format!("test.yaml:{line}: {key}: {reason}");
        assert!(
            errors
                .0
                .iter()
                .any(|error| error.to_string().starts_with(&want)),
            "{want:?} not in:\n{errors}"
        );
    }
}

/// A key written twice and YAML that does not parse name their place; zero needs no unit.
fn a_duplicate_key_and_broken_yaml_name_their_place() {
    // A key written twice, and YAML that does not parse.
    let errors = errs("channels:\n  a: {base_url: http://x/v1}\n  a: {base_url: http://y/v1}\n");
    plain(&errors);
    assert!(
        errors
            .to_string()
            .starts_with("test.yaml:3: column 3: key \"a\" is written twice in the same mapping"),
        "{errors}"
    );
    let errors = errs("channels:\n  a: {base_url: http://x/v1\n");
    plain(&errors);
    assert!(errors.to_string().starts_with("test.yaml:"), "{errors}");
    // Zero needs no unit.
    let cfg = load(&format!("{CH}timeouts: {{keepalive: 0}}\n")).unwrap_or_else(|e| panic!("{e}"));
    assert!(cfg.timeouts.keepalive.is_zero());
}

/// R17: `shared.redis` must be a redis:// URL, `shared.replicas` at least 1; the URL
/// is kept as a secret; both default to "not shared", 1.
#[test]
fn shared_section_is_validated() {
    let cfg = load(&format!(
        "{CH}shared:\n  redis: redis://:pw@127.0.0.1:6390/2\n  replicas: 3\n"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cfg.shared.replicas, 3);
    let url = cfg.shared.redis.as_ref().expect("redis set");
    assert_eq!(url.expose(), "redis://:pw@127.0.0.1:6390/2");
    assert!(
        !format!("{:?}", cfg.shared).contains("pw"),
        "the URL is a secret"
    );
    let none = load(CH).unwrap_or_else(|e| panic!("{e}"));
    assert!(none.shared.redis.is_none());
    assert_eq!(none.shared.replicas, 1);
    for (yaml, key, says) in [
        (
            "shared: {redis: 'http://x:6379'}\n",
            "shared.redis",
            "redis://",
        ),
        (
            "shared: {redis: 'redis://'}\n",
            "shared.redis",
            "not a valid Redis URL",
        ),
        ("shared: {replicas: 0}\n", "shared.replicas", "at least 1"),
        (
            "shared: {redis: redis://x, replica: 2}\n",
            "shared.replica",
            "replicas",
        ),
    ] {
        let errors = errs(&format!("{CH}{yaml}"));
        plain(&errors);
        let text = errors.to_string();
        assert!(text.contains(key) && text.contains(says), "{yaml}: {text}");
    }
}

/// R1.2, R16.1: the four kinds; azure needs its `api_version`, the others take none; `translate`
/// defaults to on.
#[test]
fn kinds_api_version_and_translate() {
    let channel_yaml = |kind: &str, extra: &str| {
        format!("channels:\n  c:\n    kind: {kind}\n    base_url: http://x\n    models: [m]\n{extra}clients:\n  a: {{key: k}}\n")
    };
    let errors = errs(&channel_yaml("azure", ""));
    assert!(
        errors.to_string().contains("channels.c.api_version")
            && errors.to_string().contains("required"),
        "{errors}"
    );
    let errors = errs(&channel_yaml(
        "azure",
        "    api_version: \"2024-10-21&x=1\"\n",
    ));
    assert!(
        errors.to_string().contains("is not an api-version"),
        "{errors}"
    );
    let errors = errs(&channel_yaml("openai", "    api_version: \"2024-10-21\"\n"));
    assert!(errors.to_string().contains("only kind azure"), "{errors}");
    let errors = errs(&channel_yaml("bedrock", ""));
    assert!(errors.to_string().contains("channels.c.kind"), "{errors}");
    let cfg = load(&channel_yaml("azure", "    api_version: \"2024-10-21\"\n")).unwrap();
    assert_eq!(cfg.channels[0].api_version, "2024-10-21");
    assert!(cfg.channels[0].translate && cfg.channels[0].include_usage);
    let cfg = load(&channel_yaml("gemini", "    translate: false\n")).unwrap();
    assert_eq!(cfg.channels[0].kind, model::ChannelKind::Gemini);
    assert!(!cfg.channels[0].translate && !cfg.channels[0].include_usage);
}
