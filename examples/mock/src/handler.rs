//! Serving one request: record it, check the key, pick the behaviour, render the endpoint's
//! answer and shape it (delays, keepalives, cuts) into a response.
use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, ACCEPT_ENCODING, CONTENT_TYPE, LOCATION};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::behavior::{Behavior, Wire, CHAOS};
use super::body::MockBody;
use super::gemini;
use super::json::{self, DEFAULT_CHUNKS};
use super::reasoning;
use super::request::{azure_rest, Endpoint, ReqInfo};
use super::script::{self, Script};
use super::shape::shape;
use super::sse::{self, SseParts};
use super::tools::{self, Call};
use super::validate::{self, Flavour, Refusal, Target};
use super::{RecordedRequest, Shared};

pub(crate) const JSON: HeaderValue = HeaderValue::from_static("application/json");
pub(crate) const EVENT_STREAM: HeaderValue = HeaderValue::from_static("text/event-stream");
pub(crate) const NO_CACHE: HeaderValue = HeaderValue::from_static("no-cache");
pub(crate) const GZIP: HeaderValue = HeaderValue::from_static("gzip");
const MOCK_NAME: HeaderName = HeaderName::from_static("x-mock-name");
const MOCK_FAULT: &str = "x-mock-fault";
/// The bytes `/v1/audio/speech` answers with.
const SPEECH: &[u8] = b"ID3\x04\x00\x00\x00\x00\x00\x00mock-audio";

/// A rendered normal answer before shaping.
pub(crate) enum Payload {
    Full(Bytes, HeaderValue),
    Sse(SseParts),
}

pub(crate) async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<MockBody>, Infallible> {
    let arrived_at = tokio::time::Instant::now();
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => return Ok(shared.named(plain(StatusCode::BAD_REQUEST, "{}".into()))),
    };
    shared.calls.fetch_add(1, Ordering::Relaxed);
    let path = parts.uri.path();
    let ep = Endpoint::classify(&parts.method, path);
    let info = ReqInfo::parse(&body);
    shared.tally(path, info.model.as_deref());
    let flavour = shared.flavour();
    let refusal = match shared.validate.load(Ordering::Relaxed) {
        true => validate::check(
            &Target {
                flavour,
                ep,
                headers: &parts.headers,
                path_model: path_model(path),
            },
            &body,
        )
        .err(),
        false => None,
    };
    if shared.record.load(Ordering::Relaxed) {
        shared.push_record(record(&parts, &body, arrived_at, refusal.as_ref()));
    }

    if let Some(want) = shared.key.load_full() {
        let got = presented_key(&parts.headers);
        if got != want.as_str() {
            if ep.gemini() {
                let b = gemini::bad_key();
                return Ok(shared.named(plain(StatusCode::BAD_REQUEST, b.into())));
            }
            let b = json::bad_key(got, ep.anthropic());
            return Ok(shared.named(plain(StatusCode::UNAUTHORIZED, b.into())));
        }
    }
    if azure_rest(path).is_some() && !has_api_version(parts.uri.query()) {
        // Azure OpenAI answers a deployment path without `api-version` with a 404.
        let b = r#"{"error":{"code":"404","message":"Resource not found"}}"#;
        return Ok(shared.named(plain(StatusCode::NOT_FOUND, b.into())));
    }

    let behavior = match parts.headers.get(MOCK_FAULT) {
        Some(v) => match v.to_str().ok().and_then(|s| s.parse::<Behavior>().ok()) {
            Some(b) => b,
            None => {
                let b = format!(
                    r#"{{"error":{{"message":"bad {MOCK_FAULT} header","type":"invalid_request_error"}}}}"#
                );
                return Ok(shared.named(plain(StatusCode::BAD_REQUEST, b.into())));
            }
        },
        None => shared.next_behavior(),
    };

    let ask = Ask {
        ep,
        parts: &parts,
        body: &body,
        info: &info,
        flavour,
        refusal,
    };
    let resp = respond(&shared, &ask, behavior).await;
    Ok(shared.named(resp))
}

/// The request as [`super::MockUpstream::requests`] returns it.
fn record(
    parts: &http::request::Parts,
    body: &Bytes,
    arrived_at: tokio::time::Instant,
    refusal: Option<&Refusal>,
) -> RecordedRequest {
    RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path_and_query().map_or_else(
            || parts.uri.path().to_string(),
            |pq| pq.as_str().to_string(),
        ),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.clone(),
        arrived_at,
        refusal: refusal.map(|r| r.body.clone()),
    }
}

/// One request as the answer sees it.
struct Ask<'a> {
    ep: Endpoint,
    parts: &'a http::request::Parts,
    body: &'a [u8],
    info: &'a ReqInfo<'a>,
    flavour: Flavour,
    /// What the provider's validation refused, if anything.
    refusal: Option<Refusal>,
}

