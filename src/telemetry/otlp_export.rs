//! The two OTLP transports of `telemetry.otlp.protocol` (R20.1): `http/protobuf` through
//! `opentelemetry-otlp`'s HTTP exporter (over a hyper client with rustls, so `https://`
//! receivers work), and `grpc` — one unary `TraceService/Export` call over HTTP/2 per batch,
//! the same protobuf message in gRPC's length-prefixed frame, the status read from
//! `grpc-status`. Both encode with the published OTLP definitions (`opentelemetry-proto`).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;
use prost::Message;

use crate::config::model::{Otlp, OtlpProtocol};

/// The gRPC method of a trace export.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// One configured transport.
pub(super) enum Exporter {
    Http(Box<opentelemetry_otlp::SpanExporter>),
    Grpc(Box<Grpc>),
}

fn https(http2: bool) -> Https {
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_webpki_roots()
        .https_or_http();
    if http2 {
        builder.enable_http2().build()
    } else {
        builder.enable_http1().build()
    }
}

impl Exporter {
    /// The transport of `cfg`, its spans under `resource`, each export bounded by `timeout`.
    pub(super) fn of(cfg: &Otlp, resource: &Resource, timeout: Duration) -> Result<Self, String> {
        match cfg.protocol {
            OtlpProtocol::HttpProtobuf => {
                let headers = cfg
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_string()))
                    .collect();
                let client =
                    opentelemetry_http::hyper::HyperClient::new(https(false), timeout, None);
                let mut exporter = opentelemetry_otlp::SpanExporter::builder()
                    .with_http()
                    .with_http_client(client)
                    .with_endpoint(cfg.endpoint.clone())
                    .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                    .with_timeout(timeout)
                    .with_headers(headers)
                    .build()
                    .map_err(|exporter| format!("telemetry.otlp: {exporter}"))?;
                exporter.set_resource(resource);
                Ok(Exporter::Http(Box::new(exporter)))
            }
            OtlpProtocol::Grpc => {
                Grpc::new(cfg, resource, timeout).map(|g| Exporter::Grpc(Box::new(g)))
            }
        }
    }

    pub(super) async fn export(&self, spans: Vec<SpanData>) -> Result<(), String> {
        match self {
            Exporter::Http(e) => e.export(spans).await.map_err(|e| e.to_string()),
            Exporter::Grpc(g) => g.export(spans).await,
        }
    }
}

/// OTLP/gRPC without a gRPC stack: a unary call is one HTTP/2 POST.
pub(super) struct Grpc {
    client: Client<Https, Full<Bytes>>,
    uri: Uri,
    headers: HeaderMap,
    resource: ResourceAttributesWithSchema,
    timeout: Duration,
}

impl Grpc {
    fn new(cfg: &Otlp, resource: &Resource, timeout: Duration) -> Result<Grpc, String> {
        let base = cfg.endpoint.trim_end_matches('/');
        let uri: Uri = format!("{base}{GRPC_PATH}")
            .parse()
            .map_err(|e| format!("telemetry.otlp.endpoint: {e}"))?;
        let mut headers = HeaderMap::new();
        for (k, v) in &cfg.headers {
            let name = HeaderName::from_bytes(k.as_bytes());
            let value = HeaderValue::from_str(v.expose());
            if let (Ok(n), Ok(mut v)) = (name, value) {
                v.set_sensitive(true);
                headers.insert(n, v);
            }
        }
        let client = Client::builder(TokioExecutor::new())
            .http2_only(true)
            .build(https(true));
        Ok(Grpc {
            client,
            uri,
            headers,
            resource: resource.into(),
            timeout,
        })
    }

    async fn export(&self, spans: Vec<SpanData>) -> Result<(), String> {
        let msg = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(spans, &self.resource),
        }
        .encode_to_vec();
        let len = u32::try_from(msg.len()).map_err(|_| "export too large".to_string())?;
        let mut body = Vec::with_capacity(msg.len() + 5);
        body.push(0); // not compressed
        body.extend_from_slice(&len.to_be_bytes());
        body.extend_from_slice(&msg);
        let mut req = Request::post(self.uri.clone())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        req.headers_mut().extend(self.headers.clone());
        let call = async {
            let resp = self.client.request(req).await.map_err(|e| e.to_string())?;
            if resp.status() != http::StatusCode::OK {
                return Err(format!("HTTP {}", resp.status()));
            }
            let early = grpc_status(resp.headers());
            let collected = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            match early.or_else(|| collected.trailers().and_then(grpc_status)) {
                Some((0, _)) => Ok(()),
                Some((code, m)) => Err(format!("grpc-status {code}: {m}")),
                None => Err("no grpc-status in the answer".into()),
            }
        };
        tokio::time::timeout(self.timeout, call)
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
    }
}

/// `grpc-status` and `grpc-message` of a header block, when it has them.
fn grpc_status(h: &HeaderMap) -> Option<(u32, String)> {
    let code = h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()?;
    let message = h
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or_default()
        .to_string();
    Some((code, message))
}
