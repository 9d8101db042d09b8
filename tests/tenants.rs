//! Tenants stay apart (B-tenants): task ids are bound to (client, channel, id),
//! sticky keys are scoped by client, and client-chosen model strings grow no state.
use crate::support;

use std::collections::HashMap;

use serde_json::{json, Value};
use support::*;

const BOB: &str = "sk-test-bob";
const TWO_CLIENTS: &str =
    "clients:\n  alice:\n    key: sk-test-alice\n  bob:\n    key: sk-test-bob\n";

fn status(code: u16) -> Behavior {
    Behavior::Status { code, body: None }
}

/// `hi` (priority 10) and `lo` serve the `/v1/videos` task relay; both number their tasks
/// from 1, as independent providers do.
fn video_yaml(mocks: &HashMap<String, MockUpstream>) -> String {
    let ch = |n: &str, p: i64| {
        format!(
            "{}    paths: [/v1/videos]\n",
            channel(n, &format!("{{{n}}}"), p, &["sora"])
        )
    };
    fill(
        &format!(
            "tasks:\n  paths: [/v1/videos]\nresilience:\n  retry:\n    initial_backoff: 10ms\n    max_backoff: 20ms\nchannels:\n{}{}{TWO_CLIENTS}",
            ch("hi", 10),
            ch("lo", 0)
        ),
        mocks,
    )
}

async fn submit(gw: &Gw, key: &str) -> (String, String) {
    let response = gw
        .post("/v1/videos", key, json!({"model": "sora", "prompt": "x"}))
        .await;
    assert_eq!(response.status(), 200);
    let served = response.headers()["x-mock-name"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().await.unwrap();
    (body["id"].as_str().unwrap().to_string(), served)
}

async fn poll(gw: &Gw, key: &str, id: &str) -> reqwest::Response {
    gw.http
        .get(format!("{}/v1/videos/{id}", gw.base))
        .bearer_auth(key)
        .send()
        .await
        .expect("sent")
}

fn served_by(response: &reqwest::Response) -> &str {
    response
        .headers()
        .get("x-mock-name")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Another client of the same group gets 404 for a task it did not create, and the same
/// id handed out by two channels to two clients is two bindings (before and after a
/// restart, when only SQLite knows them).
#[tokio::test]
async fn task_ids_belong_to_the_client_that_created_them() {
    let mocks = mocks(&["hi", "lo"]).await;
    let body = video_yaml(&mocks);
    let gw = start_gw(&body).await;
    let (id, served) = submit(&gw, ALICE).await;
    assert_eq!(served, "hi");

    let before = (mocks["hi"].calls(), mocks["lo"].calls());
    let response = poll(&gw, BOB, &id).await;
    assert_eq!(response.status(), 404, "bob must not reach alice's task");
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["error"]["code"], "task_not_found");
    assert_eq!(
        (mocks["hi"].calls(), mocks["lo"].calls()),
        before,
        "no upstream asked"
    );

    // Bob's own task gets the same id from the other channel.
    mocks["hi"].push(status(503));
    let (bob_id, served) = submit(&gw, BOB).await;
    assert_eq!((bob_id.as_str(), served.as_str()), (id.as_str(), "lo"));

    let response = poll(&gw, ALICE, &id).await;
    assert_eq!(
        (response.status().as_u16(), served_by(&response)),
        (200, "hi")
    );
    let response = poll(&gw, BOB, &id).await;
    assert_eq!(
        (response.status().as_u16(), served_by(&response)),
        (200, "lo")
    );

    gw.flush().await;
    let Gw { running, dir, .. } = gw;
    running.expect("running").shutdown().await;
    let gw = start_in(dir, &body).await;
    let response = poll(&gw, ALICE, &id).await;
    assert_eq!(
        (response.status().as_u16(), served_by(&response)),
        (200, "hi")
    );
    let response = poll(&gw, BOB, &id).await;
    assert_eq!(
        (response.status().as_u16(), served_by(&response)),
        (200, "lo")
    );
    gw.stop().await;
}

/// One client holding the same id on two channels: the second submission does not
/// overwrite the first; a follow-up tries the newest binding first and, when that channel
/// does not know the task, reaches the older one.
#[tokio::test]
async fn equal_task_ids_from_two_channels_never_overwrite_each_other() {
    let mocks = mocks(&["hi", "lo"]).await;
    let gw = start_gw(&video_yaml(&mocks)).await;
    let (first, served) = submit(&gw, ALICE).await;
    assert_eq!(served, "hi");
    mocks["hi"].push(status(503));
    let (second, served) = submit(&gw, ALICE).await;
    assert_eq!((second.as_str(), served.as_str()), (first.as_str(), "lo"));

    mocks["lo"].push(Behavior::Status {
        code: 404,
        body: Some(
            r#"{"error":{"message":"No task found with that id","type":"invalid_request_error"}}"#
                .into(),
        ),
    });
    let response = poll(&gw, ALICE, &first).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "lo->hi");
    assert_eq!(served_by(&response), "hi");
    gw.stop().await;
}

