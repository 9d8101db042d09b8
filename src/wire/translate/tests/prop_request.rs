//! Property: a request translated A -> B -> A keeps every field the mapping says is kept
//! (README.md), for OpenAI <-> Anthropic both ways; and its Gemini translation keeps every
//! text, image, tool call and tool result (by name) in order.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::ir::{ChatRequest, Image, Message, Part, ResponseFormat, Role, Tool, ToolChoice};
use super::super::{read_request, write_request, RequestOptions, WireFormat};

fn text() -> impl Strategy<Value = String> {
    // Quotes, backslashes, newlines, non-ASCII and JSON-looking text.
    prop_oneof![
        "[a-zA-Z0-9 .,!?]{1,24}",
        "\\PC{1,12}",
        Just("{\"not\": \"json args\"}\n\t\\".to_string()),
        Just("ünïcødé 🚀 ∑".to_string()),
    ]
}

fn image() -> impl Strategy<Value = Image> {
    prop_oneof![
        "https://example\\.com/[a-z]{1,8}\\.png".prop_map(Image::Url),
        (
            prop::sample::select(vec!["image/png", "image/jpeg", "image/gif", "image/webp"]),
            "[A-Za-z0-9+/]{4,16}"
        )
            .prop_map(|(m, d)| Image::Base64 {
                media_type: m.to_string(),
                data: format!("{d}=="),
            }),
    ]
}

fn args() -> impl Strategy<Value = Value> {
    prop::collection::btree_map(
        "[a-z_]{1,6}",
        prop_oneof![
            text().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(json!({"nested": [1, "two", null]})),
        ],
        0..4,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// A conversation: user turns (text and images, after the tool results that answer the previous
/// assistant turn) alternating with assistant turns (text, then tool calls).
fn conversation(tools: Vec<String>) -> impl Strategy<Value = Vec<Message>> {
    let user_extra = prop::collection::vec(
        prop_oneof![text().prop_map(Part::Text), image().prop_map(Part::Image)],
        1..3,
    );
    let turn = (
        user_extra,
        prop::collection::vec(text(), 0..2),
        prop::collection::vec((prop::sample::select(tools), args()), 0..3),
        prop::collection::vec(text(), 1..3),
    );
    prop::collection::vec(turn, 1..4).prop_map(|turns| {
        let mut msgs = Vec::new();
        let mut pending: Vec<(String, String)> = Vec::new();
        let mut n = 0;
        for (extra, said, calls, results) in turns {
            let mut parts: Vec<Part> = pending
                .drain(..)
                .zip(results.iter().cycle())
                .map(|((id, name), r)| Part::ToolResult {
                    id,
                    name: Some(name),
                    content: vec![Part::Text(r.clone())],
                    // `is_error` has no OpenAI counterpart (README.md): not a kept field.
                    is_error: false,
                })
                .collect();
            parts.extend(extra);
            msgs.push(Message {
                role: Role::User,
                parts,
            });
            let mut parts: Vec<Part> = said.into_iter().map(Part::Text).collect();
            for (name, args) in calls {
                let id = format!("call_{n}x");
                n += 1;
                pending.push((id.clone(), name.clone()));
                parts.push(Part::ToolCall { id, name, args });
            }
            if parts.is_empty() {
                parts.push(Part::Text("ok".into()));
            }
            msgs.push(Message {
                role: Role::Assistant,
                parts,
            });
        }
        msgs
    })
}

pub(super) fn request() -> impl Strategy<Value = ChatRequest> {
    let names = prop::collection::btree_set("[a-z]{1,8}", 1..4);
    names
        .prop_flat_map(|names| {
            let names: Vec<String> = names.into_iter().collect();
            let tools: Vec<Tool> = names
                .iter()
                .map(|n| Tool {
                    name: n.clone(),
                    description: Some(format!("tool {n}")),
                    schema: Some(
                        json!({"type": "object", "properties": {"x": {"type": "string"}}}),
                    ),
                })
                .collect();
            let choice = prop_oneof![
                Just(None),
                Just(Some(ToolChoice::Auto)),
                Just(Some(ToolChoice::None)),
                Just(Some(ToolChoice::Required)),
                prop::sample::select(names.clone()).prop_map(|n| Some(ToolChoice::Named(n))),
            ];
            (
                conversation(names),
                Just(tools),
                choice,
                prop::option::of(any::<bool>()),
                prop::collection::vec(text(), 0..3),
                (
                    1u64..100_000,
                    prop::option::of(0.0f64..=1.0),
                    prop::option::of(0.0f64..=1.0),
                ),
                (
                    prop::collection::vec("[a-z#]{1,5}", 0..4),
                    any::<bool>(),
                    prop::option::of("[a-z0-9_]{1,12}"),
                    any::<bool>(),
                ),
            )
        })
        .prop_map(
            |(
                messages,
                tools,
                tool_choice,
                parallel,
                system,
                (max, temperature, top_p),
                (stop, stream, user, json_out),
            )| {
                // Anthropic carries the parallel switch inside tool_choice (not for `none`).
                let parallel = match tool_choice {
                    Some(ToolChoice::None) | None => None,
                    _ => parallel,
                };
                ChatRequest {
            system,
            messages,
            tools,
            tool_choice,
            parallel_tool_calls: parallel,
            max_tokens: Some(max),
            temperature,
            top_p,
            stop,
            stream,
            include_usage: stream,
            user,
            response_format: json_out.then(|| ResponseFormat::JsonSchema {
                name: "output".into(),
                schema: json!({"type": "object", "properties": {}, "additionalProperties": false}),
                strict: Some(true),
            }),
            ..ChatRequest::default()
        }
            },
        )
}

/// Tool results know their call's name only on the way to Gemini.
fn without_names(mut ir: ChatRequest) -> ChatRequest {
    for part in ir.messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
        if let Part::ToolResult { name, .. } = part {
            *name = None;
        }
    }
    ir
}

/// Text parts kept as parts, so the round trip is exact.
fn parts_kept() -> RequestOptions<'static> {
    RequestOptions {
        join_text_parts: false,
        ..RequestOptions::new("m")
    }
}

