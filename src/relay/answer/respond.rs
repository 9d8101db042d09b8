//! Building the client's response from an upstream answer or from the last failure when every
//! attempt failed (R1.4, R4.6, R14.4): header filtering, the route header, secret scrubbing.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Response, StatusCode};

use crate::error::GatewayError;
use crate::http::body::ResponseBody;
use crate::http::body::{error_response, Resp};
use crate::relay::context::Context;
use crate::routing::policy::TransportKind;
use crate::secret::scrub;

/// The last failure, kept to answer the client if nothing succeeds.
pub enum LastFailure {
    None,
    Upstream {
        status: u16,
        headers: HeaderMap,
        body: Bytes,
    },
    Gateway(GatewayError),
}

/// The answer when no attempt succeeded: the last upstream error (scrubbed of every configured
/// upstream key) or the gateway's own error, in the caller's format.
pub fn failure_response(last: LastFailure, job: &Context) -> Resp {
    let snap = &job.snap;
    match last {
        LastFailure::None => {
            error_response(&GatewayError::no_channel_available(job.model()), job.format)
        }
        LastFailure::Gateway(e) => error_response(&e, job.format),
        LastFailure::Upstream {
            status,
            headers,
            body,
        } => {
            let secrets: Vec<_> = snap
                .table
                .channels
                .iter()
                .flat_map(|c| c.secrets().cloned())
                .collect();
            let text = String::from_utf8_lossy(&body);
            let clean = Bytes::from(scrub(&text, &secrets));
            let st = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            respond(st.as_u16(), headers, ResponseBody::full(clean), false, "")
        }
    }
}

pub fn transport_error(k: TransportKind) -> GatewayError {
    match k {
        TransportKind::HeaderTimeout
        | TransportKind::FirstByteTimeout
        | TransportKind::BodyTimeout => GatewayError::upstream_timeout(&format!("{k:?}")),
        _ => GatewayError::upstream_unreachable(&format!("{k:?}")),
    }
}

pub fn respond(status: u16, up: HeaderMap, body: ResponseBody, debug: bool, route: &str) -> Resp {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    *response.headers_mut() = crate::http::headers::to_client(up);
    if !response.headers().contains_key(header::CONTENT_TYPE) {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    if is_event_stream(response.headers()) {
        // Seed 001: front proxies must not cache or buffer a stream.
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        headers.insert(
            http::header::HeaderName::from_static("x-accel-buffering"),
            HeaderValue::from_static("no"),
        );
    }
    with_route(response, debug, route)
}

fn is_event_stream(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"))
}

pub fn with_route(mut r: Resp, debug: bool, route: &str) -> Resp {
    if debug && !route.is_empty() {
        if let Ok(v) = HeaderValue::try_from(route) {
            r.headers_mut().insert("x-switchyard-route", v);
        }
    }
    r
}
