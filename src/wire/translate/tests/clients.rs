//! Every recorded real client request (`tests/fixtures/clients/`, README there) with a body
//! for `/v1/messages` or `/v1/chat/completions`, translated to every target its format can
//! reach — streaming and not — must translate, and the result must be a body the target
//! provider accepts (`validate`). Then the behaviours of R16.3, R16.5 and B-commit-point, on those bodies.

use std::path::PathBuf;

use serde_json::Value;

use super::super::{
    translate_request, ReasoningHistory, RequestOptions, TranslatedRequest, WireFormat,
};
use super::validate;

/// The recorded client requests, kept in the repository (`tests/fixtures/clients/`).
fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients")
}

struct Fixture {
    name: String,
    from: WireFormat,
    body: Value,
}

fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    let dir = fixtures_dir();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let parsed: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let target = parsed["path"].as_str().unwrap_or("");
        let target = target.split('?').next().unwrap_or("");
        let from = match target {
            "/v1/messages" => WireFormat::Anthropic,
            "/v1/chat/completions" => WireFormat::OpenAi,
            _ => continue,
        };
        if !parsed["body"].is_object() {
            continue;
        }
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        out.push(Fixture {
            name: name.unwrap_or_default(),
            from,
            body: parsed["body"].clone(),
        });
    }
    out
}

fn fixture(name: &str) -> Fixture {
    fixtures()
        .into_iter()
        .find(|f| f.name == name)
        .unwrap_or_else(|| panic!("fixture {name} missing"))
}

fn targets(from: WireFormat) -> [WireFormat; 2] {
    match from {
        WireFormat::Anthropic => [WireFormat::OpenAi, WireFormat::Gemini],
        _ => [WireFormat::Anthropic, WireFormat::Gemini],
    }
}

fn translate_with(
    f: &Fixture,
    to: WireFormat,
    stream: bool,
    opts: &RequestOptions,
) -> (TranslatedRequest, Value) {
    let mut body = f.body.clone();
    body["stream"] = stream.into();
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    let translated = translate_request(f.from, to, &bytes, opts)
        .unwrap_or_else(|e| panic!("{} -> {to:?} (stream {stream}): refused: {e}", f.name));
    let parsed: Value = serde_json::from_slice(&translated.body).unwrap_or_default();
    (translated, parsed)
}

fn translate(f: &Fixture, to: WireFormat, stream: bool) -> (TranslatedRequest, Value) {
    translate_with(f, to, stream, &RequestOptions::new("upstream-model"))
}

fn validator(to: WireFormat) -> fn(&Value) -> Result<(), String> {
    match to {
        WireFormat::OpenAi => validate::openai,
        WireFormat::Anthropic => validate::anthropic,
        WireFormat::Gemini => validate::gemini,
    }
}

#[test]
fn every_client_fixture_translates_to_what_each_target_accepts() {
    let all = fixtures();
    // 10 Anthropic and 4 OpenAI bodies are recorded.
    assert!(all.len() >= 14, "only {} client fixtures found", all.len());
    let reasoning = [ReasoningHistory::ReasoningContent, ReasoningHistory::Drop];
    for f in &all {
        for to in targets(f.from) {
            for stream in [false, true] {
                for history in reasoning {
                    let opts = RequestOptions {
                        reasoning_history: history,
                        ..RequestOptions::new("upstream-model")
                    };
                    let (t, v) = translate_with(f, to, stream, &opts);
                    validator(to)(&v).unwrap_or_else(|e| {
                        panic!("{} -> {to:?} (stream {stream}): {e}\n{v:#}", f.name)
                    });
                    assert_eq!(t.stream, stream, "{}", f.name);
                    let mut seen = t.dropped.clone();
                    seen.dedup();
                    assert_eq!(seen.len(), t.dropped.len(), "{}: {:?}", f.name, t.dropped);
                }
            }
        }
    }
}

