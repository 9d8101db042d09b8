//! The admin listener: `/healthz`, `/readyz`, `/metrics` and the token-protected `/admin/*`
//! API (R7.2, R12, R13.3, R14.6).
//!
//! Architecture Invariant: every route is listed in [`ROUTES`] or in
//! [`status::ROUTES`]; `dispatch` refuses any `/admin/*` request without the
//! admin token, and any `/status*` request without the admin or status token, before looking
//! at the path, so no admin route can be added unprotected (tests walk both lists).

pub mod reload_status;
pub mod status;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use serde_json::json;
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::error::{ClientFormat, GatewayError};
use crate::http::body::ResponseBody;
use crate::http::body::{error_response, json_response, Resp};
use crate::relay::gateway::Gateway;
use reload_status::ConfigStatus;

/// (method, path pattern, needs the admin token). `{name}` matches one path segment.
pub const ROUTES: &[(&str, &str, bool)] = &[
    ("GET", "/healthz", false),
    ("GET", "/readyz", false),
    ("GET", "/metrics", false),
    ("GET", "/admin/channels", true),
    ("POST", "/admin/channels/{name}/enable", true),
    ("POST", "/admin/channels/{name}/disable", true),
    ("GET", "/admin/requests", true),
    ("GET", "/admin/clients/{name}", true),
    ("GET", "/admin/explain", true),
    ("GET", "/admin/config", true),
];

/// What the admin routes read besides the gateway.
#[derive(Clone)]
pub struct Views {
    pub config: Arc<ConfigStatus>,
    /// The shared-state link (`shared.redis`), when configured.
    pub shared: Option<crate::shared::Shared>,
}

pub async fn serve(
    listener: TcpListener,
    gw: Arc<Gateway>,
    views: Views,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r { Ok(x) => x, Err(_) => continue },
            _ = shutdown.changed() => return,
        };
        let _ = stream.set_nodelay(true);
        let gw = gw.clone();
        let views = views.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let (gw, views) = (gw.clone(), views.clone());
                async move { Ok::<_, Infallible>(dispatch(&gw, &views, peer, req).await) }
            });
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(std::time::Duration::from_secs(10));
            let _ = builder.serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

fn authorized(gw: &Gateway, req: &Request<Incoming>) -> bool {
    let snap = gw.snapshot();
    let Some(token) = &snap.table.config.admin.token else {
        return false;
    };
    let presented = crate::relay::intake::auth::presented_key(req.headers()).unwrap_or_default();
    !presented.is_empty() && bool::from(presented.ct_eq(token.expose().as_bytes()))
}

fn not_found() -> Resp {
    error_response(
        &GatewayError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "not_found_error",
            "no such admin route",
        ),
        ClientFormat::OpenAi,
    )
}

