//! The command line as an operator meets it (B-cli): `explain` for a model
//! nothing serves, offline explain without live-looking state, enum values as spelled in
//! the config, `--log-format` help, and a port in use reported once before any file exists.
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

const CONFIG: &str = "routing: {tier_walk: one_per_tier}\nauto_groups: [vip, default]\nchannels:\n  hi:\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n    priority: 10\n  lo:\n    kind: anthropic\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n    groups: [vip]\nclients:\n  alice: {key: k, group: auto}\n";

fn explain(dir: &std::path::Path, model: &str) -> std::process::Output {
    let config_path = dir.join("c.yaml");
    std::fs::write(&config_path, CONFIG).unwrap();
    Command::new(BIN)
        .args(["explain", "--client", "alice", "--model", model, "--config"])
        .arg(&config_path)
        .output()
        .unwrap()
}

#[test]
fn explain_for_an_unserved_model_fails_and_names_the_groups_searched() {
    let dir = tempfile::tempdir().unwrap();
    let out = explain(dir.path(), "gpt-nothing");
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no channel serves model \"gpt-nothing\" for client \"alice\"")
            && err.contains("groups searched: \"vip\", \"default\""),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn offline_explain_shows_no_live_state_and_spells_enums_as_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let out = explain(dir.path(), "m");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["tier_walk"], "one_per_tier");
    assert_eq!(body["served"], true);
    assert!(body["live_state"]
        .as_str()
        .unwrap()
        .contains("/admin/explain"));
    let routes = body["routes"].as_array().unwrap();
    assert_eq!(routes[0]["group"], "vip");
    let cand = &routes[0]["tiers"][0]["candidates"][0];
    assert_eq!(cand["name"], "lo");
    assert_eq!(cand["kind"], "anthropic");
    for live in ["health", "disabled", "disabled_keys", "enabled"] {
        assert!(cand.get(live).is_none(), "{live} shown offline: {cand}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    for debug in [
        "\"Exhaust\"",
        "\"OnePerTier\"",
        "\"OpenAi\"",
        "\"Anthropic\"",
    ] {
        assert!(!text.contains(debug), "{debug} in {text}");
    }
}

#[test]
fn log_format_has_help_text() {
    let out = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let line = help
        .lines()
        .skip_while(|l| !l.contains("--log-format"))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(line.contains("Log line format"), "{help}");
    assert!(line.contains("text") && line.contains("json"), "{help}");
}

#[test]
fn a_port_in_use_is_reported_once_before_any_file_is_created() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    std::fs::write(
        &cfg,
        format!(
            "listen: 127.0.0.1:{port}\nadmin: {{listen: 127.0.0.1:0}}\nstorage: {{path: {}}}\n{}",
            dir.path().join("state.db").display(),
            CONFIG
        ),
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("already in use").count(), 1, "{err}");
    assert!(err.contains(&format!("listen 127.0.0.1:{port}")), "{err}");
    let files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files, ["switchyard.yaml"], "files created: {files:?}");
    drop(taken);
}

/// R16.2: `explain` says, per candidate, how it serves each client format — as is,
/// translated (`openai->anthropic`), or not at all (`translate: false`).
#[test]
fn explain_shows_which_candidates_translate() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("c.yaml");
    let yaml = "channels:\n  oa:\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n  an:\n    kind: anthropic\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n  strict:\n    kind: anthropic\n    translate: false\n    base_url: http://127.0.0.1:9/v1\n    models: [m]\n  gem:\n    kind: gemini\n    base_url: http://127.0.0.1:9/v1beta\n    models: [m]\nclients:\n  alice: {key: k}\n";
    std::fs::write(&config_path, yaml).unwrap();
    let out = Command::new(BIN)
        .args(["explain", "--client", "alice", "--model", "m", "--config"])
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut seen = std::collections::BTreeMap::new();
    for t in body["routes"][0]["tiers"].as_array().unwrap() {
        for c in t["candidates"].as_array().unwrap() {
            let formats = &c["client_formats"];
            seen.insert(
                c["name"].as_str().unwrap().to_string(),
                (
                    formats["chat_completions"].as_str().unwrap().to_string(),
                    formats["messages"].as_str().unwrap().to_string(),
                ),
            );
        }
    }
    let want = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(seen["oa"], want("as-is", "anthropic->openai"), "{seen:?}");
    assert_eq!(seen["an"], want("openai->anthropic", "as-is"), "{seen:?}");
    assert_eq!(seen["strict"], want("no", "as-is"), "{seen:?}");
    assert_eq!(
        seen["gem"],
        want("openai->gemini", "anthropic->gemini"),
        "{seen:?}"
    );
}
