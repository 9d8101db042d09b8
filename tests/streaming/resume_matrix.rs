//! Stream resume across the crossings (R18.2's matrix): a cut, a stall and an error event
//! after the first content, for each client format (Chat, Messages, Responses) on each
//! upstream kind (OpenAI, Anthropic, Gemini), with resume on and off. The client always gets
//! either one whole answer with exactly one terminal event and no text twice, or an error
//! ending — never a truncated success, never two terminal events.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::streams::*;
use crate::support::*;

const PATHS: [&str; 3] = ["/v1/chat/completions", "/v1/messages", "/v1/responses"];
const KINDS: [&str; 3] = ["openai", "anthropic", "gemini"];

#[derive(Clone, Copy, Debug)]
enum Fault {
    Cut,
    Stall,
    Error,
}

impl Fault {
    fn behavior(self) -> Behavior {
        match self {
            Fault::Cut => Behavior::CutMidStream { after_chunks: 2 },
            // The first chunk, then ten minutes of silence on an open socket.
            Fault::Stall => Behavior::Stream {
                chunks: 3,
                delay: Duration::from_secs(600),
            },
            Fault::Error => Behavior::ErrorMidStream {
                after_chunks: 2,
                code: 529,
            },
        }
    }

    /// The text the client has when the fault strikes.
    fn delivered(self) -> &'static str {
        match self {
            Fault::Stall => "chunk 0 ",
            Fault::Cut | Fault::Error => "chunk 0 chunk 1 ",
        }
    }
}

/// One case: primary `a` of `kind` faults, `b` (Anthropic, takes a prefill) answers.
async fn case(path: &'static str, kind: &'static str, fault: Fault, resume: bool) -> String {
    let mocks = mocks(&["a", "b"]).await;
    mocks["b"].set_record(true);
    let on = if resume {
        "resilience:\n  stream_resume: {enabled: true, max: 1}\n"
    } else {
        ""
    };
    let yaml = fill(
        &format!(
            "{FAST}  stream_stall: 1s\n{on}channels:\n{}{}{CLIENTS}",
            ch("a", kind, 10, ""),
            ch("b", "anthropic", 0, "")
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    mocks["a"].push(fault.behavior());
    let name = format!("{path} on {kind}, {fault:?}, resume {resume}");
    let t0 = Instant::now();
    let response = send(&gw, path, true).await;
    assert_eq!(response.status(), 200, "{name}");
    let text = response.text().await.unwrap_or_default();
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "{name}: took {:?}",
        t0.elapsed()
    );
    let successes = text.matches("event: message_stop").count()
        + text.matches("data: [DONE]").count()
        + text.matches("event: response.completed").count();
    let body = text_of(path, &text);
    if resume {
        let whole = format!("{}chunk 0 chunk 1 chunk 2 ", fault.delivered());
        assert_eq!(successes, 1, "{name}: one terminal event: {text}");
        assert_eq!(body, whole, "{name}: {text}");
        assert!(!text.contains("stream_incomplete"), "{name}: {text}");
        let error = text.contains("event: error") || text.contains("\"error\":{");
        assert!(!error, "{name}: no error reaches the client: {text}");
        if path == "/v1/responses" {
            whole_responses_output(&name, &text, &whole);
        }
        let rows = requests(&gw).await;
        assert_eq!(rows[0]["stream_outcome"], "resumed", "{name}: {}", rows[0]);
        assert_eq!(mocks["b"].calls(), 1, "{name}");
    } else {
        assert_eq!(
            successes, 0,
            "{name}: a cut answer is never a success: {text}"
        );
        assert_eq!(body, fault.delivered(), "{name}: {text}");
        assert!(
            text.contains("error"),
            "{name}: the stream ends in an error: {text}"
        );
        assert_eq!(
            mocks["b"].calls(),
            0,
            "{name}: committed streams never fail over"
        );
    }
    gw.stop().await;
    name
}

/// The Responses client's final `response.completed` names one message holding the whole
/// text, and the sequence numbers it read never go back.
fn whole_responses_output(name: &str, text: &str, whole: &str) {
    let events: Vec<Value> = data_of(text);
    let done = events
        .iter()
        .find(|v| v["type"] == "response.completed")
        .unwrap_or_else(|| panic!("{name}: no response.completed: {text}"));
    let output = done["response"]["output"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(output.len(), 1, "{name}: one message: {done}");
    assert_eq!(output[0]["content"][0]["text"], whole, "{name}: {done}");
    let created = events
        .iter()
        .filter(|v| v["type"] == "response.created")
        .count();
    assert_eq!(created, 1, "{name}: one response.created: {text}");
    let seqs: Vec<u64> = events
        .iter()
        .filter_map(|v| v["sequence_number"].as_u64())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "{name}: sequence numbers rise: {seqs:?}"
    );
    let items: HashMap<String, usize> =
        events
            .iter()
            .filter_map(|v| v["item_id"].as_str())
            .fold(HashMap::new(), |mut m, id| {
                *m.entry(id.to_string()).or_default() += 1;
                m
            });
    assert_eq!(
        items.len(),
        1,
        "{name}: the text goes on in one item: {items:?}"
    );
}

fn data_of(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .collect()
}

/// The answer's text as the client of `path` reads it.
fn text_of(path: &str, text: &str) -> String {
    data_of(text)
        .iter()
        .filter_map(|v| match path {
            "/v1/messages" => v["delta"]["text"].as_str().map(str::to_string),
            "/v1/responses" if v["type"] == "response.output_text.delta" => {
                v["delta"].as_str().map(str::to_string)
            }
            "/v1/responses" => None,
            _ => v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string),
        })
        .collect()
}

