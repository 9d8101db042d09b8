//! Fuzz harnesses: each function takes arbitrary bytes, drives one parser of switchyard and
//! checks its invariants. Shared by the libFuzzer targets and the stable-Rust test fallback.
use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use switchyard::wire::dialect::{is_terminal, StreamFormat};
use switchyard::wire::sse::Framer;
use switchyard::wire::usage::Usage;

/// The SSE framer: any byte split yields the same events; terminal detection never panics.
pub fn sse_framer(data: &[u8]) {
    let split = data.first().map_or(1, |b| usize::from(*b) + 1);
    let mut whole = Framer::new(false);
    whole.push(data);
    let mut a = Vec::new();
    while let Some(ev) = whole.next_event() {
        for f in [StreamFormat::Chat, StreamFormat::Responses, StreamFormat::Messages] {
            let _ = is_terminal(f, &ev);
        }
        let _ = switchyard::wire::dialect::hidden_error(&ev);
        let mut u = switchyard::wire::usage::StreamUsage::default();
        u.observe(&ev);
        a.push(format!("{ev:?}"));
    }
    let mut pieces = Framer::new(false);
    let mut b = Vec::new();
    for chunk in data.chunks(split) {
        pieces.push(chunk);
        while let Some(ev) = pieces.next_event() {
            b.push(format!("{ev:?}"));
        }
    }
    assert_eq!(a, b, "event framing depends on chunk boundaries");
}

/// The status-set parser: accepted sets only hold 100..=999 and re-parse to themselves.
pub fn status_set(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let Ok(set) = switchyard::config::status_set::StatusSet::parse(s) else { return };
    let ranges = set.ranges();
    let text: Vec<String> = ranges.iter().map(|(a, b)| format!("{a}-{b}")).collect();
    if text.is_empty() {
        return;
    }
    let again = switchyard::config::status_set::StatusSet::parse(&text.join(",")).unwrap();
    assert_eq!(again.ranges(), ranges);
}

/// Usage extraction from a JSON body never panics.
pub fn usage(data: &[u8]) {
    if let Some(u) = Usage::from_body(data) {
        let _ = u.is_zero();
    }
}

/// Hidden-error detection on a 200 body never panics.
pub fn hidden_error(data: &[u8]) {
    let _ = switchyard::wire::hidden::body_hidden_error(data);
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = switchyard::wire::hidden::embedded_error(&v);
    }
}

/// Request peek + model rewrite: when the input is a JSON object with a string model, the
/// rewrite is valid JSON whose model is the new one and whose other keys are unchanged.
pub fn request_peek(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    let Ok(p) = switchyard::wire::request::peek(&body) else { return };
    let Ok(serde_json::Value::Object(before)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    if !matches!(before.get("model"), Some(serde_json::Value::String(_))) {
        return;
    }
    let out = switchyard::wire::request::rewrite_model(&body, &p, "new-\"model\"\\é");
    let after: serde_json::Value = serde_json::from_slice(&out).expect("rewrite is valid JSON");
    assert_eq!(after["model"], "new-\"model\"\\é");
    let mut a = after.as_object().unwrap().clone();
    let mut b = before.clone();
    a.remove("model");
    b.remove("model");
    assert_eq!(a, b, "the rewrite touched other keys");
}

/// Config loading: arbitrary YAML gives a config or errors, never a panic.
pub fn config_load(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let _ = switchyard::config::load_str(s, Path::new("fuzz.yaml"), &HashMap::new());
}
