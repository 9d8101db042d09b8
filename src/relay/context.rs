//! The request context: the immutable facts about one client request, fixed by the entry
//! before the first attempt and read by every step after it (plan, admission, exchange,
//! classification, the response and the request log).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue};
use http::Method;

use crate::affinity::StickyKey;
use crate::config::model::Client;
use crate::error::ClientFormat;
use crate::routing::family::PathFamily;
use crate::state::Snapshot;
use crate::wire::dialect::StreamFormat;
use crate::wire::request::Peek;

/// Everything the attempt loop needs about one client request.
#[derive(Clone)]
pub struct Context {
    /// The snapshot the request loaded once (Invariant: one snapshot per request).
    pub snap: Arc<Snapshot>,
    pub client: Arc<Client>,
    /// (group, route) in the order groups are tried (R5); the group by its position in the
    /// client's groups ([`Context::group`]).
    pub routes: crate::relay::intake::lookup::Routes,
    pub method: Method,
    /// The normalised path (`http::path::normalise`), shared with the request's record.
    pub path: Arc<str>,
    /// The normalised path and the client's query, only when it sent one (see
    /// [`Context::path_and_query`]: without a query that is `path`, not a copy).
    pub with_query: Option<String>,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// The JSON body's one parse, when it has one.
    pub peek: Option<Peek>,
    pub family: PathFamily,
    /// The caller's wire format (R1.4): errors are written in it.
    pub format: ClientFormat,
    pub stream_format: StreamFormat,
    pub idempotency_key: Option<HeaderValue>,
    /// A task call (R10.5): classified with the task rule; a successful POST binds its task.
    pub is_task: bool,
    pub request_id: HeaderValue,
    pub started: std::time::Instant,
    /// The request's sticky key (R8).
    pub sticky: Option<StickyKey>,
    /// The body's input-token estimate (`wire::tokens`), made on first use.
    pub prompt_estimate: std::sync::OnceLock<u64>,
    /// The request's trace context when traces are exported (`telemetry.otlp`, R20.1);
    /// `headers` then carry the gateway's `traceparent` in place of the client's.
    pub trace: Option<crate::telemetry::otlp::TraceCtx>,
}

impl Context {
    /// The name of the client's `i`-th group ("" past the end, which `entry` never makes).
    pub fn group(&self, i: usize) -> &str {
        self.group_name(i).map_or("", |g| g)
    }

    /// The name of the client's `i`-th group, shared (`None` past the end).
    pub fn group_name(&self, i: usize) -> Option<&Arc<str>> {
        crate::relay::intake::lookup::client_groups(&self.snap, &self.client).get(i)
    }

    /// The public model, as the body's one parse read it ("" when the request names none).
    pub fn model(&self) -> &str {
        self.model_name().map_or("", |m| m)
    }

    /// The public model, shared (`None` when the request names none).
    pub fn model_name(&self) -> Option<&Arc<str>> {
        self.peek.as_ref()?.model.as_ref()
    }

    /// The normalised path and the client's query (`/v1/x?a=1`), as the upstream gets it.
    pub fn path_and_query(&self) -> &str {
        self.with_query.as_deref().unwrap_or(&self.path)
    }

    /// The request id as text ("" if it is not valid UTF-8, which `entry` never makes).
    pub fn rid(&self) -> &str {
        self.request_id.to_str().unwrap_or("")
    }

    /// The body's estimated input tokens (admission, precharge, key limits): text by
    /// script, images by their size, never base64 as prose (`wire::tokens`).
    pub fn prompt_tokens(&self) -> u64 {
        *self
            .prompt_estimate
            .get_or_init(|| crate::wire::tokens::estimate_input_tokens(&self.body))
    }

    /// The client asked for a stream.
    pub fn wants_stream(&self) -> bool {
        self.peek.as_ref().is_some_and(|p| p.stream)
    }
}
