//! Targets are (channel, upstream model) (B-model-not-found): model-scope breakers are keyed by the
//! upstream model, so a virtual model's two targets on one channel fail independently
//! (R6.1), and a 404 "model not found" takes just that (channel, model) out of new plans
//! for the cooldown time (R6.4's duration) instead of costing every request a failed attempt.
use crate::support;

use serde_json::Value;
use support::*;

fn models_sent(mock: &MockUpstream) -> Vec<String> {
    mock.requests()
        .iter()
        .filter_map(|r| r.json())
        .filter_map(|v| v["model"].as_str().map(String::from))
        .collect()
}

/// Seed 004's example: `resilient-chat` → vm/model1, vm/model2 on one channel with
/// `scope: model`. model1's breaker opening must not refuse model2.
#[tokio::test]
async fn a_virtual_models_targets_on_one_channel_have_their_own_breakers() {
    let mocks = mocks(&["vm"]).await;
    let body = fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\n  circuit_breaker:\n    scope: model\n    failure_threshold: 1\n    timeout: 60s\nchannels:\n{}virtual_models:\n  resilient-chat:\n    targets: [vm/model1, vm/model2]\n{CLIENTS}",
            channel("vm", "{vm}", 0, &["model1", "model2"])
        ),
        &mocks,
    );
    let gw = start_gw(&body).await;
    mocks["vm"].push(Behavior::Status {
        code: 503,
        body: None,
    });
    let response = gw.chat("resilient-chat", false).await;
    assert_eq!(response.status(), 200, "model2 answers after model1's 503");
    assert_eq!(route(&response), "vm->vm");
    assert_eq!(models_sent(&mocks["vm"]), ["model1", "model2"]);

    // model1's breaker is open: the plan goes straight to model2.
    let response = gw.chat("resilient-chat", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "vm");
    assert_eq!(models_sent(&mocks["vm"]), ["model1", "model2", "model2"]);
    let (_, v) = gw.admin_get("/admin/channels").await;
    let models = &v["channels"][0]["health"]["breaker"]["models"];
    assert_eq!(
        models,
        &serde_json::json!([{"model": "model1", "state": "open"}]),
        "{v}"
    );
    // The public name model2 is served directly too.
    assert_eq!(gw.chat("model2", false).await.status(), 200);
    gw.stop().await;
}

/// A 404 "model not found" marks (channel, model) unusable: the next requests go straight
/// to the backup, while the channel's other models are still served by it.
#[tokio::test]
async fn model_not_found_takes_the_channel_model_pair_out() {
    let mocks = mocks(&["p", "b"]).await;
    let body = fill(
        &format!(
            "channels:\n{}{}{CLIENTS}",
            channel("p", "{p}", 10, &["m", "m2"]),
            channel("b", "{b}", 0, &["m"])
        ),
        &mocks,
    );
    let gw = start_gw(&body).await;
    mocks["p"].push(Behavior::Status {
        code: 404,
        body: Some(r#"{"error":{"message":"The model `m` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#.into()),
    });
    let response = gw.chat("m", false).await;
    assert_eq!(
        (response.status().as_u16(), route(&response)),
        (200, "p->b".to_string())
    );
    for _ in 0..3 {
        let response = gw.chat("m", false).await;
        assert_eq!(
            (response.status().as_u16(), route(&response)),
            (200, "b".to_string())
        );
    }
    assert_eq!(models_sent(&mocks["p"]), ["m"], "p asked for m once");
    let response = gw.chat("m2", false).await;
    assert_eq!(
        (response.status().as_u16(), route(&response)),
        (200, "p".to_string())
    );
    let (_, v) = gw.admin_get("/admin/channels").await;
    let channel_p: &Value = v["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "p")
        .unwrap();
    assert_eq!(
        channel_p["health"]["models_not_found"][0]["model"], "m",
        "{channel_p}"
    );
    assert_eq!(channel_p["enabled"], true, "the channel itself stays up");
    gw.stop().await;
}
