//! The R7.1 rule table and key/channel disabling.
use super::*;
use crate::config::model::status_set::StatusSet;
use std::time::Duration;

fn cfg() -> AutoDisable {
    AutoDisable {
        enabled: true,
        auto_enable: true,
        statuses: StatusSet::parse("401").unwrap(),
        error_codes: [
            "invalid_api_key",
            "account_deactivated",
            "billing_not_active",
            "Arrearage",
        ]
        .map(String::from)
        .to_vec(),
        error_types: [
            "insufficient_quota",
            "authentication_error",
            "permission_error",
            "forbidden",
        ]
        .map(String::from)
        .to_vec(),
        keywords: vec!["Your credit balance is too low".into()],
        probe_interval: Duration::from_secs(60),
    }
}

fn status(code: u16, ec: Option<&str>, et: Option<&str>, msg: &str) -> Outcome {
    Outcome::Status {
        code,
        error_code: ec.map(String::from),
        error_type: et.map(String::from),
        message: msg.into(),
    }
}

#[test]
fn rule_table() {
    let config = cfg();
    let cases: &[(Outcome, bool, &str)] = &[
        (status(401, None, None, ""), true, "status in statuses"),
        (
            status(403, None, None, ""),
            false,
            "403 alone is not listed",
        ),
        (
            status(400, Some("invalid_api_key"), None, ""),
            true,
            "error code",
        ),
        (
            status(402, Some("arrearage"), None, ""),
            true,
            "error code, any case",
        ),
        (
            status(403, None, Some("permission_error"), ""),
            true,
            "error type",
        ),
        (
            status(400, None, Some("invalid_request_error"), ""),
            false,
            "other type",
        ),
        (
            status(400, None, None, "YOUR CREDIT BALANCE IS TOO LOW now"),
            true,
            "keyword, any case",
        ),
        (status(500, None, None, "internal"), false, "plain 5xx"),
        (
            status(
                429,
                Some("insufficient_quota"),
                Some("insufficient_quota"),
                "credit balance is too low",
            ),
            false,
            "429 never",
        ),
        (
            Outcome::ChannelError(crate::routing::outcome::ChannelFault::InvalidKey),
            true,
            "channel:* error",
        ),
        (
            Outcome::Transport(crate::routing::policy::TransportKind::Connect),
            false,
            "transport",
        ),
        (Outcome::Success, false, "success"),
    ];
    for (o, want, why) in cases {
        assert_eq!(should_disable(o, &config).is_some(), *want, "{why}: {o:?}");
    }
}

#[test]
fn respects_enabled_flag() {
    let mut config = cfg();
    config.enabled = false;
    assert_eq!(should_disable(&status(401, None, None, ""), &config), None);
}

#[test]
fn status_set_429_listed_still_never_disables() {
    let mut config = cfg();
    config.statuses = StatusSet::parse("401,429").unwrap();
    assert_eq!(should_disable(&status(429, None, None, ""), &config), None);
}

fn snapshot(keys: usize, auto_ban: bool) -> Snapshot {
    let yaml = format!(
        "listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\nstorage:\n  path: \":memory:\"\nchannels:\n  c:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n    keys: [{}]\n    models: [m]\n    auto_ban: {auto_ban}\nclients:\n  a:\n    key: sk-a\n",
        (0..keys).map(|i| format!("\"k{i}\"")).collect::<Vec<_>>().join(", ")
    );
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("c.yaml");
    std::fs::write(&config_path, yaml).unwrap();
    let cfg = crate::config::load(&config_path).unwrap();
    let table = crate::routing::compile::compile(std::sync::Arc::new(cfg), 1);
    Snapshot::new(table, &crate::state::Registry::default())
}

#[tokio::test]
async fn auto_ban_false_never_disables() {
    let store = Store::open(":memory:").unwrap();
    let snapshot = snapshot(1, false);
    let (ch, st) = (&snapshot.table.channels[0], &snapshot.states[0]);
    assert_eq!(
        apply(&store, ch, st, &snapshot.key_fps[0], 0, "r", 1),
        Applied::Nothing
    );
    assert!(!st.is_disabled());
}

#[tokio::test]
async fn multi_key_disables_keys_then_the_channel() {
    let store = Store::open(":memory:").unwrap();
    let snapshot = snapshot(2, true);
    let (ch, st, fps) = (
        &snapshot.table.channels[0],
        &snapshot.states[0],
        &snapshot.key_fps[0],
    );
    let km = KeyMap::new([0], &snapshot);
    assert_eq!(km.count(0, 2), 2, "no disabled keys: identity");
    assert_eq!(
        apply(&store, ch, st, fps, 1, "upstream status 401", 1),
        Applied::Key(1)
    );
    assert!(!st.is_disabled());
    assert!(st.key_disabled(&fps[1]) && !st.key_disabled(&fps[0]));
    let km = KeyMap::new([0, 0], &snapshot);
    assert_eq!(km.count(0, 2), 1);
    assert_eq!(km.key(0, 0), 0);
    assert_eq!(
        apply(&store, ch, st, fps, 0, "upstream status 401", 2),
        Applied::Channel
    );
    let disabled = st.disabled().unwrap();
    assert!(disabled.auto);
    assert_eq!(disabled.reason, "upstream status 401");
    store.flush().await.unwrap();
    let rows = store.disabled_states().await.unwrap();
    assert_eq!(rows.len(), 3, "two keys and the channel: {rows:?}");
    assert!(rows.iter().all(|r| r.auto));
    let keys: Vec<_> = rows.iter().map(|r| r.key.clone()).collect();
    assert!(keys.contains(&crate::store::StateKey::Key(fps[0].hex())));
    assert!(keys.contains(&crate::store::StateKey::Key(fps[1].hex())));
    assert!(
        !format!("{rows:?}").contains("k0"),
        "the key itself is never stored"
    );
}

#[tokio::test]
async fn single_key_channel_is_disabled_whole() {
    let store = Store::open(":memory:").unwrap();
    let snapshot = snapshot(1, true);
    let (ch, st) = (&snapshot.table.channels[0], &snapshot.states[0]);
    assert_eq!(
        apply(&store, ch, st, &snapshot.key_fps[0], 0, "r", 1),
        Applied::Channel
    );
    assert!(st.disabled_keys().is_empty());
    assert!(st.is_disabled());
}