pub async fn dispatch(
    gw: &Arc<Gateway>,
    views: &Views,
    peer: SocketAddr,
    req: Request<Incoming>,
) -> Resp {
    let path = req.uri().path().to_string();
    if path.starts_with("/status") {
        return status_page(gw, views, &req);
    }
    if path.starts_with("/admin") && !authorized(gw, &req) {
        let error = GatewayError::new(
            StatusCode::UNAUTHORIZED,
            "admin_unauthorized",
            "authentication_error",
            "admin routes need `Authorization: Bearer <admin.token>`",
        );
        return error_response(&error, ClientFormat::OpenAi);
    }
    let query = query_of(&req);
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match (req.method().clone(), segs.as_slice()) {
        (Method::GET, ["healthz"]) => json_response(StatusCode::OK, r#"{"status":"ok"}"#),
        (Method::GET, ["readyz"]) => readyz(gw),
        (Method::GET, ["metrics"]) => metrics(gw),
        (Method::GET, ["admin", "channels"]) => crate::admin_views::channels(gw),
        (Method::POST, ["admin", "channels", name, action @ ("enable" | "disable")]) => {
            let why = query.get("reason").map(String::as_str);
            set_enabled(gw, name, *action == "enable", peer, why)
        }
        (Method::GET, ["admin", "requests"]) => {
            let limit = query
                .get("limit")
                .and_then(|l| l.parse().ok())
                .unwrap_or(50usize)
                .min(1000);
            match gw.store.recent_requests(limit).await {
                Ok(rows) => json_response(StatusCode::OK, json!({ "requests": rows }).to_string()),
                Err(e) => error_response(
                    &GatewayError::internal(format!("request log unavailable: {e}")),
                    ClientFormat::OpenAi,
                ),
            }
        }
        (Method::GET, ["admin", "clients", name]) => crate::admin_views::client(gw, name),
        (Method::GET, ["admin", "explain"]) => crate::admin_views::explain(gw, &query),
        (Method::GET, ["admin", "config"]) => {
            json_response(StatusCode::OK, views.config.view().to_string())
        }
        _ => not_found(),
    }
}

fn query_of<B>(req: &Request<B>) -> HashMap<String, String> {
    req.uri()
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), percent_decode(v)))
                .collect()
        })
        .unwrap_or_default()
}

/// `GET /status` and `/status.json` (R20.2): the admin or the status token first.
fn status_page(gw: &Gateway, views: &Views, req: &Request<Incoming>) -> Resp {
    use self::status as page;
    let query = query_of(req);
    if !page::authorized(gw, req, query.get("token").map(String::as_str)) {
        return page::unauthorized();
    }
    let src = page::Sources {
        config: &views.config,
        shared: views.shared.as_ref(),
    };
    match (req.method(), req.uri().path()) {
        (&Method::GET, "/status") => page::page(gw, &src),
        (&Method::GET, "/status.json") => page::json(gw, &src),
        _ => not_found(),
    }
}

fn readyz(gw: &Gateway) -> Resp {
    let ready = gw.generation() > 0;
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    json_response(
        status,
        json!({"ready": ready, "generation": gw.generation()}).to_string(),
    )
}

fn metrics(gw: &Gateway) -> Resp {
    #[allow(unused_mut)]
    let mut text = gw.metrics.as_ref().map(|h| h.render()).unwrap_or_default();
    #[cfg(feature = "count-allocs")]
    text.push_str(&crate::telemetry::allocs::exposition());
    let mut response = Response::new(ResponseBody::full(text));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// `POST /admin/channels/{name}/enable|disable[?reason=...]`: logged with who (the admin
/// API and the caller's address) and why (the `reason` query, if any).
fn set_enabled(
    gw: &Gateway,
    name: &str,
    enable: bool,
    peer: SocketAddr,
    why: Option<&str>,
) -> Resp {
    let Some(state) = gw.registry.get(name) else {
        return error_response(
            &GatewayError::new(
                StatusCode::NOT_FOUND,
                "channel_not_found",
                "not_found_error",
                format!("no channel named `{name}`"),
            ),
            ClientFormat::OpenAi,
        );
    };
    let reason = match why.map(str::trim).filter(|w| !w.is_empty()) {
        Some(w) => {
            let w: String = w.chars().filter(|c| !c.is_control()).take(200).collect();
            format!("disabled by operator: {w}")
        }
        None => "disabled by operator".to_string(),
    };
    let was = state.disabled().map(|d| d.reason);
    if enable {
        tracing::warn!(channel = name, by = "operator", via = "admin API", peer = %peer,
            reason = why.unwrap_or(""), was = was.as_deref().unwrap_or("enabled"), "channel enabled");
    } else {
        tracing::warn!(channel = name, by = "operator", via = "admin API", peer = %peer,
            reason = %reason, "channel disabled");
    }
    crate::state::operator::set_enabled(&gw.store, &state, enable, &reason);
    json_response(
        StatusCode::OK,
        json!({"channel": name, "enabled": enable}).to_string(),
    )
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16)
                {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
