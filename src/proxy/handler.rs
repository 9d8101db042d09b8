//! The request entry point: request id, path dispatch, auth, body limits, routing lookup —
//! then hands the request to the attempt loop (R1.1, R1.4, R14.1, R14.2).

use std::sync::Arc;
use std::time::Instant;

use http::header::{self, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::attempt::{self, Job};
use super::auth;
use super::body::ResponseBody;
use super::gateway::Gateway;
use super::request;
use super::sse::StreamFormat;
use super::task;
use crate::error::{GatewayError, WireFormat};
use crate::routing::family::{classify_path, valid_idempotency_key, PathFamily};
use crate::routing::table::Route;
use crate::state::Snapshot;

pub type Resp = Response<ResponseBody>;

/// Handle one client request. Never panics on request content; every failure is a response.
pub async fn handle(gw: Arc<Gateway>, req: Request<Incoming>) -> Resp {
    let started = Instant::now();
    let request_id = request_id(req.headers());
    let format = if req.uri().path() == "/v1/messages" {
        WireFormat::Anthropic
    } else {
        WireFormat::OpenAi
    };
    let mut resp = match route(&gw, req, started, request_id.clone(), format).await {
        Ok(r) => r,
        Err(e) => error_response(&e, format),
    };
    resp.headers_mut().insert("x-request-id", request_id);
    resp
}

async fn route(
    gw: &Arc<Gateway>,
    req: Request<Incoming>,
    started: Instant,
    request_id: HeaderValue,
    format: WireFormat,
) -> Result<Resp, GatewayError> {
    let path = req.uri().path();
    if !path.starts_with("/v1/") {
        return Err(GatewayError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "not_found_error",
            format!("no such endpoint `{path}`; the API lives under /v1/"),
        ));
    }
    let snap = gw.snapshot();
    let client =
        auth::authenticate(&snap.table, req.headers()).ok_or_else(GatewayError::unauthorized)?;
    if path == "/v1/models" && req.method() == Method::GET {
        return Ok(models(&snap, &client.group));
    }
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_string();
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or(path.clone(), |p| p.as_str().to_string());
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let limit = snap.table.config.limits.max_body_bytes;
    let body = request::read_limited(body, declared, limit).await?;
    let groups = groups_for(&snap, &client.group);
    let family = classify_path(&path);
    let json = !body.is_empty() && parts.method == Method::POST && is_json(&parts.headers);
    let peek = if json {
        Some(request::peek(&body)?)
    } else {
        None
    };
    let model = peek.as_ref().and_then(|p| p.model.clone());
    // A task follow-up is locked to the channel that accepted the task (R10.5).
    let task = task::facts(gw, &snap, &parts.method, &path, &client.name, &groups).await?;
    // Routes: by (group, model) for model requests, by (group, path) for pass-through paths.
    let mut routes: Vec<(String, Arc<Route>)> = task.locked.iter().cloned().collect();
    for g in groups.iter().filter(|_| task.locked.is_none()) {
        let found = match &model {
            Some(m) => snap
                .table
                .routes
                .get(&(g.clone(), m.clone()))
                .or_else(|| snap.table.paths.get(&(g.clone(), path.clone()))),
            None => snap.table.paths.get(&(g.clone(), path.clone())),
        };
        if let Some(r) = found {
            routes.push((g.clone(), r.clone()));
        }
    }
    if routes.is_empty() {
        return Err(match (&model, json) {
            (Some(m), _) => GatewayError::model_not_found(m),
            (None, true) if family != PathFamily::Custom => GatewayError::missing_model(),
            _ => GatewayError::path_not_found(&path),
        });
    }
    let idempotency_key = parts
        .headers
        .get("idempotency-key")
        .filter(|v| valid_idempotency_key(v.as_bytes()))
        .cloned();
    let stream_format = match path.as_str() {
        "/v1/chat/completions" | "/v1/completions" => StreamFormat::Chat,
        "/v1/responses" => StreamFormat::Responses,
        "/v1/messages" => StreamFormat::Messages,
        _ => StreamFormat::Other,
    };
    let sticky = crate::affinity::sticky_key(&crate::affinity::KeyInput {
        affinity: &snap.table.config.affinity,
        group: &client.group,
        model: model.as_deref().unwrap_or(""),
        path: &path,
        client: &client.name,
        headers: &parts.headers,
        body: json.then_some(&body[..]),
        top: peek.as_ref().map(|p| &p.top),
    });
    let job = Job {
        snap,
        client,
        routes,
        method: parts.method,
        path,
        path_and_query,
        headers: parts.headers,
        body,
        peek,
        model: model.unwrap_or_default(),
        family,
        format,
        stream_format,
        idempotency_key,
        is_task: task.is_task,
        request_id,
        started,
        sticky,
    };
    Ok(attempt::run(gw, job).await)
}

