//! Who changed a channel's state, and why, is in the log (R7.2, B-audit-log): an
//! operator's disable and enable through the admin API, an auto-disable, and a probe's
//! re-enable each write one line naming the channel, `by` and `reason`.

use super::binary::Proc;
use super::support::*;

#[tokio::test]
async fn every_enable_and_disable_is_logged_with_who_and_why() {
    let mocks = mocks(&["up", "spare"]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("switchyard.yaml");
    let body = fill(
        &format!(
            "auto_disable: {{probe_interval: 300ms}}\nchannels:\n{}{}{CLIENTS}",
            channel("up", "{up}", 10, &["m"]),
            channel("spare", "{spare}", 0, &["m"])
        ),
        &mocks,
    );
    std::fs::write(&cfg, format!("{}{body}", head(dir.path()))).unwrap();
    let process = Proc::spawn(&cfg, &[]);
    let http = reqwest::Client::new();
    let admin = |action: &str| {
        http.post(format!("{}/admin/channels/up/{action}", process.admin))
            .bearer_auth(ADMIN_TOKEN)
            .send()
    };
    let is = |l: &serde_json::Value, msg: &str, by: &str| {
        l["message"] == msg && l["channel"] == "up" && l["by"] == by && l["level"] == "WARN"
    };

    assert_eq!(
        admin("disable?reason=upstream%20maintenance")
            .await
            .unwrap()
            .status(),
        200
    );
    let line = process
        .wait_log("operator disable", |l| {
            is(l, "channel disabled", "operator")
        })
        .await;
    assert_eq!(
        line["reason"], "disabled by operator: upstream maintenance",
        "{line}"
    );
    assert_eq!(line["via"], "admin API", "{line}");
    assert!(
        line["peer"].as_str().unwrap().starts_with("127.0.0.1:"),
        "{line}"
    );

    assert_eq!(admin("enable").await.unwrap().status(), 200);
    let line = process
        .wait_log("operator enable", |l| is(l, "channel enabled", "operator"))
        .await;
    assert_eq!(
        line["was"], "disabled by operator: upstream maintenance",
        "{line}"
    );

    // The upstream says the key is invalid: the channel is disabled by the rules.
    mocks["up"].push(Behavior::Status {
        code: 401,
        body: None,
    });
    let response = http
        .post(format!("{}/v1/chat/completions", process.base))
        .bearer_auth(ALICE)
        .json(&serde_json::json!({"model": "m", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "served by the spare");
    let line = process
        .wait_log("auto-disable", |l| {
            is(l, "channel disabled", "auto_disable")
        })
        .await;
    assert_eq!(line["reason"], "upstream status 401", "{line}");

    // The models listing answers again: the probe lifts it.
    let line = process
        .wait_log("probe re-enable", |l| is(l, "channel re-enabled", "probe"))
        .await;
    assert_eq!(line["was"], "upstream status 401", "{line}");
    assert!(line["reason"].as_str().unwrap().contains("2xx"), "{line}");
}