async fn matrix(fault: Fault) {
    let mut cases = Vec::new();
    for path in PATHS {
        for kind in KINDS {
            for resume in [true, false] {
                cases.push(tokio::spawn(case(path, kind, fault, resume)));
            }
        }
    }
    let mut failed = Vec::new();
    for c in cases {
        if let Err(e) = c.await {
            failed.push(match e.try_into_panic() {
                Ok(p) => p.downcast_ref::<String>().cloned().unwrap_or_default(),
                Err(e) => e.to_string(),
            });
        }
    }
    assert!(
        failed.is_empty(),
        "{} cases failed: {failed:#?}",
        failed.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_after_content_resumes_or_ends_incomplete_in_every_format_and_kind() {
    matrix(Fault::Cut).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stall_after_content_resumes_or_ends_incomplete_in_every_format_and_kind() {
    matrix(Fault::Stall).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_event_after_content_resumes_or_ends_in_error_in_every_format_and_kind() {
    matrix(Fault::Error).await;
}

/// `virtual_models.*.stream_resume` wins over `resilience.stream_resume`: a virtual model
/// that turns resume on resumes with it off globally, and one that turns it off does not
/// resume with it on globally.
#[tokio::test]
async fn a_virtual_model_turns_resume_on_or_off_for_its_own_requests() {
    for (global, own, resumed) in [(false, true, true), (true, false, false)] {
        let mocks = mocks(&["a", "b"]).await;
        let yaml = fill(
            &format!(
                "{FAST}resilience:\n  stream_resume: {{enabled: {global}}}\nchannels:\n{}{}\
                 virtual_models:\n  vm:\n    targets: [a/m, b/m]\n    stream_resume: {{enabled: {own}}}\n{CLIENTS}",
                ch("a", "anthropic", 10, ""),
                ch("b", "anthropic", 0, "")
            ),
            &mocks,
        );
        let gw = start_gw(&yaml).await;
        mocks["a"].push(Behavior::CutMidStream { after_chunks: 2 });
        let body = serde_json::json!({"model": "vm", "max_tokens": 10, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]});
        let text = gw
            .post("/v1/messages", ALICE, body)
            .await
            .text()
            .await
            .unwrap_or_default();
        let name = format!("global {global}, virtual model {own}");
        assert_eq!(
            !text.contains("stream_incomplete"),
            resumed,
            "{name}: {text}"
        );
        assert_eq!(mocks["b"].calls(), usize::from(resumed), "{name}");
        gw.stop().await;
    }
}
