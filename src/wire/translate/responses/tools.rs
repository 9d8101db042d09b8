//! Responses `tools` and `tool_choice` as Chat Completions function tools: `function` tools
//! mapped, `namespace` tools flattened (`<namespace>__ns__<name>`, split back in the answer
//! by `split`), `web_search` dropped (the model answers without it), other built-in tools
//! refused with their path and type.

use serde_json::{json, Map, Value};

use super::super::refusal::{Path, TranslateError};
use super::super::WireFormat;

/// Joins a namespace and the name of one of its tools in the flattened function name
/// (`multi_agent_v1__ns__spawn_agent`). Distinct from the `__` of MCP tool names
/// (`mcp__server__tool`), and refused in a plain function's name, so a called name splits
/// back without state.
pub const NAMESPACE_MARKER: &str = "__ns__";

/// The name a namespace's tool has upstream.
pub fn flatten(namespace: &str, name: &str) -> String {
    format!("{namespace}{NAMESPACE_MARKER}{name}")
}

/// A called name as the client knows it: `(namespace, name)`; a name that is not a
/// flattened namespace tool is returned as it is.
pub fn split(called: &str) -> (Option<&str>, &str) {
    match called.split_once(NAMESPACE_MARKER) {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() => (Some(ns), name),
        _ => (None, called),
    }
}

/// The (namespace, name) of each namespace tool of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Namespaced(Vec<(String, String)>);

impl Namespaced {
    /// The upstream name of a call in the client's history: `namespace` given, or else the
    /// one namespace tool of this request with that name (a client that does not keep the
    /// namespace of a call), or the name as it is.
    pub fn upstream_name(&self, namespace: Option<&str>, name: &str) -> String {
        if let Some(ns) = namespace.filter(|ns| !ns.is_empty()) {
            return flatten(ns, name);
        }
        let mut hits = self.0.iter().filter(|(_, n)| n == name);
        match (hits.next(), hits.next()) {
            (Some((ns, n)), None) => flatten(ns, n),
            _ => name.to_string(),
        }
    }
}

/// The request's tools as Chat Completions function tools.
#[derive(Debug, Default)]
pub(super) struct Tools {
    pub chat: Vec<Value>,
    pub namespaced: Namespaced,
    pub dropped: Vec<String>,
}

/// Built-in tools a model can do without: offered, not required, so the answer is the
/// model's own without them (Codex always offers `web_search`).
fn droppable(kind: &str) -> bool {
    kind == "web_search" || kind.starts_with("web_search_")
}

pub(super) fn read(value: &Value, p: Path) -> Result<Tools, TranslateError> {
    let list = value
        .as_array()
        .ok_or_else(|| TranslateError::invalid(p, "must be an array of tools"))?;
    let mut out = Tools::default();
    for (i, t) in list.iter().enumerate() {
        let at = p.idx(i);
        let kind = t["type"].as_str().unwrap_or("");
        match kind {
            "function" => out.chat.push(function(t, at, None)?),
            "namespace" => namespace(t, at, &mut out)?,
            k if droppable(k) => out.dropped.push(format!("{at} {k}")),
            "" => return Err(TranslateError::invalid(at.key("type"), "is required")),
            k => return Err(builtin(at, k)),
        }
    }
    Ok(out)
}

/// A built-in tool the upstream cannot run.
fn builtin(at: Path, kind: &str) -> TranslateError {
    TranslateError::unsupported(
        at,
        format!(
            "is the built-in tool `{kind}`, which only OpenAI's Responses API runs; this \
             channel serves Responses by translation and takes function tools only: remove it \
             or route the model to a channel that serves Responses natively"
        ),
    )
}

/// One `{type: function, name, description, parameters, strict}` as a Chat tool.
fn function(value: &Value, at: Path, namespace: Option<&str>) -> Result<Value, TranslateError> {
    let name = value["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| TranslateError::invalid(at.key("name"), "must be a non-empty string"))?;
    if name.contains(NAMESPACE_MARKER) {
        return Err(TranslateError::unsupported(
            at.key("name"),
            format!(
                "contains `{NAMESPACE_MARKER}`, which marks a namespace's tools in a translated \
                 request; rename the tool"
            ),
        ));
    }
    let name = match namespace {
        Some(ns) => flatten(ns, name),
        None => name.to_string(),
    };
    let mut function = Map::new();
    function.insert("name".into(), name.into());
    if let Some(d) = value["description"].as_str() {
        function.insert("description".into(), d.into());
    }
    let params = match &value["parameters"] {
        Value::Null => json!({"type": "object", "properties": {}}),
        v @ Value::Object(_) => v.clone(),
        _ => {
            return Err(TranslateError::invalid(
                at.key("parameters"),
                "must be a JSON Schema object",
            ))
        }
    };
    function.insert("parameters".into(), params);
    // `strict: false` is the default everywhere; only a requested guarantee is passed on.
    if value["strict"].as_bool() == Some(true) {
        function.insert("strict".into(), true.into());
    }
    Ok(json!({"type": "function", "function": function}))
}

/// `{type: namespace, name, tools: [function...]}`: each function as `<namespace>__<name>`.
fn namespace(value: &Value, at: Path, out: &mut Tools) -> Result<(), TranslateError> {
    let ns = value["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| TranslateError::invalid(at.key("name"), "must be a non-empty string"))?;
    let tp = at.key("tools");
    let inner = value["tools"]
        .as_array()
        .ok_or_else(|| TranslateError::invalid(tp, "must be an array of tools"))?;
    for (j, f) in inner.iter().enumerate() {
        let fp = tp.idx(j);
        match f["type"].as_str().unwrap_or("function") {
            "function" => {
                let tool = function(f, fp, Some(ns))?;
                out.chat.push(tool);
                if let Some(n) = f["name"].as_str() {
                    out.namespaced.0.push((ns.to_string(), n.to_string()));
                }
            }
            k if droppable(k) => out.dropped.push(format!("{fp} {k}")),
            k => return Err(builtin(fp, k)),
        }
    }
    Ok(())
}

/// `tool_choice`: `auto` / `none` / `required` / `{type: function, name}`; a choice that
/// forces a built-in tool is refused.
pub(super) fn choice(value: &Value, at: Path) -> Result<Value, TranslateError> {
    if let Some(s) = value.as_str() {
        return match s {
            "auto" | "none" | "required" => Ok(s.into()),
            _ => Err(TranslateError::invalid(
                at,
                format!("is `{s}`; expected auto, none, required or an object"),
            )),
        };
    }
    match value["type"].as_str() {
        Some("function") => {
            let name = value["name"]
                .as_str()
                .ok_or_else(|| TranslateError::invalid(at.key("name"), "is required"))?;
            Ok(json!({"type": "function", "function": {"name": name}}))
        }
        Some(k) => Err(TranslateError::unsupported(
            at,
            format!(
                "forces `{k}`, which {} cannot express; use auto, none, required or a \
                 function tool",
                WireFormat::OpenAi.name()
            ),
        )),
        None => Err(TranslateError::invalid(at.key("type"), "is required")),
    }
}
