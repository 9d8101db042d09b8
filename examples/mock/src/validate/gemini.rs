//! What Gemini's `generateContent` refuses: a field its proto does not have (`Invalid JSON
//! payload received. Unknown name "X"`, camelCase and snake_case both accepted, as proto
//! JSON is), a role other than `user` / `model`, and JSON-Schema keywords its `Schema` lacks
//! in `functionDeclarations[].parameters` (`parametersJsonSchema` takes any JSON Schema).
use serde_json::{Map, Value};

use super::Refusal;

pub const TOP: &[&str] = &[
    "contents",
    "tools",
    "toolConfig",
    "safetySettings",
    "systemInstruction",
    "generationConfig",
    "cachedContent",
    "labels",
];

pub const GENERATION: &[&str] = &[
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "speechConfig",
    "thinkingConfig",
    "mediaResolution",
];

const PART: &[&str] = &[
    "text",
    "inlineData",
    "functionCall",
    "functionResponse",
    "fileData",
    "executableCode",
    "codeExecutionResult",
    "thought",
    "thoughtSignature",
    "videoMetadata",
];

const TOOL: &[&str] = &[
    "functionDeclarations",
    "googleSearch",
    "googleSearchRetrieval",
    "codeExecution",
    "urlContext",
];

const DECLARATION: &[&str] = &[
    "name",
    "description",
    "parameters",
    "parametersJsonSchema",
    "response",
    "responseJsonSchema",
    "behavior",
];

/// The fields of Gemini's `Schema` (an OpenAPI subset).
const SCHEMA: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];

/// `snake_case` → `camelCase`, as proto JSON maps field names.
fn camel(k: &str) -> String {
    let mut out = String::with_capacity(k.len());
    let mut up = false;
    for c in k.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn unknown(m: &Map<String, Value>, known: &[&str], at: &str) -> Result<(), Refusal> {
    match m.keys().find(|k| !known.contains(&camel(k).as_str())) {
        None => Ok(()),
        Some(k) => {
            let at = if at.is_empty() {
                String::new()
            } else {
                format!(" at '{at}'")
            };
            Err(Refusal::gemini(&format!(
                "Invalid JSON payload received. Unknown name \"{k}\"{at}: Cannot find field."
            )))
        }
    }
}

fn get<'a>(m: &'a Map<String, Value>, camel_name: &str, snake: &str) -> Option<&'a Value> {
    m.get(camel_name).or_else(|| m.get(snake))
}

/// A `generateContent` / `streamGenerateContent` request.
pub(crate) fn generate(b: &Map<String, Value>) -> Result<(), Refusal> {
    unknown(b, TOP, "")?;
    if let Some(Value::Object(g)) = get(b, "generationConfig", "generation_config") {
        unknown(g, GENERATION, "generation_config")?;
    }
    let Some(Value::Array(contents)) = b.get("contents") else {
        return Err(Refusal::gemini(
            "* GenerateContentRequest.contents: contents is not specified\n",
        ));
    };
    for (i, c) in contents.iter().enumerate() {
        match c.get("role").and_then(Value::as_str) {
            None | Some("user" | "model") => {}
            Some(_) => return Err(Refusal::gemini("Please use a valid role: user, model.")),
        }
        if let Some(Value::Array(parts)) = c.get("parts") {
            for (j, p) in parts.iter().enumerate() {
                if let Some(p) = p.as_object() {
                    unknown(p, PART, &format!("contents[{i}].parts[{j}]"))?;
                }
            }
        }
    }
    if let Some(Value::Array(tools)) = b.get("tools") {
        for (i, t) in tools.iter().enumerate() {
            let Some(t) = t.as_object() else { continue };
            unknown(t, TOOL, &format!("tools[{i}]"))?;
            let decls = get(t, "functionDeclarations", "function_declarations");
            for (j, d) in decls
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(d) = d.as_object() else { continue };
                let at = format!("tools[{i}].function_declarations[{j}]");
                unknown(d, DECLARATION, &at)?;
                if let Some(s) = d.get("parameters") {
                    schema(s, &format!("{at}.parameters"))?;
                }
            }
        }
    }
    Ok(())
}

/// A `Schema` and the schemas inside it.
fn schema(s: &Value, at: &str) -> Result<(), Refusal> {
    let Some(m) = s.as_object() else {
        return Ok(());
    };
    unknown(m, SCHEMA, at)?;
    if let Some(Value::Object(props)) = m.get("properties") {
        for (k, v) in props {
            schema(v, &format!("{at}.properties[{k}].value"))?;
        }
    }
    if let Some(items) = m.get("items") {
        schema(items, &format!("{at}.items"))?;
    }
    if let Some(Value::Array(any)) = get(m, "anyOf", "any_of") {
        for (k, v) in any.iter().enumerate() {
            schema(v, &format!("{at}.any_of[{k}]"))?;
        }
    }
    Ok(())
}
