//! Cross-provider failover and tool calls through a translation (R16.1, R16.2): a
//! virtual model whose OpenAI primary is down answers from an Anthropic channel, streamed and
//! not, billed at the real usage; an error at the start of a translated stream still fails
//! over; tool calls keep their ids both ways, in answers, streams and the next request; a
//! Gemini safety block is an error, never an empty answer.
use crate::support;

use serde_json::{json, Value};
use support::*;
use switchyard_mock::{Wire, DEFAULT_CHUNKS, PROMPT_TOKENS};

const IN_PRICE: i64 = 1000;
const OUT_PRICE: i64 = 2000;

fn mock_text() -> String {
    (0..DEFAULT_CHUNKS).map(|i| format!("chunk {i} ")).collect()
}

/// `oa` (openai) serves gpt-x, `an` (anthropic) claude-x; `resilient` tries oa then an,
/// `resilient2` an then oa.
async fn pair() -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["oa", "an"]).await;
    for up in mocks.values() {
        up.set_record(true);
    }
    let yaml = fill(
        &format!(
            "routing:\n  retry_times: 3\nchannels:\n{}  an:\n    kind: anthropic\n    base_url: {{an}}\n    keys: [k]\n    models: [claude-x]\nvirtual_models:\n  resilient:\n    targets: [oa/gpt-x, an/claude-x]\n  resilient2:\n    targets: [an/claude-x, oa/gpt-x]\nclients:\n  alice:\n    key: {ALICE}\n    quota: 100\npricing:\n  resilient: {{input: {IN_PRICE}, output: {OUT_PRICE}}}\n",
            channel("oa", "{oa}", 0, &["gpt-x"]),
        ),
        &mocks,
    );
    (start_gw(&yaml).await, mocks)
}

fn events(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| serde_json::from_str(d).unwrap_or(Value::String(d.to_string())))
        .collect()
}

fn content(text: &str) -> String {
    events(text)
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect()
}

async fn charged(gw: &Gw) -> i64 {
    let (_, v) = gw.admin_get("/admin/clients/alice").await;
    v["charged_micro"].as_i64().unwrap_or(-1)
}

#[tokio::test]
async fn openai_primary_down_fails_over_to_anthropic() {
    let (gw, m) = pair().await;
    m["oa"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let cost = PROMPT_TOKENS as i64 * IN_PRICE + DEFAULT_CHUNKS as i64 * OUT_PRICE;
    let response = gw.chat("resilient", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "oa->an");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["choices"][0]["message"]["content"], mock_text());
    assert_eq!(
        charged(&gw).await,
        cost,
        "billed at the Anthropic answer's usage"
    );
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=1").await;
    let attempts = &log["requests"][0]["attempts"];
    assert!(attempts[0].get("translation").is_none(), "{attempts}");
    assert_eq!(
        attempts[1]["translation"], "openai->anthropic",
        "{attempts}"
    );

    let response = gw.chat("resilient", true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "oa->an");
    let text = response.text().await.unwrap();
    assert_eq!(content(&text), mock_text(), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    // As on the plain path, chunks may say `"usage": null`; the usage chunk itself (asked
    // for on the client's behalf, for billing) is hidden.
    assert!(
        !events(&text).iter().any(|e| e["usage"].is_object()),
        "the client did not ask for usage: {text}"
    );
    gw.flush().await;
    assert_eq!(charged(&gw).await, 2 * cost, "the stream billed too");
    gw.stop().await;
}

/// Anthropic's overload after `message_start` is a hidden error before content: the
/// translated stream still fails over, and the client sees only the next channel's answer.
#[tokio::test]
async fn error_at_the_start_of_a_translated_stream_fails_over() {
    let (gw, m) = pair().await;
    m["an"].push(Behavior::ErrorAfterStart { code: 529 });
    let response = gw.chat("resilient2", true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "an->oa");
    let text = response.text().await.unwrap();
    assert_eq!(content(&text), mock_text(), "{text}");
    assert!(!text.contains("error"), "{text}");
    // Cut after content: the client gets `stream_incomplete` in its own format.
    m["an"].push(Behavior::CutMidStream { after_chunks: 2 });
    let response = gw.chat("resilient2", true).await;
    let text = response.text().await.unwrap();
    assert!(text.contains("chunk 0"), "{text}");
    assert!(text.contains("stream_incomplete"), "{text}");
    assert!(!text.contains("event:"), "OpenAI framing only: {text}");
    gw.stop().await;
}

const ANTHROPIC_TOOL: &str = r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city":"Paris"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":12}}"#;

