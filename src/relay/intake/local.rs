//! Answers the gateway gives itself, without an upstream (R1.1, B-client-compat):
//! `GET /v1/models` and `GET /v1/models/{id}` in the caller's SDK shape (OpenAI's, or
//! Anthropic's for callers that send `anthropic-version`), and `HEAD /`.

use http::StatusCode;
use serde_json::{json, Value};

use crate::config::model::Client;
use crate::error::GatewayError;
use crate::http::body::{json_response, Resp};
use crate::relay::intake::lookup::client_groups;
use crate::state::Snapshot;

/// Anthropic's model objects carry a creation time; the gateway has none to give.
const EPOCH: &str = "1970-01-01T00:00:00Z";

fn object(id: &str, anthropic: bool) -> Value {
    if anthropic {
        json!({"type": "model", "id": id, "display_name": id, "created_at": EPOCH})
    } else {
        json!({"id": id, "object": "model", "created": 0, "owned_by": "switchyard"})
    }
}

/// `GET /v1/models` from the routing table: the models the caller's groups reach, less those
/// whose every channel is down (R1.1). Pattern-served models are not listed (a pattern is
/// not a model id); `GET /v1/models/{id}` answers for them.
pub fn models(snap: &Snapshot, client: &Client, anthropic: bool) -> Resp {
    let groups = client_groups(snap, client);
    let mut names: Vec<&String> = groups
        .iter()
        .filter_map(|g| snap.table.models_by_group.get(&**g))
        .flatten()
        .collect();
    names.sort();
    names.dedup();
    crate::state::outcome::hide_down_models(snap, groups, &mut names);
    let data: Vec<Value> = names.iter().map(|m| object(m, anthropic)).collect();
    let body = if anthropic {
        json!({"data": data, "has_more": false,
            "first_id": names.first(), "last_id": names.last()})
    } else {
        json!({"object": "list", "data": data})
    };
    json_response(StatusCode::OK, body.to_string())
}

/// `GET /v1/models/{id}`: the model object when the caller's groups serve `id` (by name,
/// virtual model or pattern), else 404 `model_not_found`.
pub fn model(
    snap: &Snapshot,
    client: &Client,
    id: &str,
    anthropic: bool,
) -> Result<Resp, GatewayError> {
    let served = client_groups(snap, client)
        .iter()
        .any(|g| snap.table.serves(g, id));
    if !served {
        return Err(GatewayError::model_not_found(id));
    }
    Ok(json_response(
        StatusCode::OK,
        object(id, anthropic).to_string(),
    ))
}

/// `HEAD /`: the warm-up some clients (Claude Code) send to the base URL; no auth, no body.
pub fn head_root() -> Resp {
    json_response(StatusCode::OK, bytes::Bytes::new())
}

/// R16.5: `POST /v1/messages/count_tokens` for a model whose channels can all
/// serve Messages (translated) but none can count: the gateway's own estimate
/// (`wire::tokens`), in Anthropic's shape, with no upstream call and no charge.
pub fn count_tokens(body: &[u8]) -> Resp {
    let n = crate::wire::tokens::estimate_input_tokens(body);
    let mut resp = json_response(StatusCode::OK, json!({ "input_tokens": n }).to_string());
    resp.headers_mut().insert(
        "x-switchyard-estimate",
        http::HeaderValue::from_static("local"),
    );
    resp
}
