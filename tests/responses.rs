//! The Responses API on every channel (R16.4, R10.1), through the real gateway:
//! Codex's recorded requests (first turn, then the `exec_command` round trip) and SDK-style
//! `responses.create` / `responses.stream` bodies against a native Responses channel, a
//! chat-only OpenAI-compatible channel (`responses: chat`: `/v1/responses` is never asked)
//! and an Anthropic channel; typed events with their sequence numbers, tool calls with their
//! ids, usage and billing; failover of `/v1/responses` without an Idempotency-Key on 503 and
//! 529, and not after a timeout unless the key is there; state-bound requests refused. And
//! every recorded Codex request translated by `wire::translate::responses` for each upstream
//! format, checked against what that provider accepts (`responses/validate.rs`).
use crate::support;
#[path = "responses/validate.rs"]
mod validate;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use support::*;
use switchyard::wire::translate::responses::request_to;
use switchyard::wire::translate::{RequestOptions, WireFormat};
use switchyard_mock::{DEFAULT_CHUNKS, PROMPT_TOKENS};

const IN_PRICE: i64 = 1000;
const OUT_PRICE: i64 = 2000;
const OPENAI_CALL_ID: &str = "call_mock_weather_1";
const ANTHROPIC_CALL_ID: &str = "toolu_mock_weather_1";

fn mock_text() -> String {
    (0..DEFAULT_CHUNKS).map(|i| format!("chunk {i} ")).collect()
}

/// The recorded client requests (`tests/fixtures/clients/`, see its README).
fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients")
}

/// A recorded Codex request body.
fn codex(name: &str) -> Value {
    let path = fixtures_dir().join(format!("codex-responses-{name}.json"));
    let text = std::fs::read_to_string(path).expect("fixture");
    let body: Value = serde_json::from_str(&text).expect("fixture JSON");
    body["body"].clone()
}

/// Every Codex Responses request fixture with a body: (file name, body).
fn codex_fixtures() -> Vec<(String, Value)> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .expect("fixtures dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("codex-responses-") && n.ends_with(".json"))
        .collect();
    names.sort();
    let out: Vec<(String, Value)> = names
        .into_iter()
        .map(|n| {
            let stem = n
                .trim_start_matches("codex-responses-")
                .trim_end_matches(".json");
            (n.clone(), codex(stem))
        })
        .filter(|(_, b)| b.is_object())
        .collect();
    assert!(out.len() >= 3, "the Codex fixtures are missing: {out:?}");
    out
}

fn translate(upstream: WireFormat, body: &Value) -> Value {
    let translated = request_to(
        upstream,
        body.to_string().as_bytes(),
        &RequestOptions::new("up-model"),
    )
    .expect("translates");
    serde_json::from_slice(&translated.body).expect("JSON")
}

/// `native` (openai, serves /v1/responses), `chatonly` (openai, `responses: chat`), `an`
/// (anthropic), each with its own model; alice pays per token.
async fn three() -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["native", "chatonly", "an"]).await;
    for up in mocks.values() {
        up.set_record(true);
    }
    let yaml = fill(
        &format!(
            "channels:\n{}{}    responses: chat\n  an:\n    kind: anthropic\n    base_url: {{an}}\n    keys: [k]\n    models: [claude-x]\nclients:\n  alice:\n    key: {ALICE}\n    quota: 1000\npricing:\n  claude-x: {{input: {IN_PRICE}, output: {OUT_PRICE}}}\n  gpt-chat: {{input: {IN_PRICE}, output: {OUT_PRICE}}}\n",
            channel("native", "{native}", 0, &["gpt-native"]),
            channel("chatonly", "{chatonly}", 0, &["gpt-chat"]),
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

/// The typed events of a Responses stream, checking `event:` = `type` and the sequence.
fn events(text: &str) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.trim().is_empty()) {
        if frame.lines().all(|l| l.starts_with(':')) {
            continue;
        }
        let name = frame
            .lines()
            .find_map(|l| l.strip_prefix("event: "))
            .unwrap_or_else(|| panic!("no event name: {frame}"));
        let data = frame
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or_else(|| panic!("no data: {frame}"));
        let body: Value = serde_json::from_str(data).expect("event JSON");
        assert_eq!(body["type"], name, "{frame}");
        out.push((name.to_string(), body));
    }
    for (i, (_, v)) in out.iter().enumerate() {
        if let Some(n) = v["sequence_number"].as_u64() {
            assert_eq!(n, i as u64, "sequence numbers count from 0: {out:?}");
        }
    }
    out
}