const ANTHROPIC_TOOL_STREAM: &str = concat!(
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,\"output_tokens\":1}}}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_01\",\"name\":\"get_weather\",\"input\":{}}}\n\n",
    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"city\\\":\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" \\\"Paris\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

fn tools_openai() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])
}

/// OpenAI client, Anthropic channel: the tool call keeps its id in the answer, in a stream
/// split at arbitrary bytes, and back in the next request's `tool_result`.
#[tokio::test]
async fn openai_tool_call_round_trip_on_anthropic() {
    let (gw, m) = pair().await;
    let raw = |body: &str, ct: &str| Behavior::Raw {
        content_type: ct.into(),
        body: body.into(),
    };
    m["an"].push(raw(ANTHROPIC_TOOL, "application/json"));
    let ask = json!({"model": "claude-x", "tools": tools_openai(), "messages": [{"role": "user", "content": "weather?"}]});
    let response = gw.post("/v1/chat/completions", ALICE, ask.clone()).await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["id"], "toolu_01A09q90qw90lq917835lq9", "{body}");
    assert_eq!(call["function"]["name"], "get_weather");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"city": "Paris"}));
    assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
    let sent = m["an"].requests()[0].json().unwrap();
    assert_eq!(sent["tools"][0]["name"], "get_weather");
    assert_eq!(sent["tools"][0]["input_schema"]["type"], "object", "{sent}");

    let mut next = ask.clone();
    next["messages"] = json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": null, "tool_calls": [call.clone()]},
        {"role": "tool", "tool_call_id": call["id"].clone(), "content": "sunny"}]);
    assert_eq!(
        gw.post("/v1/chat/completions", ALICE, next).await.status(),
        200
    );
    let sent = m["an"].requests()[1].json().unwrap();
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(
        msgs[1]["content"][0]["id"], "toolu_01A09q90qw90lq917835lq9",
        "{sent}"
    );
    assert_eq!(
        msgs[2]["content"][0]["tool_use_id"],
        "toolu_01A09q90qw90lq917835lq9"
    );
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");

    let split = Wire {
        split: vec![7, 1, 13],
        ..Wire::default()
    };
    m["an"].push(raw(ANTHROPIC_TOOL_STREAM, "text/event-stream").with(split));
    let mut streaming_ask = ask.clone();
    streaming_ask["stream"] = json!(true);
    let text = gw
        .post("/v1/chat/completions", ALICE, streaming_ask)
        .await
        .text()
        .await
        .unwrap();
    let evs = events(&text);
    let calls: Vec<&Value> = evs
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert_eq!(calls[0]["id"], "toolu_01", "{text}");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let args: String = calls
        .iter()
        .filter_map(|c| c["function"]["arguments"].as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&args).unwrap(),
        json!({"city": "Paris"})
    );
    assert!(
        evs.iter()
            .any(|e| e["choices"][0]["finish_reason"] == "tool_calls"),
        "{text}"
    );
    gw.stop().await;
}

const OPENAI_TOOL: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":9,"total_tokens":29}}"#;

