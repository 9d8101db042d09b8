//! Writing the neutral request as a Gemini `generateContent` body: `systemInstruction`,
//! `contents` with roles `user`/`model`, images as `inlineData` (base64) or `fileData` (Files
//! API URIs), tool calls as `functionCall` and results as `functionResponse` (matched by name:
//! ids are not sent), and `generationConfig`. The model and `stream` go in the URL.

use serde_json::{json, Map, Value};

use super::emit_openai::put;
use super::ids;
use super::ir::{ChatRequest, Image, Message, Part, ResponseFormat, Role, ToolChoice};

/// Thinking budgets for OpenAI's `reasoning_effort` (the values Google documents for its own
/// OpenAI-compatible endpoint).
pub(super) fn effort_budget(effort: &str) -> Option<u64> {
    match effort {
        "minimal" | "none" => Some(0),
        "low" => Some(1024),
        "medium" => Some(8192),
        "high" => Some(24576),
        _ => None,
    }
}

pub(super) fn write(mut req: ChatRequest) -> Value {
    let format = req.response_format.take();
    let gen = generation_config(format, &req);
    let mut out = Map::new();
    if !req.system.is_empty() {
        let parts: Vec<Value> = req.system.into_iter().map(|t| json!({"text": t})).collect();
        out.insert("systemInstruction".into(), json!({ "parts": parts }));
    }
    let contents = req.messages.into_iter().map(content).collect();
    out.insert("contents".into(), Value::Array(contents));
    if !req.tools.is_empty() {
        let decls: Vec<Value> = req
            .tools
            .into_iter()
            .map(|t| {
                let mut d = Map::new();
                d.insert("name".into(), t.name.into());
                put(&mut d, "description", t.description.map(Value::from));
                // Full JSON Schema; `parameters` takes only Gemini's OpenAPI subset.
                put(&mut d, "parametersJsonSchema", t.schema);
                Value::Object(d)
            })
            .collect();
        out.insert("tools".into(), json!([{ "functionDeclarations": decls }]));
        if let Some(c) = req.tool_choice {
            out.insert(
                "toolConfig".into(),
                json!({ "functionCallingConfig": calling(c) }),
            );
        }
    }
    if !gen.is_empty() {
        out.insert("generationConfig".into(), Value::Object(gen));
    }
    Value::Object(out)
}

fn calling(c: ToolChoice) -> Value {
    match c {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Named(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    }
}

fn generation_config(format: Option<ResponseFormat>, req: &ChatRequest) -> Map<String, Value> {
    let mut g = Map::new();
    put(&mut g, "maxOutputTokens", req.max_tokens.map(Value::from));
    put(&mut g, "temperature", req.temperature.map(Value::from));
    put(&mut g, "topP", req.top_p.map(Value::from));
    put(&mut g, "topK", req.top_k.map(Value::from));
    if !req.stop.is_empty() {
        g.insert("stopSequences".into(), req.stop.as_slice().into());
    }
    put(&mut g, "candidateCount", req.n.map(Value::from));
    put(&mut g, "seed", req.seed.map(Value::from));
    put(
        &mut g,
        "presencePenalty",
        req.presence_penalty.map(Value::from),
    );
    put(
        &mut g,
        "frequencyPenalty",
        req.frequency_penalty.map(Value::from),
    );
    match format {
        Some(ResponseFormat::JsonObject) => {
            g.insert("responseMimeType".into(), "application/json".into());
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            g.insert("responseMimeType".into(), "application/json".into());
            g.insert("responseJsonSchema".into(), schema);
        }
        None => {}
    }
    let budget = req
        .thinking_budget
        .or_else(|| req.reasoning_effort.as_deref().and_then(effort_budget));
    if let Some(b) = budget {
        g.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": b, "includeThoughts": b > 0}),
        );
    }
    g
}

fn content(m: Message) -> Value {
    let role = match m.role {
        Role::User => "user",
        Role::Assistant => "model",
    };
    let mut first_call = true;
    let parts: Vec<Value> = m
        .parts
        .into_iter()
        .map(|p| {
            let sig = match &p {
                Part::ToolCall { id, .. } => signature(id, std::mem::take(&mut first_call)),
                _ => None,
            };
            let mut v = part(p);
            if let Some(s) = sig {
                v["thoughtSignature"] = s.into();
            }
            v
        })
        .collect();
    json!({"role": role, "parts": parts})
}

/// The thought signature for a `functionCall` part: the one carried in the call's id, else —
/// on the first call of a turn, where Gemini 3 requires one — the documented placeholder for
/// calls another model wrote.
fn signature(id: &str, first: bool) -> Option<String> {
    ids::signature_of(id).or_else(|| first.then(|| ids::SKIP_SIGNATURE.to_string()))
}

fn part(p: Part) -> Value {
    match p {
        Part::Text(t) => json!({ "text": t }),
        Part::Image(Image::Base64 { media_type, data }) => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        // Readers admit only Files API URIs for Gemini.
        Part::Image(Image::Url(uri)) => json!({"fileData": {"fileUri": uri}}),
        Part::ToolCall { name, args, .. } => json!({"functionCall": {"name": name, "args": args}}),
        Part::ToolResult {
            name,
            content,
            is_error,
            ..
        } => {
            let text = content
                .into_iter()
                .filter_map(|p| match p {
                    Part::Text(t) => Some(t),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join(super::emit_openai::TEXT_JOINER);
            // Google's documented keys: `output` for a result, `error` for a failure.
            let key = if is_error { "error" } else { "output" };
            let mut response = Map::new();
            response.insert(key.into(), text.into());
            json!({"functionResponse": {"name": name.unwrap_or_default(), "response": response}})
        }
    }
}