/// The model a path names: an Azure deployment or a Gemini model.
fn path_model(path: &str) -> Option<&str> {
    if let Some(m) = gemini::model_of(path) {
        return Some(m);
    }
    let rest = path.strip_prefix("/openai/deployments/")?;
    rest.split_once('/').map(|(d, _)| d)
}

fn has_api_version(query: Option<&str>) -> bool {
    query.is_some_and(|q| {
        q.split('&').any(|p| {
            p.strip_prefix("api-version=")
                .is_some_and(|v| !v.is_empty())
        })
    })
}

/// The key the client presented (bearer token, `x-api-key`, `api-key` or `x-goog-api-key`).
fn presented_key(h: &HeaderMap) -> &str {
    if let Some(v) = h
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let v = v.trim();
        return v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
            .unwrap_or(v)
            .trim();
    }
    ["x-api-key", "api-key", "x-goog-api-key"]
        .iter()
        .find_map(|n| h.get(*n).and_then(|v| v.to_str().ok()))
        .unwrap_or("")
}

fn plain(status: StatusCode, body: Bytes) -> Response<MockBody> {
    let mut r = Response::new(MockBody::full(body));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, JSON);
    r
}

async fn respond(shared: &Arc<Shared>, ask: &Ask<'_>, behavior: Behavior) -> Response<MockBody> {
    let (ep, parts, info) = (ask.ep, ask.parts, ask.info);
    if ep == Endpoint::NotFound {
        let b = json::status_error(404, false);
        return plain(StatusCode::NOT_FOUND, b.into());
    }
    let (behavior, wire) = resolve(behavior);
    if let Behavior::HangBeforeHeaders(d) = behavior {
        tokio::time::sleep(d).await;
    }
    // A provider's front end answers these before the API reads the body.
    let front = matches!(
        behavior,
        Behavior::Status { .. } | Behavior::HangBeforeHeaders(_) | Behavior::Redirect { .. }
    );
    if let (Some(r), false) = (&ask.refusal, front) {
        let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::BAD_REQUEST);
        return plain(status, r.body.clone().into());
    }
    if let Some(r) = fixed(shared, ep, &behavior, &wire) {
        return r;
    }
    let n = match behavior {
        Behavior::Stream { chunks, .. } => chunks,
        Behavior::CutMidStream { after_chunks } => after_chunks,
        Behavior::EndWithoutTerminal { chunks } => chunks,
        Behavior::ErrorMidStream { after_chunks, .. } => after_chunks,
        _ => DEFAULT_CHUNKS,
    };
    let payload = match behavior {
        Behavior::ToolCall => tool_call(ep, parts, info, &Call::weather()),
        Behavior::Ok => match script::plan(ep, ask.body) {
            Some(Script::Call(c)) => tool_call(ep, parts, info, &c),
            Some(Script::Text(t)) => script::retext(render(shared, ep, parts, info, 1), &t),
            None => render(shared, ep, parts, info, n),
        },
        _ => render(shared, ep, parts, info, n),
    };
    let payload = match (ask.flavour, ep) {
        (Flavour::DeepseekThinking, Endpoint::Chat) => reasoning::add(payload, info),
        _ => payload,
    };
    if let (Payload::Full(_, ctype), Behavior::Stream { chunks, delay }) = (&payload, &behavior) {
        // A non-stream JSON answer's headers come when generation is done (PROVIDERS.md).
        if ctype == JSON {
            tokio::time::sleep(delay.saturating_mul(u32::try_from(*chunks).unwrap_or(u32::MAX)))
                .await;
        }
    }
    let gzip_ok = parts
        .headers
        .get_all(ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.split(',').any(|t| t.trim().starts_with("gzip")));
    shape(shared, ep, payload, behavior, &wire, gzip_ok)
}

/// The behaviour and wire shape to answer with: `chaos` picks one of its faults (its wire
/// shape adds to the requested one).
fn resolve(behavior: Behavior) -> (Behavior, Wire) {
    let (behavior, mut wire) = behavior.split();
    let behavior = match behavior {
        Behavior::Chaos => {
            let pick = CHAOS[fastrand::usize(..CHAOS.len())];
            let (b, w) = pick.parse::<Behavior>().unwrap_or_default().split();
            wire.coalesce |= w.coalesce;
            if wire.split.is_empty() {
                wire.split = w.split;
            }
            b
        }
        b => b,
    };
    (behavior, wire)
}