fn text_of(evs: &[(String, Value)]) -> String {
    evs.iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .filter_map(|(_, v)| v["delta"].as_str())
        .collect()
}

fn done_items(evs: &[(String, Value)]) -> Vec<Value> {
    evs.iter()
        .filter(|(n, _)| n == "response.output_item.done")
        .map(|(_, v)| v["item"].clone())
        .collect()
}

/// The stream of one `/v1/responses` request: (status, content type, events).
async fn stream(gw: &Gw, body: Value) -> (u16, String, Vec<(String, Value)>) {
    let response = gw.post("/v1/responses", ALICE, body).await;
    let status = response.status().as_u16();
    let ct = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = response.text().await.expect("body");
    let evs = if status == 200 {
        events(&text)
    } else {
        Vec::new()
    };
    (status, ct, evs)
}

fn with_model(mut body: Value, model: &str) -> Value {
    body["model"] = model.into();
    body
}

async fn charged(gw: &Gw) -> i64 {
    let (_, v) = gw.admin_get("/admin/clients/alice").await;
    v["charged_micro"].as_i64().unwrap_or(-1)
}

/// R16.4: Codex completes a tool loop through a chat-only channel and through
/// an Anthropic channel (turn 1 asks for a tool, turn 2 sends its output back).
#[tokio::test]
async fn codex_tool_loop_through_chat_only_and_anthropic_channels() {
    let (gw, m) = three().await;
    for (model, name, path, call_id) in [
        (
            "gpt-chat",
            "chatonly",
            "/v1/chat/completions",
            OPENAI_CALL_ID,
        ),
        ("claude-x", "an", "/v1/messages", ANTHROPIC_CALL_ID),
    ] {
        let up = &m[name];
        up.push(Behavior::ToolCall);
        let turn1 = with_model(codex("first-request-custom-provider"), model);
        let (status, ct, evs) = stream(&gw, turn1).await;
        assert_eq!(status, 200, "{name}");
        assert!(ct.starts_with("text/event-stream"), "{ct}");
        assert_eq!(evs[0].0, "response.created", "{name}: {evs:?}");
        assert_eq!(evs[1].0, "response.in_progress");
        assert_eq!(evs.last().unwrap().0, "response.completed", "{evs:?}");
        let items = done_items(&evs);
        let call = items
            .iter()
            .find(|i| i["type"] == "function_call")
            .unwrap_or_else(|| panic!("{name}: no call in {items:?}"));
        assert_eq!(call["name"], "get_weather");
        assert_eq!(call["call_id"], call_id);
        let args: Value = serde_json::from_str(call["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Paris"}));
        assert_eq!(up.calls_to(path), 1, "{name}");
        assert_eq!(
            up.calls_to("/v1/responses"),
            0,
            "{name}: never asked for Responses"
        );
        let sent = up.requests().last().unwrap().json().unwrap();
        assert!(sent.get("input").is_none(), "{sent}");
        let tools = sent["tools"].to_string();
        assert!(
            tools.contains("multi_agent_v1__ns__close_agent"),
            "{name}: {tools}"
        );
        assert!(!tools.contains("web_search"), "{name}: dropped");

        // Turn 2: the exec_command output goes back; the answer is text.
        let turn2 = with_model(codex("function-call-output"), model);
        let (status, _, evs) = stream(&gw, turn2).await;
        assert_eq!(status, 200);
        // The mock answers a tool result by quoting it (examples/mock/src/script.rs).
        let text = text_of(&evs);
        assert!(
            text.starts_with(switchyard_mock::ANSWER_PREFIX) && text.contains("tool-ok-42"),
            "{name}: {text}"
        );
        let (last, done) = evs.last().unwrap();
        assert_eq!(last, "response.completed");
        assert_eq!(
            done["response"]["usage"]["input_tokens"], PROMPT_TOKENS,
            "{done}"
        );
        let sent = up.requests().last().unwrap().json().unwrap();
        let history = sent["messages"].as_array().unwrap();
        let last_turn = history.last().unwrap();
        if name == "an" {
            assert_eq!(
                last_turn["content"][0]["type"], "tool_result",
                "{last_turn}"
            );
            assert_eq!(
                last_turn["content"][0]["tool_use_id"],
                "call_4a4b4de3918042a2860c"
            );
        } else {
            assert_eq!(last_turn["role"], "tool");
            assert_eq!(last_turn["tool_call_id"], "call_4a4b4de3918042a2860c");
            assert!(last_turn["content"]
                .as_str()
                .unwrap()
                .contains("tool-ok-42"));
        }
    }
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=4").await;
    let labels: Vec<String> = log["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["attempts"][0]["translation"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(
        labels,
        [
            "responses->anthropic",
            "responses->anthropic",
            "responses->openai",
            "responses->openai"
        ]
    );
    gw.stop().await;
}

