//! Writing the neutral request as a Gemini `generateContent` body: `systemInstruction` (system
//! messages of the conversation appended in order), `contents` with roles `user`/`model`,
//! images as `inlineData` (base64) or `fileData` (Files API URIs), tool calls as
//! `functionCall` and results as `functionResponse` (matched by name: ids are not sent; a
//! result's images follow it as parts), and `generationConfig`. The model and `stream` go in
//! the URL.

use serde_json::{json, Map, Value};

use crate::wire::translate::ids;
use crate::wire::translate::ir::{
    ChatRequest, Image, Message, Part, ResponseFormat, Role, ToolChoice,
};
use crate::wire::translate::request::to_openai::put;

/// Thinking budgets for OpenAI's `reasoning_effort` (the values Google documents for its own
/// OpenAI-compatible endpoint).
pub(in crate::wire::translate) fn effort_budget(effort: &str) -> Option<u64> {
    match effort {
        "minimal" | "none" => Some(0),
        "low" => Some(1024),
        "medium" => Some(8192),
        "high" => Some(24576),
        _ => None,
    }
}

pub(in crate::wire::translate) fn write(mut req: ChatRequest) -> Value {
    let format = req.response_format.take();
    let gen = generation_config(format, &req);
    let mut out = Map::new();
    for p in req.hoist_system() {
        if let Part::Text(t) = p {
            req.system.push(t);
        }
    }
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
                let mut declaration = Map::new();
                declaration.insert("name".into(), t.name.into());
                put(
                    &mut declaration,
                    "description",
                    t.description.map(Value::from),
                );
                // Full JSON Schema; `parameters` takes only Gemini's OpenAPI subset.
                put(&mut declaration, "parametersJsonSchema", t.schema);
                Value::Object(declaration)
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

fn calling(choice: ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"mode": "AUTO"}),
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Named(name) => json!({"mode": "ANY", "allowedFunctionNames": [name]}),
    }
}

fn generation_config(format: Option<ResponseFormat>, req: &ChatRequest) -> Map<String, Value> {
    let mut config = Map::new();
    put(
        &mut config,
        "maxOutputTokens",
        req.max_tokens.map(Value::from),
    );
    put(&mut config, "temperature", req.temperature.map(Value::from));
    put(&mut config, "topP", req.top_p.map(Value::from));
    put(&mut config, "topK", req.top_k.map(Value::from));
    if !req.stop.is_empty() {
        config.insert("stopSequences".into(), req.stop.as_slice().into());
    }
    put(&mut config, "candidateCount", req.n.map(Value::from));
    put(&mut config, "seed", req.seed.map(Value::from));
    put(
        &mut config,
        "presencePenalty",
        req.presence_penalty.map(Value::from),
    );
    put(
        &mut config,
        "frequencyPenalty",
        req.frequency_penalty.map(Value::from),
    );
    match format {
        Some(ResponseFormat::JsonObject) => {
            config.insert("responseMimeType".into(), "application/json".into());
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            config.insert("responseMimeType".into(), "application/json".into());
            config.insert("responseJsonSchema".into(), schema);
        }
        None => {}
    }
    let budget = req
        .thinking_budget
        .or_else(|| req.reasoning_effort.as_deref().and_then(effort_budget));
    if let Some(b) = budget {
        config.insert(
            "thinkingConfig".into(),
            json!({"thinkingBudget": b, "includeThoughts": b > 0}),
        );
    }
    config
}

fn content(message: Message) -> Value {
    let role = match message.role {
        Role::User | Role::System => "user",
        Role::Assistant => "model",
    };
    let mut first_call = true;
    let mut parts: Vec<Value> = Vec::with_capacity(message.parts.len());
    for p in message.parts {
        let sig = match &p {
            Part::ToolCall { id, .. } => signature(id, std::mem::take(&mut first_call)),
            _ => None,
        };
        let at = parts.len();
        part(p, &mut parts);
        if let (Some(s), Some(v)) = (sig, parts.get_mut(at)) {
            v["thoughtSignature"] = s.into();
        }
    }
    json!({"role": role, "parts": parts})
}

/// The thought signature for a `functionCall` part: the one carried in the call's id, else —
/// on the first call of a turn, where Gemini 3 requires one — the documented placeholder for
/// calls another model wrote.
fn signature(id: &str, first: bool) -> Option<String> {
    ids::signature_of(id).or_else(|| first.then(|| ids::SKIP_SIGNATURE.to_string()))
}

/// The Gemini parts of `p` (a tool result's images follow its `functionResponse`).
fn part(p: Part, out: &mut Vec<Value>) {
    let gemini_part = match p {
        Part::Text(t) => json!({ "text": t }),
        Part::Image(img) => image(img),
        Part::ToolCall { name, args, .. } => json!({"functionCall": {"name": name, "args": args}}),
        Part::ToolResult {
            name,
            content,
            is_error,
            ..
        } => {
            let mut texts = Vec::new();
            let mut images = Vec::new();
            for p in content {
                match p {
                    Part::Text(t) => texts.push(t),
                    Part::Image(img) => images.push(image(img)),
                    _ => {}
                }
            }
            let text = texts.join(crate::wire::translate::request::to_openai::TEXT_JOINER);
            // Google's documented keys: `output` for a result, `error` for a failure.
            let key = if is_error { "error" } else { "output" };
            let mut response = Map::new();
            response.insert(key.into(), text.into());
            let name = name.unwrap_or_default();
            out.push(json!({"functionResponse": {"name": name, "response": response}}));
            out.extend(images);
            return;
        }
        // Readers keep neither for Gemini.
        Part::Thinking(_) | Part::CacheControl(_) => return,
    };
    out.push(gemini_part);
}

fn image(img: Image) -> Value {
    match img {
        Image::Base64 { media_type, data } => {
            json!({"inlineData": {"mimeType": media_type, "data": data}})
        }
        // Readers admit only Files API URIs for Gemini.
        Image::Url(uri) => json!({"fileData": {"fileUri": uri}}),
    }
}