fn chat_yaml(mocks: &HashMap<String, MockUpstream>) -> String {
    let chans: String = ["a", "b", "c"]
        .iter()
        .map(|n| channel(n, &format!("{{{n}}}"), 0, &["m"]))
        .collect();
    fill(&format!("channels:\n{chans}{TWO_CLIENTS}"), mocks)
}

async fn last_log(gw: &Gw) -> Value {
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=1").await;
    log["requests"][0].clone()
}

/// Two tenants' `user: "1"` are two bindings: bob's first request with alice's user id is
/// a miss, not a hit on alice's binding.
#[tokio::test]
async fn sticky_keys_are_scoped_by_client() {
    let mocks = mocks(&["a", "b", "c"]).await;
    let gw = start_gw(&chat_yaml(&mocks)).await;
    let body = json!({"model": "m", "user": "1", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(
        gw.post("/v1/chat/completions", ALICE, body.clone())
            .await
            .status(),
        200
    );
    assert_eq!(
        gw.post("/v1/chat/completions", ALICE, body.clone())
            .await
            .status(),
        200
    );
    let log = last_log(&gw).await;
    assert_eq!(
        (&log["sticky_kind"], &log["sticky_hit"]),
        (&json!("user"), &json!(true)),
        "{log}"
    );

    assert_eq!(
        gw.post("/v1/chat/completions", BOB, body.clone())
            .await
            .status(),
        200
    );
    let log = last_log(&gw).await;
    assert_eq!(log["client"], "bob");
    assert_eq!(log["sticky_kind"], "user");
    assert_eq!(
        log["sticky_hit"], false,
        "bob reached alice's binding: {log}"
    );
    assert_eq!(
        gw.post("/v1/chat/completions", BOB, body).await.status(),
        200
    );
    assert_eq!(last_log(&gw).await["sticky_hit"], true, "bob's own binding");
    let bindings = &gw.running.as_ref().unwrap().gateway.bindings;
    assert_eq!(bindings.len(), 2);
    gw.stop().await;
}

/// Client-chosen `model` strings on a pass-through path create no model breakers (those are
/// keyed by the upstream model from the config) and only a bounded number of unpriced-model
/// notes.
#[tokio::test]
async fn client_model_strings_grow_no_state() {
    let mocks = mocks(&["pt"]).await;
    let body = fill(
        &format!(
            "resilience:\n  circuit_breaker:\n    scope: model\nchannels:\n{}    paths: [/v1/custom]\n{CLIENTS}",
            channel("pt", "{pt}", 0, &["known"])
        ),
        &mocks,
    );
    let gw = start_gw(&body).await;
    let requests = switchyard::billing::UNPRICED_NOTES + 40;
    for i in 0..requests {
        let response = gw
            .post(
                "/v1/custom",
                ALICE,
                json!({"model": format!("client-{i}"), "x": 1}),
            )
            .await;
        assert_eq!(response.status(), 200);
    }
    let gwy = &gw.running.as_ref().unwrap().gateway;
    let st = gwy.registry.get("pt").unwrap();
    assert_eq!(st.breakers.model_count(), 0, "no breaker per client string");
    assert!(gwy.billing.unpriced_noted() <= switchyard::billing::UNPRICED_NOTES);
    // A configured model still gets its own breaker.
    assert_eq!(gw.chat("known", false).await.status(), 200);
    assert_eq!(st.breakers.model_count(), 1);
    gw.stop().await;
}