#[test]
fn a_mid_conversation_system_message_stays_at_its_place() {
    let captured = fixture("claude-code-tui-opus-multiturn-mid-conversation-system.json");
    let roles: Vec<&str> = captured.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(roles[1], "system", "the fixture's shape");
    let late = captured.body["messages"][1]["content"]
        .as_str()
        .unwrap_or("?");
    let (_, v) = translate(&captured, WireFormat::OpenAi, true);
    let got: Vec<&str> = v["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    // The system prompt first, then the client's messages in their order.
    assert_eq!(got[0], "system");
    assert_eq!(&got[1..], roles.as_slice());
    assert_eq!(v["messages"][2]["content"], late);

    let (_, g) = translate(&captured, WireFormat::Gemini, true);
    let sys = g["systemInstruction"]["parts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(sys.last().map(|p| &p["text"]), Some(&Value::from(late)));
    let turns = g["contents"].as_array().map_or(0, Vec::len);
    assert_eq!(
        turns,
        roles.len() - 1,
        "the neighbours of the system message stay apart"
    );
}

#[test]
fn openrouter_style_cache_control_reaches_anthropic_on_the_same_blocks() {
    let captured = fixture("opencode-chat-claude-cache-control.json");
    let (t, v) = translate(&captured, WireFormat::Anthropic, true);
    let eph = serde_json::json!({"type": "ephemeral"});
    let system = v["system"].as_array().cloned().unwrap_or_default();
    assert_eq!(system.len(), 1, "{v:#}");
    assert_eq!(system[0]["cache_control"], eph);
    assert_eq!(system[0]["text"], captured.body["messages"][0]["content"]);
    let user = &v["messages"][0];
    assert_eq!(user["role"], "user");
    assert_eq!(user["content"][0]["type"], "text");
    assert_eq!(
        user["content"][0]["text"],
        captured.body["messages"][1]["content"]
    );
    assert_eq!(user["content"][0]["cache_control"], eph);
    assert!(!t.dropped.contains(&"cache_control"), "{:?}", t.dropped);

    // Gemini caches implicitly: dropped and reported.
    let (t, g) = translate(&captured, WireFormat::Gemini, true);
    assert!(t.dropped.contains(&"cache_control"), "{:?}", t.dropped);
    assert!(!g.to_string().contains("cache_control"));
}

#[test]
fn an_image_in_a_tool_result_follows_the_tool_message_as_a_user_message() {
    let captured = fixture("claude-code-haiku-read-image-tool-result.json");
    let data = captured.body.to_string();
    let (_, v) = translate(&captured, WireFormat::OpenAi, true);
    let msgs = v["messages"].as_array().cloned().unwrap_or_default();
    let at = msgs
        .iter()
        .position(|m| m["role"] == "tool")
        .unwrap_or_else(|| panic!("no tool message: {v:#}"));
    assert_eq!(
        msgs[at]["content"],
        super::super::request::to_openai::IMAGE_PLACEHOLDER
    );
    let next = &msgs[at + 1];
    assert_eq!(next["role"], "user");
    let url = next["content"][0]["image_url"]["url"]
        .as_str()
        .unwrap_or("");
    let b64 = url.strip_prefix("data:image/png;base64,").unwrap_or("");
    assert!(!b64.is_empty() && data.contains(b64), "{url}");

    let (_, g) = translate(&captured, WireFormat::Gemini, true);
    let last = g["contents"].as_array().and_then(|c| c.last()).cloned();
    let parts = last.map(|c| c["parts"].clone()).unwrap_or_default();
    assert!(parts[0]["functionResponse"].is_object(), "{parts:#}");
    assert_eq!(parts[1]["inlineData"]["mimeType"], "image/png");
}

#[test]
fn reasoning_goes_back_on_the_tool_call_turn_only_when_asked() {
    let captured = fixture("claude-code-opus-tool-followup-thinking.json");
    let thought = "Let me think about this step by step. MOCK-THOUGHT.";
    let with = |history| {
        let opts = RequestOptions {
            reasoning_history: history,
            ..RequestOptions::new("gpt-5.4")
        };
        translate_with(&captured, WireFormat::OpenAi, true, &opts)
    };
    let call_turn = |v: &Value| {
        v["messages"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["tool_calls"].is_array()).cloned())
            .unwrap_or_default()
    };
    let (t, v) = with(ReasoningHistory::ReasoningContent);
    assert_eq!(call_turn(&v)["reasoning_content"], thought, "{v:#}");
    assert!(!t.dropped.contains(&"thinking"));
    let (t, v) = with(ReasoningHistory::Drop);
    assert!(call_turn(&v).get("reasoning_content").is_none(), "{v:#}");
    assert!(t.dropped.contains(&"thinking"));
    // `Auto` by model name.
    let auto = |model| {
        let opts = RequestOptions::new(model);
        let (_, v) = translate_with(&captured, WireFormat::OpenAi, true, &opts);
        call_turn(&v).get("reasoning_content").is_some()
    };
    assert!(auto("deepseek-reasoner"));
    assert!(!auto("gpt-5.4"));
}

#[test]
fn claude_codes_first_request_reports_what_it_drops_and_maps_the_rest() {
    let captured = fixture("claude-code-opus-first-request.json");
    let (t, v) = translate(&captured, WireFormat::OpenAi, true);
    let mut dropped = t.dropped.clone();
    dropped.sort_unstable();
    assert_eq!(dropped, ["cache_control", "context_management"]);
    // `thinking: adaptive` with `output_config.effort: high`.
    assert_eq!(v["reasoning_effort"], "high");
    // `metadata.user_id` is a JSON document: a stable hash that fits OpenAI's 64 characters.
    let user = v["user"].as_str().unwrap_or("");
    assert!(user.starts_with("u_") && user.len() == 64, "{user}");
    let (_, again) = translate(&captured, WireFormat::OpenAi, false);
    assert_eq!(again["user"], user);

    let captured = fixture("claude-code-haiku-first-request.json");
    let (t, v) = translate(&captured, WireFormat::OpenAi, true);
    assert_eq!(v["reasoning_effort"], "high", "budget 31999");
    assert!(t.dropped.contains(&"context_management"));

    let captured = fixture("claude-code-tui-title-structured-output.json");
    let (t, v) = translate(&captured, WireFormat::OpenAi, true);
    assert_eq!(v["response_format"]["type"], "json_schema");
    assert!(v.get("reasoning_effort").is_none(), "thinking disabled");
    assert!(
        t.dropped.contains(&"output_config.effort"),
        "{:?}",
        t.dropped
    );

    let captured = fixture("opencode-chat-gpt-tool-followup.json");
    let (t, _) = translate(&captured, WireFormat::Anthropic, true);
    assert_eq!(t.dropped, ["reasoning_effort"]);
}
