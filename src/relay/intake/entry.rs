//! The request entry point: request id, path hygiene, protocol upgrades, auth, body limits,
//! route lookup — then hands the request to the attempt loop (R1.1, R1.4, R14.1, R14.2).
//! A request refused here is still counted, logged and written to the request log.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;

use crate::config::model::Client;
use crate::error::{ClientFormat, GatewayError};
use crate::http::body::{error_response, Resp, ResponseBody};
use crate::http::headers::ANTHROPIC_REQUEST_ID;
use crate::http::path;
use crate::relay::answer::finish::{self, Rejected};
use crate::relay::attempt;
use crate::relay::context::Context;
use crate::relay::gateway::Gateway;
use crate::relay::intake::auth;
use crate::relay::intake::local;
use crate::relay::intake::lookup::{self, Wanted};
use crate::relay::intake::task;
use crate::routing::family::{family_of, valid_idempotency_key, PathFamily};
use crate::state::Snapshot;
use crate::wire::dialect::StreamFormat;
use crate::wire::request::{self, Peek};

/// What is known about a request so far: enough to answer and record it if it is refused.
struct Ctx {
    request_id: HeaderValue,
    started: Instant,
    /// The normalised path, or `Err` when the raw path was refused.
    path: Result<Arc<str>, path::PathError>,
    /// The request's URI as received (its path is the raw path): shared with the request's
    /// head, not copied.
    raw_uri: http::Uri,
    format: ClientFormat,
    /// The authenticated client (shared, not copied: most requests never need its name here).
    client: Option<Arc<Client>>,
    model: Option<String>,
}

/// Handle one client request. Never panics on request content; every failure is a response.
pub async fn handle(gw: Arc<Gateway>, req: Request<Incoming>) -> Resp {
    let raw_uri = req.uri().clone();
    let raw_path = raw_uri.path();
    let path = path::normalise(raw_path);
    let mut ctx = Ctx {
        request_id: request_id(req.headers()),
        started: crate::clock::instant().into_std(),
        format: wire_format(
            path.as_deref().unwrap_or(raw_path),
            req.headers()
                .contains_key(crate::http::headers::ANTHROPIC_VERSION),
        ),
        path,
        raw_uri,
        client: None,
        model: None,
    };
    let head = req.method() == Method::HEAD;
    let mut resp = match route(&gw, req, &mut ctx).await {
        Ok(r) => r,
        Err(e) => {
            finish::rejected(
                &gw,
                Rejected {
                    request_id: ctx.request_id.to_str().unwrap_or(""),
                    client: ctx.client.as_ref().map_or("", |c| &*c.name),
                    model: ctx.model.as_deref().unwrap_or(""),
                    path: ctx.path.as_deref().unwrap_or(ctx.raw_uri.path()),
                    status: e.status.as_u16(),
                    code: e.code,
                    started: ctx.started,
                },
            );
            error_response(&e, ctx.format)
        }
    };
    if ctx.format == ClientFormat::Anthropic {
        resp.headers_mut()
            .insert(ANTHROPIC_REQUEST_ID, ctx.request_id.clone());
    }
    // A static name: a string key would build (allocate) the custom name on every answer.
    resp.headers_mut()
        .insert(crate::http::headers::X_REQUEST_ID, ctx.request_id);
    if head {
        // A HEAD answer has no body on any protocol (hyper omits it on HTTP/1 only).
        *resp.body_mut() = ResponseBody::full(bytes::Bytes::new());
        resp.headers_mut().remove(header::CONTENT_LENGTH);
    }
    resp
}

/// The caller's wire format (R1.4): Anthropic's for every `/v1/messages*` path and for
/// `/v1/models*` asked with `anthropic-version` (the Anthropic SDK), else OpenAI's.
fn wire_format(path: &str, anthropic_version: bool) -> ClientFormat {
    if path.starts_with("/v1/messages") || (anthropic_version && path.starts_with("/v1/models")) {
        ClientFormat::Anthropic
    } else {
        ClientFormat::OpenAi
    }
}