/// The answers that do not render the endpoint: an error status, a redirect, an empty 200,
/// a raw body; `None` for every other behaviour.
fn fixed(
    shared: &Arc<Shared>,
    ep: Endpoint,
    behavior: &Behavior,
    wire: &Wire,
) -> Option<Response<MockBody>> {
    match behavior {
        Behavior::Status { code, body } => {
            let status = StatusCode::from_u16(*code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = body.clone().unwrap_or_else(|| match ep.gemini() {
                true => gemini::error(*code),
                false => json::status_error(*code, ep.anthropic()),
            });
            Some(plain(status, body.into()))
        }
        Behavior::Redirect { location } => {
            let mut r = Response::new(MockBody::empty());
            *r.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            match HeaderValue::from_str(location) {
                Ok(v) => r.headers_mut().insert(LOCATION, v),
                Err(_) => return Some(plain(StatusCode::INTERNAL_SERVER_ERROR, "{}".into())),
            };
            Some(r)
        }
        Behavior::EmptyOk => {
            let mut r = Response::new(MockBody::empty());
            r.headers_mut().insert(CONTENT_TYPE, JSON);
            Some(r)
        }
        Behavior::Raw { content_type, body } => {
            let sse = content_type.starts_with("text/event-stream");
            let ctype = HeaderValue::from_str(content_type).unwrap_or(JSON);
            let events: Vec<Bytes> = if sse {
                body.split_inclusive("\n\n")
                    .map(|e| Bytes::from(e.to_string()))
                    .collect()
            } else {
                vec![Bytes::from(body.clone())]
            };
            let payload = if sse {
                Payload::Sse(SseParts {
                    head: events,
                    chunks: Vec::new(),
                    tail: Vec::new(),
                })
            } else {
                Payload::Full(events.into_iter().next().unwrap_or_default(), ctype.clone())
            };
            let mut r = shape(shared, ep, payload, Behavior::Ok, wire, false);
            r.headers_mut().insert(CONTENT_TYPE, ctype);
            Some(r)
        }
        _ => None,
    }
}

/// The endpoint's answer calling `c`.
fn tool_call(ep: Endpoint, parts: &http::request::Parts, info: &ReqInfo<'_>, c: &Call) -> Payload {
    let model = gemini::model_of(parts.uri.path()).unwrap_or(info.model());
    let m = json::quote(model);
    let stream = match ep {
        Endpoint::Gemini { stream } => stream,
        _ => ep.streamable() && info.stream,
    };
    if stream {
        Payload::Sse(tools::stream(ep, &m, info.include_usage(), c))
    } else {
        Payload::Full(tools::whole(ep, &m, c).into(), JSON)
    }
}

/// The endpoint's normal answer with `n` content chunks.
fn render(
    shared: &Shared,
    ep: Endpoint,
    parts: &http::request::Parts,
    info: &ReqInfo<'_>,
    n: usize,
) -> Payload {
    if let Endpoint::Gemini { stream } = ep {
        let m = json::quote(gemini::model_of(parts.uri.path()).unwrap_or(info.model()));
        return match stream {
            true => Payload::Sse(gemini::stream(&m, n)),
            false => Payload::Full(gemini::answer(&m, n).into(), JSON),
        };
    }
    let m = json::quote(info.model());
    if ep.streamable() && info.stream {
        return Payload::Sse(sse::render(ep, &m, n, info.include_usage()));
    }
    let body = match ep {
        Endpoint::Chat => json::chat(&m, n),
        Endpoint::Completions => json::completions(&m, n),
        Endpoint::Responses => json::responses_object(&m, n, "completed", true),
        Endpoint::Messages => json::messages(&m, n),
        Endpoint::CountTokens => json::count_tokens(),
        Endpoint::Embeddings => json::embeddings(&m, info.input.map_or(1, |c| c.0)),
        Endpoint::Moderations => json::moderations(&m),
        Endpoint::Images => json::images(&m),
        Endpoint::Transcriptions => json::transcription(&m),
        Endpoint::Speech => {
            return Payload::Full(
                Bytes::from_static(SPEECH),
                HeaderValue::from_static("audio/mpeg"),
            )
        }
        Endpoint::Models => shared.models_json(),
        Endpoint::VideoCreate => json::video_created(shared.next_video_id(), &m),
        Endpoint::VideoGet => {
            let id = parts.uri.path().rsplit('/').next().unwrap_or_default();
            json::video_status(id)
        }
        Endpoint::Echo | Endpoint::NotFound | Endpoint::Gemini { .. } => {
            let path = parts
                .uri
                .path_and_query()
                .map_or(parts.uri.path(), |pq| pq.as_str());
            json::echo(path, parts.method.as_str())
        }
    };
    Payload::Full(body.into(), JSON)
}

pub(crate) fn with_type(body: MockBody, ctype: HeaderValue) -> Response<MockBody> {
    let mut r = Response::new(body);
    r.headers_mut().insert(CONTENT_TYPE, ctype);
    r
}

impl Shared {
    /// Adds `x-mock-name` when a name is set.
    fn named(&self, mut r: Response<MockBody>) -> Response<MockBody> {
        if let Some(name) = self.name.load().as_deref() {
            r.headers_mut().insert(MOCK_NAME, name.clone());
        }
        r
    }
}
