//! The live status page on the admin listener (R20.2): `GET /status` (HTML, rendered by the
//! gateway from one inline template, no external assets) and `GET /status.json` (the same
//! numbers, polled by the page every 2.5 s to patch its tables in place).
//!
//! Both take the admin token or the read-only `admin.status_token`, as a Bearer header or as
//! `?token=` (a browser cannot send a header on a page load; the page is served with
//! `Referrer-Policy: no-referrer` so the token does not leave through a link).

use http::{HeaderValue, Request, Response, StatusCode};
use serde_json::{json, Value};
use subtle::ConstantTimeEq;

use super::reload_status::ConfigStatus;
use crate::error::{ClientFormat, GatewayError};
use crate::http::body::{error_response, json_response, Resp, ResponseBody};
use crate::relay::gateway::Gateway;

/// The status routes: (method, path). Both need the admin token or `admin.status_token`.
pub const ROUTES: &[(&str, &str)] = &[("GET", "/status"), ("GET", "/status.json")];

/// How often the page polls `/status.json`.
pub const REFRESH_MS: u64 = 2_500;

const PAGE: &str = include_str!("status.html");

/// What the status page shows besides the gateway: the config's reload outcome and the
/// shared-state link.
pub struct Sources<'a> {
    pub config: &'a ConfigStatus,
    pub shared: Option<&'a crate::shared::Shared>,
}

/// Does `req` carry the admin token or the status token (header, or `token` in `query`)?
pub fn authorized<B>(gw: &Gateway, req: &Request<B>, query_token: Option<&str>) -> bool {
    let snap = gw.snapshot();
    let admin = &snap.table.config.admin;
    let presented = crate::relay::intake::auth::presented_key(req.headers())
        .or(query_token.map(str::as_bytes))
        .unwrap_or_default();
    if presented.is_empty() {
        return false;
    }
    let matches = [&admin.token, &admin.status_token]
        .into_iter()
        .flatten()
        .any(|t| bool::from(presented.ct_eq(t.expose().as_bytes())));
    matches
}

/// The 401 of a status route.
pub fn unauthorized() -> Resp {
    error_response(
        &GatewayError::new(
            StatusCode::UNAUTHORIZED,
            "status_unauthorized",
            "authentication_error",
            "the status page needs `Authorization: Bearer <admin.status_token>` (or the admin \
             token), or `?token=` in its URL",
        ),
        ClientFormat::OpenAi,
    )
}

/// `GET /status.json`.
pub fn json(gw: &Gateway, src: &Sources) -> Resp {
    let mut response = json_response(StatusCode::OK, view(gw, src).to_string());
    no_store(&mut response);
    response
}

/// `GET /status`: the page with the current numbers inlined (it renders before any poll).
pub fn page(gw: &Gateway, src: &Sources) -> Resp {
    // `<` only occurs inside JSON strings, where `\u003c` means the same: no `</script>`.
    let data = view(gw, src).to_string().replace('<', "\\u003c");
    let html = PAGE
        .replace("__REFRESH_MS__", &REFRESH_MS.to_string())
        .replace("__STATUS_JSON__", &data);
    let mut response = Response::new(ResponseBody::full(html));
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        http::header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    no_store(&mut response);
    response
}

fn no_store(r: &mut Resp) {
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
}

/// Everything the page shows, as JSON (see README, "Status page").
pub fn view(gw: &Gateway, src: &Sources) -> Value {
    let snap = gw.snapshot();
    let channels: Vec<Value> = snap
        .table
        .channels
        .iter()
        .enumerate()
        .map(|(id, c)| {
            let mut row = crate::admin_views::channel_view(&snap, id, c);
            row["held_back_keys"] = json!(crate::admin_views::held_back_view(gw, &snap, &[id]));
            row["recent"] = json!(snap.state(id).recent.summary());
            row
        })
        .collect();
    let clients: Vec<Value> = snap
        .table
        .clients
        .iter()
        .map(|c| {
            let mut row = crate::admin_views::client_value(gw, c);
            row["last_hour"] = json!(gw.request_metrics.clients.hour(&c.name));
            row
        })
        .collect();
    let config = src.config.view();
    let redis = snap.table.config.shared.redis.is_some();
    json!({
        "now_ms": crate::clock::now_ms(),
        "generation": snap.table.generation,
        "config": {
            "generation": config["generation"],
            "loaded_at": config["loaded_at"],
            "last_reload": config["last_reload"],
            "restart_required": config["restart_required"],
        },
        "shared_state": {
            "redis": if redis { "configured" } else { "off" },
            "redis_up": src.shared.map(|s| s.is_up()),
            "storage": gw.store.backend(),
            "storage_up": gw.store.is_up(),
        },
        "channels": channels,
        "clients": clients,
    })
}