/// A native Responses channel gets Codex's body as it is, and its events are relayed.
#[tokio::test]
async fn a_native_channel_is_not_translated() {
    let (gw, m) = three().await;
    let body = with_model(codex("function-call-output"), "gpt-native");
    let (status, _, evs) = stream(&gw, body.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(evs.last().unwrap().0, "response.completed");
    assert_eq!(m["native"].calls_to("/v1/responses"), 1);
    assert_eq!(m["native"].calls_to("/v1/chat/completions"), 0);
    let sent = m["native"].requests().last().unwrap().json().unwrap();
    assert_eq!(sent["input"], body["input"], "forwarded as it is");
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=1").await;
    assert!(
        log["requests"][0]["attempts"][0]
            .get("translation")
            .is_none(),
        "{log}"
    );
    gw.stop().await;
}

/// `client.responses.create` (no stream) on the three channels: a Response object with the
/// text, its usage, and the charge at the upstream's real usage.
#[tokio::test]
async fn sdk_create_on_every_channel() {
    let (gw, m) = three().await;
    for model in ["gpt-native", "gpt-chat", "claude-x"] {
        let before = charged(&gw).await;
        let response = gw
            .post(
                "/v1/responses",
                ALICE,
                json!({"model": model, "instructions": "Be brief.", "input": "Say pong",
                       "max_output_tokens": 64}),
            )
            .await;
        assert_eq!(response.status(), 200, "{model}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["object"], "response", "{model}: {body}");
        assert_eq!(body["status"], "completed", "{body}");
        let text: String = body["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "message")
            .flat_map(|i| i["content"].as_array().unwrap().clone())
            .filter_map(|c| c["text"].as_str().map(str::to_string))
            .collect();
        assert!(!text.is_empty(), "{model}: {body}");
        assert_eq!(
            body["usage"]["input_tokens"], PROMPT_TOKENS,
            "{model}: {body}"
        );
        if model != "gpt-native" {
            assert_eq!(text, mock_text(), "{model}");
            assert!(body["id"].as_str().unwrap().starts_with("resp_"), "{body}");
            assert!(
                body["output"][0]["id"]
                    .as_str()
                    .unwrap()
                    .starts_with("msg_"),
                "{body}"
            );
            let cost = PROMPT_TOKENS as i64 * IN_PRICE + DEFAULT_CHUNKS as i64 * OUT_PRICE;
            assert_eq!(
                charged(&gw).await - before,
                cost,
                "{model}: billed at real usage"
            );
        }
    }
    let sent = m["an"].requests().last().unwrap().json().unwrap();
    assert_eq!(sent["system"], "Be brief.");
    assert_eq!(sent["max_tokens"], 64);
    let sent = m["chatonly"].requests().last().unwrap().json().unwrap();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Be brief."})
    );
    // `max_tokens_field: auto` on an OpenAI-compatible host: `max_tokens`.
    assert_eq!(sent["max_tokens"], 64, "{sent}");
    gw.stop().await;
}

/// `client.responses.stream` on the three channels: the typed sequence, text deltas that
/// add up, and usage in `response.completed`.
#[tokio::test]
async fn sdk_stream_on_every_channel() {
    let (gw, _m) = three().await;
    for model in ["gpt-native", "gpt-chat", "claude-x"] {
        let (status, _, evs) = stream(
            &gw,
            json!({"model": model, "input": "Say pong", "stream": true}),
        )
        .await;
        assert_eq!(status, 200, "{model}");
        let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
        // The native channel relays what the (mock) upstream sends; the translated ones
        // write the whole sequence the SDK's accumulator reads.
        let wanted: &[&str] = match model {
            "gpt-native" => &[],
            _ => &[
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.completed",
            ],
        };
        for want in wanted {
            assert!(names.contains(want), "{model}: {want} missing in {names:?}");
        }
        assert_eq!(names[0], "response.created");
        assert_eq!(*names.last().unwrap(), "response.completed");
        let text = text_of(&evs);
        assert!(!text.is_empty(), "{model}");
        let done = &evs.last().unwrap().1["response"];
        assert_eq!(
            done["usage"]["input_tokens"], PROMPT_TOKENS,
            "{model}: {done}"
        );
        if model != "gpt-native" {
            assert_eq!(text, mock_text(), "{model}");
            assert!(names.contains(&"response.content_part.added"), "{names:?}");
            assert!(names.contains(&"response.output_text.done"), "{names:?}");
            assert_eq!(done["output"][0]["content"][0]["text"], mock_text());
        }
    }
    gw.stop().await;
}

/// R10.1: a 503 (OpenAI) or 529 (Anthropic) primary fails over for /v1/responses
/// without an Idempotency-Key, streamed and not.
#[tokio::test]
async fn a_503_and_a_529_primary_fail_over_without_a_key() {
    let mocks = mocks(&["p", "q", "backup"]).await;
    // `p` is native at priority 10 for m1; `q` anthropic at priority 10 for m2; `backup`
    // (chat-only) at 0 for both.
    let yaml = fill(
        &format!(
            "routing:\n  retry_times: 3\nchannels:\n{}  q:\n    kind: anthropic\n    base_url: {{q}}\n    keys: [k]\n    models: [m2]\n    priority: 10\n{}    responses: chat\n{CLIENTS}",
            channel("p", "{p}", 10, &["m1"]),
            channel("backup", "{backup}", 0, &["m1", "m2"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["p"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    mocks["q"].set_default(Behavior::Status {
        code: 529,
        body: Some(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ),
    });
    for (model, first) in [("m1", "p"), ("m2", "q")] {
        for streamed in [false, true] {
            let response = gw
                .post(
                    "/v1/responses",
                    ALICE,
                    json!({"model": model, "input": "hi", "stream": streamed}),
                )
                .await;
            assert_eq!(response.status(), 200, "{model} stream={streamed}");
            assert_eq!(route(&response), format!("{first}->backup"), "{model}");
            let text = response.text().await.unwrap();
            if streamed {
                let evs = events(&text);
                assert_eq!(evs.last().unwrap().0, "response.completed");
                assert_eq!(text_of(&evs), mock_text());
            } else {
                let body: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(body["status"], "completed", "{body}");
            }
        }
    }
    assert_eq!(mocks["backup"].calls_to("/v1/responses"), 0);
    assert_eq!(mocks["backup"].calls_to("/v1/chat/completions"), 4);
    gw.stop().await;
}

/// R10.1: a timeout after the request was sent is ambiguous (the upstream may have
/// generated): no failover for /v1/responses without an Idempotency-Key, failover with one.
#[tokio::test]
async fn a_timeout_after_send_fails_over_only_with_a_key() {
    let mocks = mocks(&["slow", "backup"]).await;
    mocks["slow"].set_default(Behavior::HangBeforeHeaders(Duration::from_secs(3)));
    let yaml = fill(
        &format!(
            "timeouts:\n  non_stream: 300ms\nrouting:\n  retry_times: 3\nchannels:\n{}{}    responses: chat\n{CLIENTS}",
            channel("slow", "{slow}", 10, &["m"]),
            channel("backup", "{backup}", 0, &["m"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let body = json!({"model": "m", "input": "hi"});
    let response = gw.post("/v1/responses", ALICE, body.clone()).await;
    assert_eq!(response.status(), 504);
    assert_eq!(route(&response), "slow");
    assert_eq!(mocks["backup"].calls(), 0);
    let response = gw
        .http
        .post(format!("{}/v1/responses", gw.base))
        .bearer_auth(ALICE)
        .header("idempotency-key", "turn-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "slow->backup");
    gw.stop().await;
}

/// R16.4: a request that needs state at the upstream is refused on a translated channel
/// with a 400 saying why; a built-in tool the channel cannot run is named.
#[tokio::test]
async fn state_bound_requests_and_built_in_tools_are_refused_on_translated_channels() {
    let (gw, m) = three().await;
    for model in ["gpt-chat", "claude-x"] {
        let response = gw
            .post(
                "/v1/responses",
                ALICE,
                json!({"model": model, "input": "and then?", "previous_response_id": "resp_1"}),
            )
            .await;
        assert_eq!(response.status(), 400, "{model}");
        let body: Value = response.json().await.unwrap();
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("previous_response_id") && msg.contains("natively"),
            "{msg}"
        );
        let response = gw
            .post(
                "/v1/responses",
                ALICE,
                json!({"model": model, "input": "x", "tools": [{"type": "code_interpreter"}]}),
            )
            .await;
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        let msg = body["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("code_interpreter") && msg.contains("tools[0]"),
            "{msg}"
        );
    }
    assert_eq!(
        m["chatonly"].calls() + m["an"].calls(),
        0,
        "no attempt made"
    );
    gw.stop().await;
}

#[test]
fn every_codex_fixture_translates_for_every_upstream() {
    for (name, body) in codex_fixtures() {
        let bytes = body.to_string();
        let tools_in = body["tools"].as_array().map_or(0, |t| t.len());
        for upstream in [
            WireFormat::OpenAi,
            WireFormat::Anthropic,
            WireFormat::Gemini,
        ] {
            let translated =
                request_to(upstream, bytes.as_bytes(), &RequestOptions::new("up-model"))
                    .unwrap_or_else(|e| panic!("{name} -> {upstream:?}: {e}"));
            assert!(translated.stream, "{name}");
            assert_eq!(
                translated.dropped.len(),
                1,
                "{name}: web_search dropped: {:?}",
                translated.dropped
            );
            assert!(
                translated.dropped[0].ends_with("web_search"),
                "{:?}",
                translated.dropped
            );
            let out: Value = serde_json::from_slice(&translated.body).unwrap();
            let checked = match upstream {
                WireFormat::OpenAi => validate::chat(&out),
                WireFormat::Anthropic => validate::anthropic(&out),
                WireFormat::Gemini => validate::gemini(&out),
            };
            checked.unwrap_or_else(|e| panic!("{name} -> {upstream:?}: {e}\n{out}"));
            if upstream == WireFormat::OpenAi {
                // 7 function tools + 5 in the namespace; the web search is dropped.
                assert_eq!(
                    out["tools"].as_array().unwrap().len(),
                    tools_in - 2 + 5,
                    "{name}"
                );
                assert_eq!(out["prompt_cache_key"], body["prompt_cache_key"], "{name}");
                assert_eq!(out["messages"][0]["role"], "system", "{name}");
            }
        }
    }
}

#[test]
fn the_codex_tool_round_trip_keeps_call_and_output_together() {
    let (_, body) = codex_fixtures()
        .into_iter()
        .find(|(n, _)| n.contains("function-call-output"))
        .expect("fixture");
    let chat = translate(WireFormat::OpenAi, &body);
    let msgs = chat["messages"].as_array().unwrap();
    let count = msgs.len();
    assert_eq!(
        msgs[count - 2]["tool_calls"][0]["id"],
        "call_4a4b4de3918042a2860c"
    );
    assert_eq!(
        msgs[count - 2]["tool_calls"][0]["function"]["name"],
        "exec_command"
    );
    assert_eq!(msgs[count - 1]["role"], "tool");
    assert!(msgs[count - 1]["content"]
        .as_str()
        .unwrap()
        .contains("tool-ok-42"));
    let messages = translate(WireFormat::Anthropic, &body);
    let last = messages["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["content"][0]["type"], "tool_result", "{last}");
    assert_eq!(
        last["content"][0]["tool_use_id"],
        "call_4a4b4de3918042a2860c"
    );
}

/// B-responses-discovery: an `openai` channel left at `responses: auto` whose server has no
/// `/v1/responses` (404 `{"detail":"Not Found"}`, as vLLM and DeepSeek answer) is found out
/// by the first request, which is sent again at once translated to the same channel — one
/// attempt, no failure — and later requests go straight to Chat Completions.
#[tokio::test]
async fn a_chat_only_server_is_discovered_from_its_404() {
    let mocks = mocks(&["vllm", "other"]).await;
    mocks["vllm"].set_record(true);
    let yaml = fill(
        &format!(
            "channels:\n{}{}{CLIENTS}",
            channel("vllm", "{vllm}", 10, &["m"]),
            channel("other", "{other}", 0, &["m"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let not_found = || Behavior::Status {
        code: 404,
        body: Some(r#"{"detail":"Not Found"}"#.into()),
    };
    mocks["vllm"].push(not_found());
    let (status, _, evs) = stream(
        &gw,
        json!({"model": "m", "input": "Say pong", "stream": true}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(text_of(&evs), mock_text());
    assert_eq!(mocks["vllm"].calls_to("/v1/responses"), 1);
    assert_eq!(
        mocks["vllm"].calls_to("/v1/chat/completions"),
        1,
        "sent again, translated"
    );
    assert_eq!(mocks["other"].calls(), 0, "not a failure: no failover");
    for streamed in [false, true] {
        let response = gw
            .post(
                "/v1/responses",
                ALICE,
                json!({"model": "m", "input": "again", "stream": streamed}),
            )
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(route(&response), "vllm");
    }
    assert_eq!(
        mocks["vllm"].calls_to("/v1/responses"),
        1,
        "never asked again for a path it does not have"
    );
    assert_eq!(mocks["vllm"].calls_to("/v1/chat/completions"), 3);
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=3").await;
    for rec in log["requests"].as_array().unwrap() {
        let attempts = rec["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{rec}");
        assert_eq!(attempts[0]["translation"], "responses->openai", "{rec}");
        assert_eq!(attempts[0]["upstream_status"], 200, "{rec}");
    }
    gw.stop().await;
}

/// A 404 that names the model is the upstream's answer, not a missing path.
#[tokio::test]
async fn a_model_not_found_404_is_not_a_missing_path() {
    let mocks = mocks(&["up"]).await;
    let yaml = fill(
        &format!("channels:\n{}{CLIENTS}", channel("up", "{up}", 0, &["m"])),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["up"].set_default(Behavior::Status {
        code: 404,
        body: Some(
            r#"{"error":{"message":"The model `m` does not exist","type":"invalid_request_error","code":"model_not_found"}}"#
                .into(),
        ),
    });
    let response = gw
        .post("/v1/responses", ALICE, json!({"model": "m", "input": "x"}))
        .await;
    assert_eq!(response.status(), 404);
    assert_eq!(mocks["up"].calls_to("/v1/chat/completions"), 0);
    let response = gw
        .post("/v1/responses", ALICE, json!({"model": "m", "input": "x"}))
        .await;
    assert_eq!(response.status(), 404);
    assert_eq!(mocks["up"].calls_to("/v1/chat/completions"), 0, "no mark");
    gw.stop().await;
}

/// `explain` says, per candidate, how it serves a Responses client: as is, translated
/// (`responses->openai` for `responses: chat`, `responses->anthropic`), or not at all.
#[tokio::test]
async fn explain_shows_how_each_candidate_serves_responses() {
    let yaml = format!(
        "channels:\n{}{}    responses: chat\n{}    responses: none\n  an:\n    kind: anthropic\n    base_url: http://127.0.0.1:9\n    models: [m]\n  strict:\n    kind: anthropic\n    translate: false\n    base_url: http://127.0.0.1:9\n    models: [m]\n  gem:\n    kind: gemini\n    base_url: http://127.0.0.1:9/v1beta\n    models: [m]\n{CLIENTS}",
        channel("native", "http://127.0.0.1:9", 0, &["m"]),
        channel("chatonly", "http://127.0.0.1:9", 0, &["m"]),
        channel("off", "http://127.0.0.1:9", 0, &["m"]),
    );
    let gw = start_gw(&yaml).await;
    let (s, v) = gw.admin_get("/admin/explain?client=alice&model=m").await;
    assert_eq!(s, 200, "{v}");
    let mut seen = std::collections::BTreeMap::new();
    for t in v["routes"][0]["tiers"].as_array().unwrap() {
        for c in t["candidates"].as_array().unwrap() {
            seen.insert(
                c["name"].as_str().unwrap().to_string(),
                c["client_formats"]["responses"]
                    .as_str()
                    .unwrap_or("?")
                    .to_string(),
            );
        }
    }
    let want = [
        ("an", "responses->anthropic"),
        ("chatonly", "responses->openai"),
        ("gem", "responses->gemini"),
        ("native", "as-is"),
        ("off", "no"),
        ("strict", "no"),
    ];
    let want: std::collections::BTreeMap<String, String> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(seen, want);
    gw.stop().await;
}

/// R16.2 across the Responses translation: an Anthropic overload right after
/// `message_start` (the translated stream has only written `response.created` /
/// `response.in_progress`, held before the commit point) fails over, and the streamed answer
/// is billed at the upstream's usage.
#[tokio::test]
async fn an_error_before_content_fails_over_and_the_stream_is_billed() {
    let mocks = mocks(&["an", "backup"]).await;
    let yaml = fill(
        &format!(
            "routing:\n  retry_times: 3\nchannels:\n  an:\n    kind: anthropic\n    base_url: {{an}}\n    keys: [k]\n    models: [m]\n    priority: 10\n{}    responses: chat\nclients:\n  alice:\n    key: {ALICE}\n    quota: 1000\npricing:\n  m: {{input: {IN_PRICE}, output: {OUT_PRICE}}}\n",
            channel("backup", "{backup}", 0, &["m"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["an"].push(Behavior::ErrorAfterStart { code: 529 });
    let response = gw
        .post(
            "/v1/responses",
            ALICE,
            json!({"model": "m", "input": "hi", "stream": true}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "an->backup");
    let evs = events(&response.text().await.unwrap());
    let created = evs.iter().filter(|(n, _)| n == "response.created").count();
    assert_eq!(
        created, 1,
        "the failed attempt's preamble was held: {evs:?}"
    );
    assert_eq!(text_of(&evs), mock_text());
    assert!(evs.iter().all(|(n, _)| n != "response.failed"), "{evs:?}");
    // The Anthropic channel streams and bills too.
    let before = charged(&gw).await;
    let response = gw
        .post(
            "/v1/responses",
            ALICE,
            json!({"model": "m", "input": "hi", "stream": true}),
        )
        .await;
    assert_eq!(route(&response), "an");
    let evs = events(&response.text().await.unwrap());
    assert_eq!(text_of(&evs), mock_text());
    gw.flush().await;
    let cost = PROMPT_TOKENS as i64 * IN_PRICE + DEFAULT_CHUNKS as i64 * OUT_PRICE;
    assert_eq!(
        charged(&gw).await - before,
        cost,
        "billed at the stream's usage"
    );
    gw.stop().await;
}

/// R16.4: a Gemini channel serves the Responses API too, streamed and not, and the
/// function call of a tool answer comes back with a made-up call id.
#[tokio::test]
async fn a_gemini_channel_serves_responses() {
    let mock = MockUpstream::start().await.unwrap();
    mock.set_record(true);
    let yaml = format!(
        "channels:\n  gem:\n    kind: gemini\n    base_url: http://{}/v1beta\n    keys: [\"sk-up\"]\n    models: [gemini-x]\n{CLIENTS}",
        mock.addr()
    );
    let gw = start_gw(&yaml).await;
    let response = gw
        .post(
            "/v1/responses",
            ALICE,
            json!({"model": "gemini-x", "instructions": "be brief", "input": "hi"}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        mock_text(),
        "{body}"
    );
    assert_eq!(body["usage"]["input_tokens"], PROMPT_TOKENS);
    let req = &mock.requests()[0];
    assert_eq!(req.path, "/v1beta/models/gemini-x:generateContent");
    assert_eq!(
        req.json().unwrap()["systemInstruction"]["parts"][0]["text"],
        "be brief"
    );
    let (status, _, evs) = stream(
        &gw,
        json!({"model": "gemini-x", "input": "hi", "stream": true}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(text_of(&evs), mock_text());
    assert_eq!(evs.last().unwrap().0, "response.completed");
    assert_eq!(
        mock.requests()[1].path,
        "/v1beta/models/gemini-x:streamGenerateContent?alt=sse"
    );
    mock.push(Behavior::ToolCall);
    let response = gw
        .post(
            "/v1/responses",
            ALICE,
            json!({"model": "gemini-x", "input": "weather?", "tools": [
                {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]}),
        )
        .await;
    let body: Value = response.json().await.unwrap();
    let call = &body["output"][0];
    assert_eq!(call["type"], "function_call", "{body}");
    assert_eq!(call["name"], "get_weather");
    assert!(
        call["call_id"].as_str().unwrap().starts_with("call_"),
        "{call}"
    );
    gw.stop().await;
}

/// R16.1 with R16.4: a request that needs upstream state is refused by a translated target
/// as a local skip — the next target that serves Responses natively answers it, with one
/// attempt allowed, and the translated channel is never called.
#[tokio::test]
async fn a_state_bound_request_skips_a_translated_target_for_a_native_one() {
    let mocks = mocks(&["native", "chatonly"]).await;
    let yaml = fill(
        &format!(
            "routing:\n  retry_times: 0\nchannels:\n{}    responses: chat\n{}    responses: native\nvirtual_models:\n  both:\n    targets: [chatonly/gpt, native/gpt]\n{CLIENTS}",
            channel("chatonly", "{chatonly}", 0, &["gpt"]),
            channel("native", "{native}", 0, &["gpt"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    let response = gw
        .post(
            "/v1/responses",
            ALICE,
            json!({"model": "both", "input": "and then?", "previous_response_id": "resp_1"}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "chatonly->native");
    assert_eq!(mocks["chatonly"].calls(), 0);
    assert_eq!(mocks["native"].calls_to("/v1/responses"), 1);
    gw.stop().await;
}
