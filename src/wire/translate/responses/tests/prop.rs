//! Properties: (1) an upstream answer cut into any pieces, from Chat chunks or Anthropic
//! events, gives Responses events that follow the grammar and accumulate to the same output
//! and usage as the non-stream translation of the same answer; (2) the upstream bytes split
//! at any byte boundaries give byte-identical events; (3) no entry point panics on arbitrary
//! JSON, and a stream's output stays well-formed with nothing after its terminal event.

use proptest::prelude::*;
use serde_json::{json, Map, Value};

use super::super::super::{RequestOptions, WireFormat};
use super::super::{answer_from, request_to, ResponsesStream};
use super::harness::{accumulate, events, run, Ans, OPTS};
use crate::wire::sse::Framer;

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,]{1,30}",
        "\\PC{1,12}",
        Just("line\nbreak \"quoted\" \\ ünï 🚀".to_string()),
    ]
}

fn answer() -> impl Strategy<Value = Ans> {
    let args = prop::collection::btree_map("[a-z]{1,5}", piece().prop_map(Value::from), 0..3)
        .prop_map(|m| Value::Object(m.into_iter().collect()).to_string());
    (
        prop::option::of(piece()),
        prop::option::of(piece()),
        prop::collection::vec(("[a-z_]{1,10}", args), 0..3),
        any::<bool>(),
        (0u64..5000, 0u64..5000, 0u64..5000),
    )
        .prop_map(|(reasoning, text, calls, max_tokens, (a, b, out))| Ans {
            reasoning,
            text,
            calls: calls
                .into_iter()
                .enumerate()
                .map(|(k, (n, a))| (format!("call_{k}"), n, a))
                .collect(),
            max_tokens,
            usage: (a.max(b), a.min(b), out),
        })
}

fn upstream_events(a: &Ans, f: WireFormat, cuts: &[usize]) -> Vec<(Option<String>, String)> {
    match f {
        WireFormat::Anthropic => a.anthropic_stream(cuts),
        _ => a.chat_stream(cuts),
    }
}

fn whole(a: &Ans, f: WireFormat) -> Value {
    let body = match f {
        WireFormat::Anthropic => a.anthropic(),
        _ => a.chat(),
    };
    let translated =
        answer_from(f, body.to_string().as_bytes(), &OPTS).expect("a valid answer translates");
    serde_json::from_slice(&translated.body).expect("JSON")
}

/// Upstream events as SSE bytes (`event:` lines as the upstream sends them).
fn sse_bytes(evs: &[(Option<String>, String)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, data) in evs {
        if let Some(n) = name {
            out.extend_from_slice(format!("event: {n}\n").as_bytes());
        }
        out.extend_from_slice(format!("data: {data}\n\n").as_bytes());
    }
    out
}

/// The upstream bytes delivered in pieces cut at `cuts`, framed, then translated.
fn framed(bytes: &[u8], cuts: &[usize], f: WireFormat) -> Vec<u8> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    let mut fr = Framer::new(false);
    let mut stream = ResponsesStream::new(f, &OPTS);
    let mut out = Vec::new();
    for w in at.windows(2) {
        fr.push(&bytes[w[0]..w[1]]);
        while let Some(ev) = fr.next_event() {
            stream.feed(
                ev.name.as_deref(),
                ev.data.as_deref().unwrap_or(""),
                &mut out,
            );
        }
    }
    fr.finish();
    while let Some(ev) = fr.next_event() {
        stream.feed(
            ev.name.as_deref(),
            ev.data.as_deref().unwrap_or(""),
            &mut out,
        );
    }
    stream.finish(&mut out);
    out
}

/// Keys and strings Responses requests and upstream answers use.
const KEYS: &[&str] = &[
    "input",
    "instructions",
    "type",
    "role",
    "content",
    "text",
    "tools",
    "name",
    "namespace",
    "parameters",
    "call_id",
    "arguments",
    "output",
    "summary",
    "tool_choice",
    "image_url",
    "file_data",
    "file_id",
    "format",
    "schema",
    "reasoning",
    "effort",
    "stream",
    "store",
    "max_output_tokens",
    "choices",
    "delta",
    "message",
    "tool_calls",
    "function",
    "index",
    "id",
    "finish_reason",
    "usage",
    "error",
    "content_block",
    "partial_json",
    "stop_reason",
];
const STRINGS: &[&str] = &[
    "message",
    "function_call",
    "function_call_output",
    "reasoning",
    "item_reference",
    "user",
    "assistant",
    "developer",
    "system",
    "input_text",
    "output_text",
    "input_image",
    "input_file",
    "function",
    "namespace",
    "web_search",
    "file_search",
    "auto",
    "required",
    "json_schema",
    "message_start",
    "content_block_start",
    "content_block_delta",
    "message_delta",
    "message_stop",
    "text_delta",
    "input_json_delta",
    "tool_use",
    "stop",
    "length",
    "[DONE]",
    "",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        prop::sample::select(STRINGS).prop_map(Value::from),
        "\\PC{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..6).prop_map(|kv| {
                Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect::<Map<_, _>>(),
                )
            }),
        ]
    })
}