async fn route(
    gw: &Arc<Gateway>,
    req: Request<Incoming>,
    ctx: &mut Ctx,
) -> Result<Resp, GatewayError> {
    // An upgrade the gateway does not relay (WebSocket) is refused at once, so clients that
    // try one first (Codex) fall back to HTTP without waiting.
    if req.headers().contains_key(header::UPGRADE) {
        return Err(GatewayError::upgrade_required());
    }
    let anthropic = ctx.format == ClientFormat::Anthropic;
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    let model_id = ctx
        .raw_uri
        .path()
        .strip_prefix("/v1/models/")
        .map(str::to_string);
    if let (true, Some(rest)) = (safe, model_id) {
        let snap = gw.snapshot();
        let client = authenticate(&snap, req.headers(), ctx)?;
        let id = path::model_id(&rest).ok_or_else(|| GatewayError::model_not_found(&rest))?;
        ctx.model = Some(id.clone());
        return local::model(&snap, &client, &id, anthropic);
    }
    // The normalised path stays in `ctx` (a refused request's record names it) until the
    // request's context takes it: read here, not copied.
    let path = ctx
        .path
        .as_deref()
        .map_err(|e| GatewayError::invalid_path(e))?;
    if path == "/" && req.method() == Method::HEAD {
        return Ok(local::head_root());
    }
    if !path.starts_with("/v1/") {
        return Err(GatewayError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "not_found_error",
            format!("no such endpoint `{path}`; the API lives under /v1/"),
        ));
    }
    let models = path == "/v1/models";
    let snap = gw.snapshot();
    let client = authenticate(&snap, req.headers(), ctx)?;
    if models && safe {
        return Ok(local::models(&snap, &client, anthropic));
    }
    relay(gw, snap, client, req, ctx).await
}

fn authenticate(
    snap: &Snapshot,
    headers: &http::HeaderMap,
    ctx: &mut Ctx,
) -> Result<Arc<Client>, GatewayError> {
    let client = auth::authenticate(&snap.table, headers).ok_or_else(GatewayError::unauthorized)?;
    ctx.client = Some(client.clone());
    Ok(client)
}

/// Read the body, find the routes, fix the request's context and run the attempt loop.
async fn relay(
    gw: &Arc<Gateway>,
    snap: Arc<Snapshot>,
    client: Arc<Client>,
    req: Request<Incoming>,
    ctx: &mut Ctx,
) -> Result<Resp, GatewayError> {
    let limit = snap.table.config.limits.max_body_bytes;
    let path = ctx.path.as_deref().unwrap_or("");
    let intake = Intake::read(req, path, limit).await?;
    let family = family_of(intake.path, &intake.parts.method);
    let (routes, is_task) = match routes(gw, &snap, &client, family, &intake).await {
        Err(e) if counts_locally(&snap, &client, family, &intake, &e) => {
            return Ok(local::count_tokens(&intake.body));
        }
        Err(e) => {
            // Refused here: the request's log line and record name its model. Past this
            // point the model is read from the body's parse (`Context::model`), not copied.
            ctx.model = intake.model().map(str::to_string);
            return Err(e);
        }
        Ok(r) => r,
    };
    let sticky = crate::affinity::sticky_key(&crate::affinity::KeyInput {
        affinity: &snap.table.config.affinity,
        group: &client.group,
        model: intake.model().unwrap_or(""),
        path: intake.path,
        client: &client.name,
        headers: &intake.parts.headers,
        body: intake.json.then_some(&intake.body[..]),
        top: intake.peek.as_ref().map(|p| &p.top),
    });
    let Intake {
        parts, body, peek, ..
    } = intake;
    let with_query = parts.uri.query().map(|q| format!("{path}?{q}"));
    let stream_format = StreamFormat::of_path(path);
    // The request's context takes the path: from here nothing is refused through `ctx`.
    let path = ctx.path.as_ref().map(Arc::clone).unwrap_or_default();
    // R20.1: each attempt sends its own span as the upstream's `traceparent`.
    let trace = gw
        .request_metrics
        .traces
        .get()
        .map(|t| crate::telemetry::otlp::TraceCtx::of(&parts.headers, t.sample_ratio));
    // The body's one pass made the token estimate when it could (`wire::scan`).
    let prompt_estimate = match peek.as_ref().and_then(|p| p.input_tokens) {
        Some(n) => std::sync::OnceLock::from(n),
        None => std::sync::OnceLock::new(),
    };
    let cx = Context {
        with_query,
        idempotency_key: idempotency_key(&parts.headers),
        stream_format,
        snap,
        client,
        routes,
        method: parts.method,
        path,
        headers: parts.headers,
        body,
        peek,
        family,
        format: ctx.format,
        is_task,
        request_id: ctx.request_id.clone(),
        started: ctx.started,
        sticky,
        prompt_estimate,
        trace,
    };
    // Boxed (`boxed::in_box`): the attempt loop's future (~7.8 KB) is not part of this
    // future and of every one that awaits it (each is copied whole when it is moved: ~20 KB
    // of copying per request, 5 % of its instructions).
    Ok(crate::boxed::in_box(|| attempt::run(gw, cx)).await)
}

/// The request as read: its head, its normalised path, its body (within the limit) and the
/// body's one parse when it is JSON.
struct Intake<'a> {
    parts: http::request::Parts,
    /// Borrowed from the request's `Ctx` (which keeps it for a refusal's record).
    path: &'a str,
    body: Bytes,
    /// A JSON body (POST, not empty, a JSON content type or none).
    json: bool,
    peek: Option<Peek>,
}

