//! The recorded client requests (`tests/fixtures/clients/*.json`): loading them with the body
//! bytes in the client's key order, flipping `stream` in place, and sending one to the
//! gateway with the client's own headers (Host, Content-Length and credentials replaced).
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::support::{Gw, ALICE};

/// One recorded request.
pub struct Fixture {
    pub file: String,
    pub client: String,
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    /// The body as recorded (key order kept), `None` for HEAD and GET.
    pub body: Option<String>,
}

#[derive(Deserialize)]
struct Raw {
    client: String,
    method: String,
    path: String,
    headers: serde_json::Map<String, Value>,
    body: Box<RawValue>,
}

/// The fixtures folder, kept in the repository: `tests/fixtures/clients/`.
fn folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients")
}

/// Every fixture, sorted by file name.
pub fn all() -> Vec<Fixture> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder())
        .expect("fixtures folder readable")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(files.len() >= 19, "fixtures missing: {files:?}");
    files
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).expect("fixture readable");
            let raw: Raw =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            let body = raw.body.get();
            Fixture {
                file: p
                    .file_name()
                    .map_or_else(String::new, |f| f.to_string_lossy().into()),
                client: raw.client,
                method: raw.method,
                path: raw.path,
                headers: raw
                    .headers
                    .into_iter()
                    .map(|(k, v)| (k, v.as_str().unwrap_or_default().to_string()))
                    .collect(),
                body: (body != "null").then(|| body.to_string()),
            }
        })
        .collect()
}

/// The fixture named `file`.
pub fn named(file: &str) -> Fixture {
    all()
        .into_iter()
        .find(|f| f.file == file)
        .unwrap_or_else(|| panic!("no fixture {file}"))
}

/// The client wire format a fixture speaks, from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Messages,
    CountTokens,
    Chat,
    Responses,
    /// `HEAD /`, answered by the gateway itself.
    Probe,
    /// `GET /v1/responses` with `Upgrade: websocket`: refused with 426.
    Upgrade,
}

impl Fixture {
    pub fn api(&self) -> Api {
        let path = self.path.split('?').next().unwrap_or_default();
        match (self.method.as_str(), path) {
            ("HEAD", _) => Api::Probe,
            ("GET", _) => Api::Upgrade,
            (_, "/v1/messages/count_tokens") => Api::CountTokens,
            (_, "/v1/messages") => Api::Messages,
            (_, "/v1/responses") => Api::Responses,
            _ => Api::Chat,
        }
    }

    /// The model the body names.
    pub fn model(&self) -> Option<String> {
        let body: Value = serde_json::from_str(self.body.as_deref()?).ok()?;
        body["model"].as_str().map(str::to_string)
    }

    /// Whether the body asks for a stream.
    pub fn streams(&self) -> bool {
        self.body
            .as_deref()
            .and_then(|b| serde_json::from_str::<Value>(b).ok())
            .is_some_and(|v| v["stream"] == Value::Bool(true))
    }

    /// The body with `stream` set to `on` (the key added when absent), key order and bytes
    /// otherwise as recorded; `stream_options` goes with a stream turned off, as a client
    /// sends it only with a stream.
    pub fn body_streaming(&self, on: bool) -> Option<String> {
        let body = self.body.as_deref()?;
        let value = if on { "true" } else { "false" };
        let mut out = match top_level(body, "stream") {
            Some((_, v0, v1)) => format!("{}{value}{}", &body[..v0], &body[v1..]),
            None => {
                let at = body.find('{')? + 1;
                format!("{}\"stream\":{value},{}", &body[..at], &body[at..])
            }
        };
        if !on {
            out = remove_top_level(&out, "stream_options");
        }
        Some(out)
    }

    /// Sends the request to the gateway: the recorded method, path, headers (Host,
    /// Content-Length and credentials dropped; the test client's key in the same scheme)
    /// and `body`.
    pub async fn send(&self, gw: &Gw, body: Option<String>) -> reqwest::Response {
        let method = reqwest::Method::from_bytes(self.method.as_bytes()).expect("method");
        let mut req = gw.http.request(method, format!("{}{}", gw.base, self.path));
        let mut scheme = None;
        for (k, v) in &self.headers {
            match k.to_ascii_lowercase().as_str() {
                "host" | "content-length" => {}
                "x-api-key" => scheme = Some("x-api-key"),
                "authorization" => scheme = Some("bearer"),
                _ => req = req.header(k.as_str(), v.as_str()),
            }
        }
        req = match scheme {
            Some("x-api-key") => req.header("x-api-key", ALICE),
            Some(_) => req.bearer_auth(ALICE),
            None => req,
        };
        if let Some(b) = body {
            req = req.body(b);
        }
        req.send().await.expect("request sent")
    }
}

/// The end of the JSON string starting at `i` (one past its closing quote).
fn string_end(bytes: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < bytes.len() {
        match bytes[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    bytes.len()
}

/// The end of the JSON value starting at `j` (trailing whitespace excluded).
fn value_end(bytes: &[u8], mut j: usize) -> usize {
    let start = j;
    let mut depth = 0usize;
    while j < bytes.len() {
        match bytes[j] {
            b'"' => {
                j = string_end(bytes, j);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth == 0 => break,
            b'}' | b']' => depth -= 1,
            b',' if depth == 0 => break,
            _ => {}
        }
        j += 1;
    }
    while j > start && bytes[j - 1].is_ascii_whitespace() {
        j -= 1;
    }
    j
}

/// The spans of the top-level `"key": value` of a JSON object's text: (key start, value
/// start, value end).
fn top_level(raw: &str, key: &str) -> Option<(usize, usize, usize)> {
    let bytes = raw.as_bytes();
    let want = format!("\"{key}\"");
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let end = string_end(bytes, i);
                if depth == 1 && raw.get(i..end) == Some(want.as_str()) {
                    let mut j = end;
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if bytes.get(j) == Some(&b':') {
                        j += 1;
                        while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                            j += 1;
                        }
                        return Some((i, j, value_end(bytes, j)));
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// `raw` without its top-level `key` (and the comma that separated it).
fn remove_top_level(raw: &str, key: &str) -> String {
    let Some((k0, _, v1)) = top_level(raw, key) else {
        return raw.to_string();
    };
    let after = raw[v1..].trim_start();
    if let Some(rest) = after.strip_prefix(',') {
        return format!("{}{}", &raw[..k0], rest.trim_start());
    }
    let before = raw[..k0].trim_end();
    let before = before.strip_suffix(',').unwrap_or(before);
    format!("{before}{}", &raw[v1..])
}

#[test]
fn stream_flips_in_place() {
    let fixture = |body: &str| Fixture {
        file: String::new(),
        client: String::new(),
        method: "POST".into(),
        path: "/v1/chat/completions".into(),
        headers: Vec::new(),
        body: Some(body.into()),
    };
    let streaming = fixture(
        r#"{"model": "m", "stream": true, "stream_options": {"include_usage": true}, "n": "a,}"}"#,
    );
    assert_eq!(
        streaming.body_streaming(false).unwrap(),
        r#"{"model": "m", "stream": false, "n": "a,}"}"#
    );
    let nested_stream = fixture(r#"{"messages":[{"stream":1}],"model":"m"}"#);
    assert_eq!(
        nested_stream.body_streaming(true).unwrap(),
        r#"{"stream":true,"messages":[{"stream":1}],"model":"m"}"#
    );
    let options_only = fixture(r#"{"model":"m","stream_options":{"a":1}}"#);
    assert_eq!(
        options_only.body_streaming(false).unwrap(),
        r#"{"stream":false,"model":"m"}"#
    );
}