/// Anthropic client, OpenAI channel: the call's id becomes the `tool_use` id and comes back
/// as the `tool` message's `tool_call_id`.
#[tokio::test]
async fn anthropic_tool_call_round_trip_on_openai() {
    let (gw, m) = pair().await;
    m["oa"].push(Behavior::Raw {
        content_type: "application/json".into(),
        body: OPENAI_TOOL.into(),
    });
    let tools = json!([{"name": "get_weather", "description": "weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let post = |body: Value| {
        gw.http
            .post(format!("{}/v1/messages", gw.base))
            .header("x-api-key", ALICE)
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
    };
    let ask = json!({"model": "gpt-x", "max_tokens": 50, "tools": tools, "messages": [{"role": "user", "content": "weather?"}]});
    let body: Value = post(ask.clone()).await.unwrap().json().await.unwrap();
    let block = body["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["type"] == "tool_use")
        .cloned()
        .unwrap();
    assert_eq!(block["id"], "call_abc123", "{body}");
    assert_eq!(block["input"], json!({"city": "Paris"}));
    assert_eq!(body["stop_reason"], "tool_use");
    let mut next = ask.clone();
    next["messages"] = json!([
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_abc123", "content": "sunny"}]}]);
    assert_eq!(post(next).await.unwrap().status(), 200);
    let sent = m["oa"].requests()[1].json().unwrap();
    let msgs = sent["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["tool_calls"][0]["id"], "call_abc123", "{sent}");
    assert_eq!(msgs[2]["role"], "tool");
    assert_eq!(msgs[2]["tool_call_id"], "call_abc123");
    assert_eq!(msgs[2]["content"], "sunny");
    gw.stop().await;
}

/// A Gemini safety block (`promptFeedback.blockReason`, no candidates) is an error, not an
/// empty answer: the OpenAI client gets 400 `content_filter`, and a stream blocked before
/// content fails the attempt the same way.
#[tokio::test]
async fn gemini_safety_block_is_a_content_filter_error() {
    let mock = MockUpstream::start().await.unwrap();
    let yaml = format!(
        "routing:\n  retry_times: 0\nchannels:\n  g:\n    kind: gemini\n    base_url: http://{}/v1beta\n    keys: [k]\n    models: [gemini-x]\n{CLIENTS}",
        mock.addr()
    );
    let gw = start_gw(&yaml).await;
    let openai_body = |model: &str, stream: bool| json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]});
    let blocked = r#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5,"totalTokenCount":5},"modelVersion":"gemini-x"}"#;
    mock.push(Behavior::Raw {
        content_type: "application/json".into(),
        body: blocked.into(),
    });
    let response = gw
        .post(
            "/v1/chat/completions",
            ALICE,
            openai_body("gemini-x", false),
        )
        .await;
    assert_eq!(response.status(), 400);
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["error"]["code"], "content_filter", "{json}");
    mock.push(Behavior::Raw {
        content_type: "text/event-stream".into(),
        body: format!("data: {blocked}\r\n\r\n"),
    });
    let response = gw
        .post("/v1/chat/completions", ALICE, openai_body("gemini-x", true))
        .await;
    assert_ne!(
        response.status(),
        200,
        "blocked before any content: not committed"
    );
    // The mock speaks Azure faithfully: a deployment path without api-version is a 404.
    let direct = reqwest::Client::new()
        .post(format!(
            "http://{}/openai/deployments/d/chat/completions",
            mock.addr()
        ))
        .header("api-key", "k")
        .json(&openai_body("x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 404);
    gw.stop().await;
}

// ---------------------------------------------------------------------------------------
// R16.3, R16.5, B-commit-point: where translation meets failover, the commit point and the client's tools.
// ---------------------------------------------------------------------------------------

/// `an` (anthropic, claude-x) and `oa` (openai, gpt-x) behind virtual models in both orders,
/// with one attempt allowed (`retry_times: 0`), and `first_byte: 300ms`.
async fn crossing(retries: u32) -> (Gw, std::collections::HashMap<String, MockUpstream>) {
    let mocks = mocks(&["oa", "an"]).await;
    for up in mocks.values() {
        up.set_record(true);
    }
    let yaml = fill(
        &format!(
            "timeouts:\n  first_byte: 300ms\nrouting:\n  retry_times: {{retries}}\nchannels:\n{}  an:\n    kind: anthropic\n    base_url: {{an}}\n    keys: [k]\n    models: [claude-x]\nvirtual_models:\n  native_first:\n    targets: [an/claude-x, oa/gpt-x]\n  translated_first:\n    targets: [oa/gpt-x, an/claude-x]\n  only_oa:\n    targets: [oa/gpt-x]\n{CLIENTS}",
            channel("oa", "{oa}", 0, &["gpt-x"]),
        ),
        &mocks,
    );
    (
        start_gw(&yaml.replace("{retries}", &retries.to_string())).await,
        mocks,
    )
}

/// An Anthropic request OpenAI cannot serve without changing its meaning: a server tool.
fn server_tool_request(model: &str) -> Value {
    json!({"model": model, "max_tokens": 50, "messages": [{"role": "user", "content": "search it"}],
        "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}]})
}

/// R16.3: a translation refusal skips its target. With one attempt
/// allowed, the skipped target gives its attempt back and the next one serves; with the
/// native primary overloaded, the client gets the 529 (retryable), never the refusal; with
/// no target left but the refusing one, the 400 names the field. Nothing reached `oa`.
#[tokio::test]
async fn a_translation_refusal_is_a_local_skip_never_the_final_word_while_a_target_serves() {
    let (gw, m) = crossing(0).await;
    let response = gw
        .post(
            "/v1/messages",
            ALICE,
            server_tool_request("translated_first"),
        )
        .await;
    assert_eq!(
        response.status(),
        200,
        "the native target serves after the skip"
    );
    assert_eq!(route(&response), "oa->an");
    let json: Value = response.json().await.unwrap();
    assert_eq!(json["type"], "message");

    gw.stop().await;
    let (gw, m2) = crossing(1).await;
    m2["an"].push(Behavior::Status {
        code: 529,
        body: Some(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ),
    });
    let response = gw
        .post("/v1/messages", ALICE, server_tool_request("native_first"))
        .await;
    assert_eq!(
        response.status(),
        529,
        "the overload is more useful than the refusal"
    );
    assert_eq!(
        route(&response),
        "an->oa",
        "the refusing fallback was reached and skipped"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "overloaded_error", "{body}");
    assert_eq!(m2["oa"].calls(), 0);

    let response = gw
        .post("/v1/messages", ALICE, server_tool_request("only_oa"))
        .await;
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("tools"),
        "{body}"
    );
    assert_eq!(
        m2["oa"].calls(),
        0,
        "a refused request never reaches the upstream"
    );
    assert_eq!(m["oa"].calls(), 0);

    // The skips are recorded as local skips, not as upstream 400s (the two gateways of this
    // test share the process's metrics: three skips in all).
    gw.flush().await;
    let (_, log) = gw.admin_get("/admin/requests?limit=2").await;
    let first = &log["requests"][1]["attempts"];
    assert_eq!(first[1]["error_class"], "translation_skipped", "{first}");
    assert!(first[1]["upstream_status"].is_null(), "{first}");
    let metrics = gw.metrics().await;
    assert!(
        metrics
            .contains(r#"switchyard_attempts_total{channel="oa",outcome="translation_skipped"} 3"#),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("attempts_total"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    gw.stop().await;
}

/// R16.5: `count_tokens` for a model served only by OpenAI-kind channels answers
/// from the gateway's estimate in Anthropic's shape, with no upstream call; `explain` says so.
/// A model the client cannot use is still a 404.
#[tokio::test]
async fn count_tokens_without_an_anthropic_channel_is_a_local_estimate() {
    let (gw, m) = crossing(0).await;
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/clients/claude-code-count-tokens.json"
        ))
        .expect("fixture"),
    )
    .expect("fixture json");
    let mut body = fixture["body"].clone();
    body["model"] = json!("only_oa");
    let response = gw
        .post("/v1/messages/count_tokens?beta=true", ALICE, body.clone())
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-switchyard-estimate"], "local");
    let json: Value = response.json().await.unwrap();
    let input_tokens = json["input_tokens"].as_u64().expect("input_tokens");
    let text_len = body.to_string().len() as u64;
    assert!(
        input_tokens > 0 && input_tokens <= text_len / 3,
        "{input_tokens} for {text_len} bytes"
    );
    assert_eq!(m["oa"].calls() + m["an"].calls(), 0);
    body["model"] = json!("no-such-model");
    let response = gw.post("/v1/messages/count_tokens", ALICE, body).await;
    assert_eq!(response.status(), 404);
    let (_, ex) = gw
        .admin_get("/admin/explain?client=alice&model=only_oa")
        .await;
    assert!(
        ex.to_string()
            .contains(r#""count_tokens":"local_estimate""#),
        "{ex}"
    );
    gw.stop().await;
}

/// B-commit-point: once the stream's opening has arrived the upstream has proven alive and
/// the first-byte gate (300 ms here) hands over to the idle timer — a model that reasons
/// silently for a second is not cut, natively or translated. An upstream that sends its
/// headers and nothing else is still cut by the first-byte gate.
#[tokio::test]
async fn a_model_that_reasons_silently_after_its_opening_is_not_cut() {
    let (gw, m) = crossing(0).await;
    let think = Behavior::ThinkSilently(std::time::Duration::from_millis(1200));
    // Native Messages: message_start, an empty text block and a ping, then silence.
    m["an"].push(think.clone());
    let response = gw
        .post(
            "/v1/messages",
            ALICE,
            json!({"model": "claude-x", "max_tokens": 10, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(
        text.contains("message_stop") && text.contains("chunk 0"),
        "{text}"
    );
    assert_eq!(m["an"].calls(), 1);
    // Translated (OpenAI client, Anthropic channel): the held opening proves it alive too.
    m["an"].push(think.clone());
    let response = gw.chat("claude-x", true).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert_eq!(content(&text), mock_text(), "{text}");
    assert_eq!(m["an"].calls(), 2);
    // Native chat: the role chunk is the opening.
    m["oa"].push(think);
    let response = gw.chat("gpt-x", true).await;
    let text = response.text().await.unwrap();
    assert_eq!(content(&text), mock_text(), "{text}");
    // Headers and then nothing: cut at the first-byte gate, and the next target answers.
    m["oa"].push(Behavior::StallAfterHeaders(std::time::Duration::from_secs(
        5,
    )));
    let t0 = std::time::Instant::now();
    let response = gw.chat("gpt-x", true).await;
    assert_ne!(response.status(), 200);
    assert!(
        t0.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        t0.elapsed()
    );
    gw.stop().await;
}

/// B-commit-point: a chat chunk with no content (the role chunk) is preamble, so an error
/// right after it fails over (it used to commit the stream and end it in an error).
#[tokio::test]
async fn an_error_right_after_the_chat_role_chunk_fails_over() {
    let (gw, m) = crossing(0).await;
    let gw = {
        gw.stop().await;
        let yaml = fill(
            &format!(
                "routing:\n  retry_times: 2\nchannels:\n{}{}virtual_models:\n  pair:\n    targets: [oa/gpt-x, an/gpt-x]\n{CLIENTS}",
                channel("oa", "{oa}", 0, &["gpt-x"]),
                channel("an", "{an}", 0, &["gpt-x"]),
            ),
            &m,
        );
        start_gw(&yaml).await
    };
    m["oa"].push(Behavior::ErrorAfterStart { code: 503 });
    let response = gw.chat("pair", true).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "oa->an");
    let text = response.text().await.unwrap();
    assert_eq!(content(&text), mock_text(), "{text}");
    assert!(!text.contains("error"), "{text}");
    gw.stop().await;
}

/// B-malformed-events: an OpenAI-format stream event whose data is not JSON never reaches the
/// client (the official SDK dies on it); the stream goes on and the drop is counted.
#[tokio::test]
async fn a_malformed_event_never_reaches_an_openai_client() {
    let (gw, m) = crossing(0).await;
    let chunk = |c: &str| {
        format!("data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{{\"index\":0,\"delta\":{c},\"finish_reason\":null}}]}}\n\n")
    };
    let body = [
        chunk(r#"{"role":"assistant","content":""}"#),
        "data: {\"truncated\": tru\n\n".to_string(),
        chunk(r#"{"content":"Hello"}"#),
        "data: <html>oops</html>\n\n".to_string(),
        "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n".to_string(),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    m["oa"].push(Behavior::Raw {
        content_type: "text/event-stream".into(),
        body,
    });
    let response = gw.chat("gpt-x", true).await;
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(
        !text.contains("tru\n") && !text.contains("<html>"),
        "{text}"
    );
    for line in text.lines().filter_map(|l| l.strip_prefix("data: ")) {
        assert!(
            line == "[DONE]" || serde_json::from_str::<Value>(line).is_ok(),
            "every data line parses: {line}"
        );
    }
    assert_eq!(content(&text), "Hello");
    let metrics = gw.metrics().await;
    assert!(
        metrics.contains("switchyard_stream_malformed_events_total 2"),
        "{}",
        metrics
            .lines()
            .filter(|l| l.contains("malformed"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    gw.stop().await;
}

/// B-max-tokens-field: a translated request's output limit goes in the field the channel takes
/// (`max_tokens_field`, default by kind and model family), and `include_usage: false` holds
/// for translated requests: no `stream_options` upstream, the usage estimated, never 0.
#[tokio::test]
async fn translated_requests_follow_the_channels_compatibility_switches() {
    let mocks = mocks(&["ds", "oa", "fixed"]).await;
    for up in mocks.values() {
        up.set_record(true);
    }
    let ch = |name: &str, model: &str, extra: &str| {
        format!("  {name}:\n    kind: openai\n    base_url: {{{name}}}\n    keys: [k]\n    models: [{model}]\n{extra}")
    };
    let yaml = fill(
        &format!(
            "channels:\n{}{}{}{CLIENTS}",
            ch("ds", "deepseek-chat", "    include_usage: false\n"),
            ch("oa", "gpt-5", ""),
            ch(
                "fixed",
                "local-model",
                "    max_tokens_field: max_completion_tokens\n"
            ),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    for (name, model, field) in [
        ("ds", "deepseek-chat", "max_tokens"),
        ("oa", "gpt-5", "max_completion_tokens"),
        ("fixed", "local-model", "max_completion_tokens"),
    ] {
        let response = gw
            .post(
                "/v1/messages",
                ALICE,
                json!({"model": model, "max_tokens": 77, "stream": true,
                "messages": [{"role": "user", "content": "hi"}]}),
            )
            .await;
        assert_eq!(response.status(), 200, "{name}");
        let text = response.text().await.unwrap();
        assert!(text.contains("message_stop"), "{name}: {text}");
        let sent = mocks[name]
            .requests()
            .last()
            .and_then(|r| r.json())
            .expect("recorded");
        assert_eq!(sent[field], 77, "{name}: {sent}");
        let other = if field == "max_tokens" {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        assert!(sent.get(other).is_none(), "{name}: {sent}");
        assert_eq!(
            sent.get("stream_options").is_some(),
            name != "ds",
            "{name}: {sent}"
        );
    }
    let rows = {
        gw.flush().await;
        let (_, v) = gw.admin_get("/admin/requests?limit=3").await;
        v["requests"].as_array().cloned().unwrap_or_default()
    };
    let ds = rows
        .iter()
        .find(|r| r["public_model"] == "deepseek-chat")
        .expect("ds row");
    assert_eq!(ds["usage_estimated"], true, "{ds}");
    assert!(ds["completion_tokens"].as_u64().unwrap_or(0) > 0, "{ds}");
    gw.stop().await;
}