fn hop(ir: ChatRequest, from: WireFormat, to: WireFormat) -> ChatRequest {
    let written = write_request(ir, from, &parts_kept());
    read_request(from, to, written.clone()).unwrap_or_else(|e| panic!("{e}\n{written:#}"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// OpenAI -> Anthropic -> OpenAI and Anthropic -> OpenAI -> Anthropic keep the request.
    #[test]
    fn round_trip_keeps_the_request(ir in request()) {
        let ir = without_names(ir);
        for (a, b) in [(WireFormat::OpenAi, WireFormat::Anthropic), (WireFormat::Anthropic, WireFormat::OpenAi)] {
            let in_a = hop(ir.clone(), a, b);
            prop_assert_eq!(&in_a, &ir, "reading {:?} as written", a);
            let in_b = hop(in_a, b, a);
            prop_assert_eq!(&in_b, &ir, "{:?} -> {:?}", a, b);
            let back = hop(in_b, a, b);
            prop_assert_eq!(&back, &ir, "{:?} -> {:?} -> {:?}", a, b, a);
        }
    }

    /// Read from either client format for Gemini, the turns come out the same, each tool
    /// result named after its call; the Gemini body holds every text, image, call and result
    /// in order.
    #[test]
    fn gemini_keeps_every_part(ir in request()) {
        let mut ir = ir;
        ir.parallel_tool_calls = None;
        // Gemini takes image URLs only from its Files API.
        for p in ir.messages.iter_mut().flat_map(|m| m.parts.iter_mut()) {
            if let Part::Image(Image::Url(u)) = p {
                *u = u.replace("https://example.com/", "https://generativelanguage.googleapis.com/v1beta/files/");
            }
        }
        for f in [WireFormat::OpenAi, WireFormat::Anthropic] {
            let written = write_request(ir.clone(), f, &parts_kept());
            let read = read_request(f, WireFormat::Gemini, written).unwrap_or_else(|e| panic!("{e}"));
            prop_assert_eq!(&read.messages, &ir.messages, "from {:?}", f);
        }
        let gemini = write_request(ir.clone(), WireFormat::Gemini, &RequestOptions::new("m"));
        let contents = gemini["contents"].as_array().unwrap();
        prop_assert_eq!(contents.len(), ir.messages.len());
        for (m, c) in ir.messages.iter().zip(contents) {
            let role = if m.role == Role::User { "user" } else { "model" };
            prop_assert_eq!(&c["role"], role);
            let parts = c["parts"].as_array().unwrap();
            prop_assert_eq!(parts.len(), m.parts.len());
            for (p, gp) in m.parts.iter().zip(parts) {
                match p {
                    Part::Text(t) => prop_assert_eq!(&gp["text"], t.as_str()),
                    Part::Image(Image::Base64 { media_type, data }) => {
                        prop_assert_eq!(&gp["inlineData"], &json!({"mimeType": media_type, "data": data}));
                    }
                    Part::Image(Image::Url(u)) => prop_assert_eq!(&gp["fileData"]["fileUri"], u.as_str()),
                    Part::ToolCall { name, args, .. } => {
                        prop_assert_eq!(&gp["functionCall"], &json!({"name": name, "args": args}));
                    }
                    Part::ToolResult { name, content, .. } => {
                        prop_assert_eq!(&gp["functionResponse"]["name"], name.as_deref().unwrap());
                        let Part::Text(t) = &content[0] else { unreachable!() };
                        prop_assert_eq!(&gp["functionResponse"]["response"]["output"], t.as_str());
                    }
                    Part::Thinking(_) | Part::CacheControl(_) => prop_assert!(false, "not generated"),
                }
            }
        }
    }
}
