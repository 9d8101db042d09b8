//! Validation of `telemetry:` (R20.1): the OTLP trace exporter's endpoint, protocol,
//! headers, sample ratio and service name.

use crate::config::error::Collector;
use crate::config::load::raw::RawTelemetry;
use crate::config::model::{Otlp, OtlpProtocol, Telemetry};
use crate::secret::Secret;

/// The OTLP/HTTP path of traces.
const TRACES_PATH: &str = "/v1/traces";

/// `telemetry.otlp`: off without an endpoint; `protocol` is `http/protobuf` (default) or
/// `grpc`; `sample_ratio` within 0..=1.
pub(crate) fn telemetry(raw: &RawTelemetry, collector: &mut Collector) -> Telemetry {
    let Some(raw_otlp) = &raw.otlp else {
        return Telemetry::default();
    };
    let endpoint = raw_otlp
        .endpoint
        .as_deref()
        .map(str::trim)
        .unwrap_or_default();
    if endpoint.is_empty() {
        return Telemetry::default();
    }
    let url_ok = endpoint.parse::<http::Uri>().ok().filter(|parsed| {
        matches!(parsed.scheme_str(), Some("http" | "https")) && parsed.host().is_some()
    });
    let Some(uri) = url_ok else {
        collector.push(
            "telemetry.otlp.endpoint",
            "must be an http:// or https:// URL of an OTLP/HTTP receiver, e.g. http://127.0.0.1:4318",
        );
        return Telemetry::default();
    };
    let protocol = match raw_otlp.protocol.as_deref().map(str::trim) {
        None | Some("" | "http/protobuf") => OtlpProtocol::HttpProtobuf,
        Some("grpc") => OtlpProtocol::Grpc,
        Some(other) => {
            collector.push(
                "telemetry.otlp.protocol",
                format!("unknown protocol `{other}`: use http/protobuf or grpc"),
            );
            OtlpProtocol::HttpProtobuf
        }
    };
    let sample_ratio = raw_otlp.sample_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sample_ratio) {
        collector.push("telemetry.otlp.sample_ratio", "must be between 0.0 and 1.0");
    }
    let mut headers = Vec::new();
    for (name, value) in raw_otlp.headers.iter().flatten() {
        let valid = http::HeaderName::from_bytes(name.as_bytes()).is_ok()
            && http::HeaderValue::from_str(value).is_ok();
        if !valid {
            collector.push(
                format!("telemetry.otlp.headers.{name}"),
                "is not a valid HTTP header",
            );
        }
        headers.push((name.to_ascii_lowercase(), Secret::new(value.clone())));
    }
    let path = uri.path().trim_end_matches('/');
    let endpoint = if protocol == OtlpProtocol::Grpc || path.ends_with(TRACES_PATH) {
        endpoint.to_string()
    } else {
        format!("{}{TRACES_PATH}", endpoint.trim_end_matches('/'))
    };
    let service_name = raw_otlp
        .service_name
        .as_deref()
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .unwrap_or("switchyard")
        .to_string();
    Telemetry {
        otlp: Some(Otlp {
            endpoint,
            protocol,
            headers,
            sample_ratio: sample_ratio.clamp(0.0, 1.0),
            service_name,
        }),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::model::OtlpProtocol;
    use crate::config::tests::{errs, load, CH};

    #[test]
    fn otlp_is_off_without_an_endpoint_and_completes_its_url() {
        assert!(load(CH).expect("loads").telemetry.otlp.is_none());
        let off = format!("telemetry:\n  otlp: {{endpoint: \"\"}}\n{CH}");
        assert!(load(&off).expect("loads").telemetry.otlp.is_none());
        let on = format!(
            "telemetry:\n  otlp:\n    endpoint: http://127.0.0.1:4318\n    headers: {{authorization: Bearer x}}\n    sample_ratio: 0.5\n{CH}"
        );
        let otlp = load(&on).expect("loads").telemetry.otlp.expect("on");
        assert_eq!(otlp.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(otlp.protocol, OtlpProtocol::HttpProtobuf);
        assert_eq!(otlp.service_name, "switchyard");
        assert_eq!(otlp.sample_ratio, 0.5);
        assert_eq!(otlp.headers[0].0, "authorization");
        let grpc =
            format!("telemetry:\n  otlp: {{endpoint: \"http://c:4317\", protocol: grpc}}\n{CH}");
        let otlp = load(&grpc).expect("loads").telemetry.otlp.expect("on");
        assert_eq!(
            (otlp.endpoint.as_str(), otlp.protocol),
            ("http://c:4317", OtlpProtocol::Grpc)
        );
        let traceparent = load(CH).expect("loads").channels[0].traceparent;
        assert!(traceparent, "channels.*.traceparent defaults to true");
    }

    #[test]
    fn otlp_errors_name_their_key() {
        for (otlp, key) in [
            ("{endpoint: \"ftp://x\"}", "telemetry.otlp.endpoint"),
            (
                "{endpoint: \"http://x\", protocol: thrift}",
                "telemetry.otlp.protocol",
            ),
            (
                "{endpoint: \"http://x\", sample_ratio: 2}",
                "telemetry.otlp.sample_ratio",
            ),
            ("{endpoint: \"http://x\", colour: red}", "telemetry.otlp"),
        ] {
            let error = errs(&format!("telemetry:\n  otlp: {otlp}\n{CH}")).to_string();
            assert!(error.contains(key), "{otlp}: {error}");
        }
    }
}