/// A request body: random JSON, or random items and tools inside a valid request.
fn request_body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        json_value().prop_map(|v| v.to_string().into_bytes()),
        (
            prop::collection::vec(json_value(), 0..4),
            prop::collection::vec(json_value(), 0..3)
        )
            .prop_map(|(items, tools)| {
                json!({"model": "m", "input": items, "tools": tools})
                    .to_string()
                    .into_bytes()
            }),
        prop::collection::vec(any::<u8>(), 0..24),
    ]
}

const ALL: [WireFormat; 3] = [
    WireFormat::OpenAi,
    WireFormat::Anthropic,
    WireFormat::Gemini,
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_split_accumulates_to_the_non_stream_answer(
        a in answer(),
        cuts in prop::collection::vec(0usize..40, 0..5),
    ) {
        for f in [WireFormat::OpenAi, WireFormat::Anthropic] {
            let (out, steps) = run(f, &upstream_events(&a, f, &cuts));
            let evs = events(&out);
            let (output, response) = accumulate(&evs);
            let expect = whole(&a, f);
            prop_assert_eq!(&Value::Array(output), &expect["output"], "{:?}", f);
            prop_assert_eq!(&response["output"], &expect["output"]);
            prop_assert_eq!(&response["usage"], &expect["usage"]);
            prop_assert_eq!(&response["status"], &expect["status"]);
            prop_assert_eq!(&response["incomplete_details"], &expect["incomplete_details"]);
            let terminal: Vec<usize> = steps.iter().enumerate().filter(|(_, s)| s.terminal).map(|(i, _)| i).collect();
            prop_assert!(!terminal.is_empty());
            prop_assert!(steps.iter().all(|s| s.error.is_none()));
            // Content is first seen with the first output item, never in the preamble.
            let has_content = expect["output"].as_array().is_some_and(|o| !o.is_empty());
            prop_assert_eq!(steps.iter().any(|s| s.content), has_content);
        }
    }

    #[test]
    fn any_byte_split_gives_the_same_events(
        a in answer(),
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        for f in [WireFormat::OpenAi, WireFormat::Anthropic] {
            let bytes = sse_bytes(&upstream_events(&a, f, &[4]));
            let once = framed(&bytes, &[], f);
            let split = framed(&bytes, &cuts, f);
            prop_assert_eq!(&split, &once);
            prop_assert!(String::from_utf8(once).unwrap().contains("event: response.completed")
                || a.max_tokens);
        }
    }

    #[test]
    fn requests_and_answers_never_panic(b in request_body()) {
        for f in ALL {
            if let Ok(r) = request_to(f, &b, &RequestOptions::new("m")) {
                prop_assert!(serde_json::from_slice::<Value>(&r.body).is_ok());
            }
            if let Ok(a) = answer_from(f, &b, &OPTS) {
                prop_assert!(serde_json::from_slice::<Value>(&a.body).is_ok());
            }
        }
    }

    #[test]
    fn streams_never_panic_and_stay_well_formed(
        evs in prop_oneof![
            prop::collection::vec(
                (prop::option::of(prop::sample::select(STRINGS)), json_value().prop_map(|v| v.to_string())),
                0..12,
            ),
            (answer(), prop::collection::vec((any::<usize>(), json_value()), 0..3), any::<bool>())
                .prop_map(|(a, edits, anthropic)| {
                    let from = if anthropic { WireFormat::Anthropic } else { WireFormat::OpenAi };
                    let mut evs = upstream_events(&a, from, &[3]);
                    for (at, with) in edits {
                        let i = at % evs.len();
                        evs[i].1 = with.to_string();
                    }
                    evs.into_iter().map(|(_, d)| (None, d)).collect()
                }),
        ],
    ) {
        for f in ALL {
            let mut stream = ResponsesStream::new(f, &OPTS);
            let mut out = Vec::new();
            let mut closed = false;
            for (name, data) in &evs {
                let before = out.len();
                let fed = stream.feed(*name, data, &mut out);
                prop_assert!(!(closed && out.len() > before), "output after the terminal event");
                closed |= fed.terminal;
            }
            let before = out.len();
            let finished = stream.finish(&mut out);
            prop_assert!(!(closed && out.len() > before));
            let text = String::from_utf8(out).unwrap();
            // Every event is named, typed and numbered; a terminal event, if any, is last.
            let parsed = events(&text);
            if finished.terminal || closed {
                if let Some((n, _)) = parsed.last() {
                    prop_assert!(n == "response.completed" || n == "response.incomplete" || n == "response.failed", "{}", n);
                }
            }
        }
    }
}