impl<'a> Intake<'a> {
    async fn read(
        req: Request<Incoming>,
        path: &'a str,
        limit: u64,
    ) -> Result<Intake<'a>, GatewayError> {
        let (parts, body) = req.into_parts();
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        let body = crate::http::body_limit::read_limited(body, declared, limit).await?;
        let json = !body.is_empty() && parts.method == Method::POST && is_json(&parts.headers);
        let peek = if json {
            Some(request::peek(&body)?)
        } else {
            None
        };
        Ok(Intake {
            parts,
            path,
            body,
            json,
            peek,
        })
    }

    fn model(&self) -> Option<&str> {
        self.peek.as_ref()?.model.as_deref()
    }
}

/// The (group, route) pairs the request may use, and whether it is a task call: a task
/// follow-up is locked to the channel that accepted the task (R10.5); anything else is
/// looked up by model or declared path (R1.1).
async fn routes(
    gw: &Gateway,
    snap: &Snapshot,
    client: &Client,
    family: PathFamily,
    i: &Intake<'_>,
) -> Result<(lookup::Routes, bool), GatewayError> {
    let groups = lookup::client_groups(snap, client);
    let method = &i.parts.method;
    let task = task::facts(gw, snap, method, i.path, &client.name, groups).await?;
    let routes = match task.locked {
        Some(locked) => smallvec::smallvec![locked],
        None => lookup::routes(
            snap,
            groups,
            &Wanted {
                family,
                model: i.model(),
                path: i.path,
                json: i.json,
                task_path: task.is_task,
            },
        )?,
    };
    Ok((routes, task.is_task))
}

/// R16.5: token counting for a model that no channel can count (only Anthropic
/// channels serve `count_tokens`) but that is served for Messages — translated — is answered
/// with the gateway's own estimate rather than a 404 the model listing contradicts.
fn counts_locally(
    snap: &Snapshot,
    client: &Client,
    family: PathFamily,
    i: &Intake<'_>,
    e: &GatewayError,
) -> bool {
    if family != PathFamily::TokenCount || !i.path.contains("count_tokens") {
        return false;
    }
    if e.code != "model_not_found" {
        return false;
    }
    let messages = Wanted {
        family: PathFamily::Messages,
        model: i.model(),
        path: "/v1/messages",
        json: i.json,
        task_path: false,
    };
    lookup::routes(snap, lookup::client_groups(snap, client), &messages).is_ok()
}

/// R10.2: the client's `Idempotency-Key`, when it is valid.
fn idempotency_key(h: &http::HeaderMap) -> Option<HeaderValue> {
    h.get(crate::http::headers::IDEMPOTENCY_KEY)
        .filter(|v| valid_idempotency_key(v.as_bytes()))
        .cloned()
}

fn is_json(h: &http::HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_none_or(|ct| ct.contains("json"))
}

fn request_id(headers: &http::HeaderMap) -> HeaderValue {
    if let Some(given) = headers.get(crate::http::headers::X_REQUEST_ID) {
        let bytes = given.as_bytes();
        if !bytes.is_empty() && bytes.len() <= 128 && bytes.iter().all(|c| c.is_ascii_graphic()) {
            return given.clone();
        }
    }
    // Time-ordered (48-bit unix ms, then 80 random bits), so the request log's and the
    // ledger's id indexes grow at their right edge instead of touching random pages.
    let ms = u128::try_from(crate::clock::now_ms()).unwrap_or(0) & ((1 << 48) - 1);
    let bits = (ms << 80) | (fastrand::u128(..) & ((1 << 80) - 1));
    let mut id = *b"req_00000000000000000000000000000000";
    // A byte at a time from a table (~100 instructions; a 128-bit shift per digit, as
    // before, took ~330). The lengths are fixed, so it cannot fail.
    let _ = hex::encode_to_slice(bits.to_be_bytes(), &mut id[4..]);
    // One allocation holding the id; its clones (the context's, the answer's header, the
    // upstream's `x-request-id`) share it (a copied `Vec` would allocate again when cloned).
    HeaderValue::from_maybe_shared(bytes::Bytes::from_owner(id))
        .unwrap_or(HeaderValue::from_static("req_unknown"))
}

/// The client listener serves the gateway through this entry point.
impl crate::http::server::Service for Gateway {
    fn config(&self) -> Arc<crate::config::model::Config> {
        self.snapshot().table.config.clone()
    }

    fn call(
        self: Arc<Self>,
        req: http::Request<hyper::body::Incoming>,
    ) -> impl std::future::Future<Output = crate::http::body::Resp> + Send {
        handle(self, req)
    }
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