fn is_json(h: &http::HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|ct| ct.contains("json"))
}

/// The groups a client's requests may use, in order (R5.1).
fn groups_for(snap: &Snapshot, group: &str) -> Vec<String> {
    if group == "auto" {
        snap.table.config.auto_groups.clone()
    } else {
        vec![group.to_string()]
    }
}

/// `GET /v1/models` from the routing table (R1.1).
fn models(snap: &Snapshot, group: &str) -> Resp {
    let mut names: Vec<&String> = groups_for(snap, group)
        .iter()
        .filter_map(|g| snap.table.models_by_group.get(g))
        .flatten()
        .collect();
    names.sort();
    names.dedup();
    crate::state::outcome::hide_down_models(snap, &groups_for(snap, group), &mut names);
    let data: Vec<_> = names
        .iter()
        .map(|m| serde_json::json!({"id": m, "object": "model", "created": 0, "owned_by": "switchyard"}))
        .collect();
    json_response(
        StatusCode::OK,
        serde_json::json!({"object": "list", "data": data}).to_string(),
    )
}

pub fn json_response(status: StatusCode, body: impl Into<bytes::Bytes>) -> Resp {
    let mut r = Response::new(ResponseBody::full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub fn error_response(e: &GatewayError, format: WireFormat) -> Resp {
    json_response(e.status, e.body(format))
}

fn request_id(h: &http::HeaderMap) -> HeaderValue {
    if let Some(v) = h.get("x-request-id") {
        let b = v.as_bytes();
        if !b.is_empty() && b.len() <= 128 && b.iter().all(|c| c.is_ascii_graphic()) {
            return v.clone();
        }
    }
    // Time-ordered (48-bit unix ms, then 80 random bits), so the request log's and the
    // ledger's id indexes grow at their right edge instead of touching random pages.
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() & ((1 << 48) - 1));
    let n = (ms << 80) | (fastrand::u128(..) & ((1 << 80) - 1));
    let mut id = *b"req_00000000000000000000000000000000";
    for (k, d) in id[4..].iter_mut().enumerate() {
        *d = b"0123456789abcdef"[((n >> (124 - 4 * k)) & 0xf) as usize];
    }
    HeaderValue::from_bytes(&id).unwrap_or(HeaderValue::from_static("req_unknown"))
}

#[cfg(test)]
mod tests {
    use super::request_id;

    /// Generated ids: `req_` + 32 hex digits, the first 12 the unix-ms time, so they sort
    /// by creation time; a valid client id is kept, an invalid one replaced.
    #[test]
    fn request_ids_are_time_ordered_hex() {
        let none = http::HeaderMap::new();
        let a = request_id(&none);
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = request_id(&none);
        for id in [&a, &b] {
            let s = id.to_str().unwrap();
            assert_eq!(s.len(), 36, "{s}");
            assert!(s.starts_with("req_"));
            assert!(s[4..]
                .bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        }
        assert!(a.to_str().unwrap()[..16] < b.to_str().unwrap()[..16]);
        let ms = u64::from_str_radix(&a.to_str().unwrap()[4..16], 16).unwrap() as u128;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis();
        assert!(now - ms < 10_000, "{ms} vs {now}");
        let mut h = http::HeaderMap::new();
        h.insert("x-request-id", "client-abc".parse().unwrap());
        assert_eq!(request_id(&h), "client-abc");
        h.insert("x-request-id", "has space".parse().unwrap());
        assert!(request_id(&h).to_str().unwrap().starts_with("req_"));
    }
}
