//! The first look agrees with the tree reading (R9.4, R9.5, R9.8): for every event shape, a
//! `EventPeek` says what walking the parsed `serde_json::Value` says.
use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::wire::usage_stream::content_chars;

/// What the tree reading says of `data` (the checks as they read a `Value`).
fn by_tree(data: &str) -> EventPeek {
    let Ok(v) = serde_json::from_str::<Value>(data) else {
        return EventPeek::default();
    };
    let choices = v
        .get("choices")
        .and_then(Value::as_array)
        .map(|cs| Choices {
            len: cs.len(),
            finish: cs.iter().any(|c| c["finish_reason"].is_string()),
            blank: cs.iter().all(|c| {
                let delta = &c["delta"];
                let blank = |k: &str| match &delta[k] {
                    Value::Null => true,
                    Value::String(s) => s.is_empty(),
                    Value::Array(a) => a.is_empty(),
                    _ => false,
                };
                c["finish_reason"].is_null()
                    && [
                        "content",
                        "reasoning_content",
                        "reasoning",
                        "tool_calls",
                        "refusal",
                    ]
                    .iter()
                    .all(|k| blank(k))
                    && delta.get("function_call").is_none()
                    && delta.get("audio").is_none()
            }),
            chars: 0,
        });
    let tree_chars = content_chars(&v);
    let choice_chars = v["choices"].as_array().map_or(0, |_| {
        let only = json!({"choices": v["choices"]});
        content_chars(&only)
    });
    EventPeek {
        json: true,
        choices: choices.map(|c| Choices {
            chars: choice_chars,
            ..c
        }),
        usage: v["usage"].is_object(),
        nested_usage: v["message"]["usage"].is_object() || v["response"]["usage"].is_object(),
        error: v.get("error").is_some(),
        content_chars: tree_chars,
    }
}

#[test]
fn events_of_every_dialect_read_as_the_tree_reads_them() {
    let cases = [
        r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"héllo"},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"ls","arguments":"{\"a\":1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":null,"tool_calls":[]}}]}"#,
        r#"{"choices":[{"delta":{"content":null,"tool_calls":null,"refusal":null}}]}"#,
        r#"{"choices":[{"delta":{"content":0,"reasoning":false}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[null,{"function":null},{"function":{"name":null}}]}}]}"#,
        r#"{"choices":[{"delta":{"reasoning_content":"think \u00e9"}}]}"#,
        r#"{"choices":[{"delta":{"function_call":null}}]}"#,
        r#"{"choices":[{"delta":{"audio":{}}}]}"#,
        r#"{"choices":[{"text":"legacy","finish_reason":null}]}"#,
        r#"{"choices":[{"delta":{"content":"x"}, "finish_reason": 3}]}"#,
        r#"{"choices":[1, "x", null, []]}"#,
        r#"{"choices":{"0":{}}}"#,
        r#"{"choices":[],"error":null}"#,
        r#"{"error":{"code":429,"message":"slow down"}}"#,
        r#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":9}}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"x\""}}"#,
        r#"{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":7}}"#,
        r#"{"type":"response.output_text.delta","delta":"wörld","sequence_number":4}"#,
        r#"{"type":"response.completed","response":{"usage":{"input_tokens":1,"output_tokens":2}}}"#,
        r#"{"delta":"no type","type":"other"}"#,
        r#"{"type":["x"],"delta":"y"}"#,
        r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
        "[1,2,3]",
        "42",
        "\"text\"",
        "null",
        "[DONE]",
        "{\"choices\":[",
        "{} trailing",
        "",
    ];
    for data in cases {
        assert_eq!(EventPeek::read(data), by_tree(data), "{data}");
    }
}

/// JSON values shaped like stream events: the keys the peek looks at, with values of every
/// type, nested as the dialects nest them.
fn event_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        "[a-zé\"\\\\ ]{0,6}".prop_map(Value::String),
        Just(json!("response.output_text.delta")),
        Just(json!("stop")),
    ];
    let keys = prop_oneof![
        Just("choices"),
        Just("usage"),
        Just("error"),
        Just("message"),
        Just("response"),
        Just("delta"),
        Just("type"),
        Just("content"),
        Just("reasoning_content"),
        Just("reasoning"),
        Just("refusal"),
        Just("tool_calls"),
        Just("function_call"),
        Just("audio"),
        Just("function"),
        Just("name"),
        Just("arguments"),
        Just("finish_reason"),
        Just("text"),
        Just("partial_json"),
        Just("thinking"),
        Just("index"),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys.clone(), inner), 0..6).prop_map(|pairs| {
                Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}

/// Chat chunks as the providers shape them, with every field's value drawn from every type:
/// the shapes the relay meets most, generated densely.
fn chat_chunk() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        Just(json!("")),
        Just(json!("tok é")),
        Just(json!([])),
        Just(json!(["x"])),
        Just(json!({})),
        Just(json!(0)),
        Just(json!(false)),
    ];
    let tool_call = leaf
        .clone()
        .prop_map(|v| json!({"index": 0, "function": {"name": v.clone(), "arguments": v}}));
    let delta_key = prop_oneof![
        Just("content"),
        Just("reasoning_content"),
        Just("reasoning"),
        Just("refusal"),
        Just("function_call"),
        Just("audio"),
        Just("role"),
    ];
    let delta = (
        prop::collection::vec((delta_key, leaf.clone()), 0..4),
        prop::option::of(prop::collection::vec(tool_call, 0..3)),
    )
        .prop_map(|(pairs, calls)| {
            let mut map: serde_json::Map<String, Value> =
                pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            if let Some(calls) = calls {
                map.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(map)
        });
    let choice =
        (delta, leaf.clone(), prop::option::of(leaf.clone())).prop_map(|(delta, finish, text)| {
            let mut choice = json!({"index": 0, "delta": delta, "finish_reason": finish});
            if let Some(text) = text {
                choice["text"] = text;
            }
            choice
        });
    (
        prop::collection::vec(choice, 0..3),
        prop::option::of(leaf.clone()),
        prop::option::of(leaf),
    )
        .prop_map(|(choices, usage, error)| {
            let mut chunk =
                json!({"id": "c", "object": "chat.completion.chunk", "choices": choices});
            if let Some(usage) = usage {
                chunk["usage"] = usage;
            }
            if let Some(error) = error {
                chunk["error"] = error;
            }
            chunk
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn any_event_reads_as_the_tree_reads_it(value in event_value()) {
        let data = value.to_string();
        prop_assert_eq!(EventPeek::read(&data), by_tree(&data), "{}", data);
    }

    #[test]
    fn any_chat_chunk_reads_as_the_tree_reads_it(value in chat_chunk()) {
        let data = value.to_string();
        prop_assert_eq!(EventPeek::read(&data), by_tree(&data), "{}", data);
    }
}

/// Chat chunks as providers send them (OpenAI, Azure's filter results, DeepSeek's reasoning,
/// the usage chunk, escapes in content): the quick byte pass reads each one, and reads it as
/// the serde pass and the tree do.
#[test]
fn common_chat_chunks_take_the_quick_pass_and_read_alike() {
    let cases = [
        r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1717000000,"model":"gpt-4o-mini","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hel"},"logprobs":null,"finish_reason":null}],"obfuscation":"a1b2"}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}"#,
        r#"{"id":"c","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
        r#"{"id":"c","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":20,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0}}}"#,
        r#"{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"é\n\"ok\"\\/"},"finish_reason":null,"index":0}],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}"#,
        r#"{"id":"d","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"think… 🤔"},"logprobs":null,"finish_reason":null}]}"#,
        r#"  {"choices":[{"delta":{"content":"a"},"finish_reason":null},{"delta":{"content":"bc"},"finish_reason":"length"}]} "#,
        r#"{"choices":[{"text":"legacy","index":0,"finish_reason":null}],"id":1.5e-3}"#,
        r#"{"choices":[{"delta":{"content":"x","function_call":null}}],"error":{"message":"late"}}"#,
        r#"{"choices":[{"delta":{"content":"a"}}],"choices":[]}"#,
    ];
    for data in cases {
        let quick = fast::read(data);
        assert!(quick.is_some(), "the quick pass declined {data}");
        assert_eq!(quick, Some(EventPeek::read_serde(data)), "{data}");
        assert_eq!(quick, Some(by_tree(data)), "{data}");
    }
}

/// What the quick pass does not read exactly is left to serde: `\u` escapes (surrogates),
/// the other dialects' events, unusual types in counted fields, broken JSON.
#[test]
fn the_quick_pass_declines_what_it_cannot_read_exactly() {
    let cases = [
        r#"{"choices":[{"delta":{"content":"\u00e9"}}]}"#,
        r#"{"choices":[{"delta":{"content":"\ud800"}}]}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        r#"{"type":"response.completed","response":{"usage":{"input_tokens":1}}}"#,
        r#"{"choices":[{"delta":{"content":0}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#,
        r#"{"choices":[{"delta":{"content":"a"}}],}"#,
        "{\"choices\":[{\"delta\":{\"content\":\"a\tb\"}}]}",
        r#"{"id":01}"#,
        r#"{"id":-}"#,
        r#"{"id":1.}"#,
        r#"{"id":1e}"#,
        r#"{"id":nul}"#,
        r#"{"choices":[{"delta":{"content":"a"}}]} x"#,
        r#"{"choices":[{"delta":{"content":"a"}}]"#,
        "[DONE]",
        "",
    ];
    for data in cases {
        assert_eq!(fast::read(data), None, "{data}");
        assert_eq!(EventPeek::read(data), by_tree(data), "{data}");
    }
}

/// Apply `edits` to `bytes`, each at its index: 0 inserts the byte, 1 removes the byte there,
/// 2 replaces it, anything else leaves the bytes as they are.
fn damage(bytes: &mut Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) {
    for &(at, op, byte) in edits {
        let i = at.index(bytes.len() + 1);
        match op {
            0 => bytes.insert(i, byte),
            1 if i < bytes.len() => {
                bytes.remove(i);
            }
            2 if i < bytes.len() => bytes[i] = byte,
            _ => {}
        }
    }
}

/// Bytes that change what JSON means, for damaging events.
const DAMAGE: &[u8] = b"\"\\{}[],: \t\n\x01u0123456789eE.+-ntfrlasx\xc3\xa9";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]
    /// A chat chunk damaged at up to three places (a byte inserted, removed or replaced):
    /// whenever the quick pass answers, it answers as the serde pass does.
    #[test]
    fn damaged_chunks_read_alike_in_both_passes(
        value in chat_chunk(),
        edits in prop::collection::vec(
            (any::<prop::sample::Index>(), 0u8..3, prop::sample::select(DAMAGE.to_vec())),
            1..4,
        ),
    ) {
        let mut bytes = value.to_string().into_bytes();
        damage(&mut bytes, &edits);
        if let Ok(data) = String::from_utf8(bytes) {
            if let Some(quick) = fast::read(&data) {
                prop_assert_eq!(quick, EventPeek::read_serde(&data), "{}", data);
            }
        }
    }
}

/// Bytes around every boundary the word-wide search tests: below, at and above the space,
/// the quote and the backslash, DEL, and high bytes whose low seven bits look like them.
const NEAR_STOPS: &[u8] =
    b"\x00\x01\x1f\x20\x21\x22\x23\x5b\x5c\x5d\x7f\x80\x9f\xa0\xa2\xdc\xff azAZ09";

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]
    /// The eight-bytes-a-step search for a string's end finds the first quote, backslash or
    /// control character wherever it sits in a word (or finds none), as a byte loop does.
    #[test]
    fn the_word_search_stops_where_a_byte_loop_stops(
        bytes in prop::collection::vec(prop::sample::select(NEAR_STOPS.to_vec()), 0..40),
        plain in prop::collection::vec(b'#'..=b'~', 0..40),
    ) {
        let plain: Vec<u8> = plain.into_iter().filter(|&c| c != b'\\').collect();
        for s in [bytes.clone(), [plain.clone(), bytes.clone()].concat(), plain] {
            let by_loop = s.iter().position(|&c| c == b'"' || c == b'\\' || c < 0x20);
            prop_assert_eq!(fast::stop(&s), by_loop, "{:?}", s);
        }
    }
}

/// Openings as streams repeat them (the members the peek skips, before the first it reads),
/// a few of them so that chunks share one often, with odd spacing and escapes among them.
const OPENINGS: &[&str] = &[
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1717000000,"model":"gpt-4o-mini","#,
    r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1717000000,"model":"gpt-4o","#,
    r#" { "id" : "c\"1" , "n" : [1, {"a": null}] ,"#,
    r#"{"id":"c","#,
    r#"{"#,
    "",
];

/// A stream's chunks: an opening from `OPENINGS` and the members of a generated chat chunk
/// (or its whole text, when the opening is empty), then up to three damaging edits.
fn stream_chunks() -> impl Strategy<Value = Vec<String>> {
    let chunk = (
        0..OPENINGS.len(),
        chat_chunk(),
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                0u8..4,
                prop::sample::select(DAMAGE.to_vec()),
            ),
            0..3,
        ),
    )
        .prop_map(|(o, value, edits)| {
            let whole = value.to_string();
            let opening = OPENINGS[o];
            let members = whole.strip_prefix('{').unwrap_or(&whole);
            let mut bytes = match opening {
                "" => whole.clone(),
                o if members == "}" => format!("{}\"x\":0}}", o),
                o => format!("{o}{members}"),
            }
            .into_bytes();
            damage(&mut bytes, &edits);
            String::from_utf8(bytes).unwrap_or(whole)
        });
    prop::collection::vec(chunk, 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]
    /// A stream read through its remembered opening answers, chunk by chunk, what reading
    /// each chunk whole answers: shared openings, changed ones, damaged chunks (inside the
    /// opening or after it) and chunks that are not JSON alike.
    #[test]
    fn chunks_read_through_the_opening_read_as_whole_chunks(chunks in stream_chunks()) {
        read_alike_through_the_opening(&chunks)?;
    }

    /// A stream read through its remembered opening and shape answers, chunk by chunk,
    /// what reading each chunk whole answers, whatever the chunks' strings and shapes.
    #[test]
    fn chunks_read_through_a_shape_read_as_whole_chunks(chunks in shaped_chunks()) {
        read_alike_through_the_opening(&chunks)?;
    }
}

/// Each chunk of a stream, read through one `Opening`, reads as the chunk read whole.
fn read_alike_through_the_opening(chunks: &[String]) -> Result<(), TestCaseError> {
    let mut opening = Opening::default();
    for data in chunks {
        prop_assert_eq!(opening.read(data), EventPeek::read(data), "{}", data);
    }
    Ok(())
}

/// The opening is learnt from a chunk whose skipped members come first, used by the next
/// chunk that repeats it, kept across a chunk that does not, and replaced by a new one.
#[test]
fn the_opening_is_learnt_and_used() {
    let head = r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","#;
    let chunk = |rest: &str| format!("{head}{rest}");
    let mut opening = Opening::default();
    let first = chunk(r#""choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}"#);
    assert_eq!(opening.read(&first), EventPeek::read(&first));
    assert_eq!(opening.bytes, head.as_bytes());
    let stop = chunk(r#""choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#);
    let peek = opening.read(&stop);
    assert!(peek.choices.is_some_and(|c| c.finish), "{peek:?}");
    // Azure's order (choices first) teaches nothing and keeps what was learnt.
    let azure = r#"{"choices":[],"id":"x","usage":{"prompt_tokens":1}}"#;
    assert!(opening.read(azure).usage);
    assert_eq!(opening.bytes, head.as_bytes());
    // A chunk cut inside the repeated opening's continuation is not JSON.
    assert!(!opening.read(&chunk(r#""choices":[{"#)).json);
    let other = r#"{"id":"c2","choices":[]}"#;
    assert_eq!(opening.read(other), EventPeek::read(other));
    assert_eq!(opening.bytes, br#"{"id":"c2","#);
}

/// The members after an opening that chat streams repeat chunk after chunk around their
/// content string (`{}`), and near misses: a second content or delta, a second `choices`,
/// another choice, finish reasons, usage and error beside it, odd spacing, a `text` choice.
const SHAPES: &[&str] = &[
    r#""choices":[{"index":0,"delta":{"content":"{}"},"finish_reason":null}]}"#,
    r#""choices":[{"index":0,"delta":{"role":"assistant","content":"{}"},"finish_reason":null}]}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}","reasoning_content":"ab"},"finish_reason":null}]}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"},"finish_reason":null},{"index":1,"delta":{"content":""}}]}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"},"delta":{}}]}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}","content":"z"}}]}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"}}],"choices":[]}"#,
    r#""choices":[{"delta":{"content":"{}","tool_calls":null,"audio":{}}}],"error":null}"#,
    r#" "choices" : [ { "delta" : { "content" : "{}" } , "finish_reason" : null } ] } "#,
    r#""choices":[{"index":0,"text":"{}","finish_reason":null}]}"#,
    // A last member the peek skips, whose string changes chunk by chunk (`{o}`): OpenAI's
    // `obfuscation` padding, and keys whose string the peek reads or refuses.
    r#""choices":[{"index":0,"delta":{"content":"{}"},"logprobs":null,"finish_reason":null}],"obfuscation":"{o}"}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"},"finish_reason":null}],"usage":null,"obfuscation":"{o}"} "#,
    r#""choices":[{"index":0,"delta":{"content":"{}"}}],"error":"{o}"}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"}}],"usage":"{o}"}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"}}],"type":"{o}"}"#,
    r#""choices":[{"index":0,"delta":{"content":"{}"}}],"obfuscation":"{o}","z":1}"#,
    r#""obfuscation":"{o}","choices":[{"index":0,"delta":{"content":"{}"}}]}"#,
];

/// Content strings as they sit between their quotes: empty, ASCII, multi-byte, the escapes
/// the quick pass reads, and what it declines or what breaks the chunk (`\u` escapes, a raw
/// control character, a lone backslash, a quote).
const TEXTS: &[&str] = &[
    "",
    "Hi",
    "caf\u{e9} \u{4e16}",
    "a\\\"b\\n",
    "\\u00e9",
    "tab\u{1}",
    "end\\",
    "q\"",
    " ",
];

/// A stream's chunks: one opening and one shape, each chunk sometimes changing either, and
/// the texts drawn per chunk.
fn shaped_chunks() -> impl Strategy<Value = Vec<String>> {
    let change = prop::option::weighted(0.2, (0..OPENINGS.len() - 1, 0..SHAPES.len()));
    (
        0..OPENINGS.len() - 1,
        0..SHAPES.len(),
        prop::collection::vec((change, 0..TEXTS.len(), 0..TEXTS.len()), 1..16),
    )
        .prop_map(|(mut o, mut s, chunks)| {
            chunks
                .into_iter()
                .map(|(change, t, pad)| {
                    if let Some((o2, s2)) = change {
                        (o, s) = (o2, s2);
                    }
                    let members = SHAPES[s]
                        .replacen("{}", TEXTS[t], 1)
                        .replace("{o}", TEXTS[pad]);
                    format!("{}{members}", OPENINGS[o])
                })
                .collect()
        })
}

/// A content chunk read through the opening teaches its shape, the next content chunks are
/// read by it (their string only), and a chunk that changes anything else is read whole.
#[test]
fn the_shape_is_learnt_and_used() {
    let head = r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","#;
    let chunk = |text: &str| {
        format!(
            r#"{head}"choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
        )
    };
    let mut opening = Opening::default();
    // The first chunk teaches the opening only; the next the shape.
    assert_eq!(opening.read(&chunk("Hi")), EventPeek::read(&chunk("Hi")));
    assert!(opening.shape.is_none());
    assert_eq!(opening.read(&chunk("Yo")), EventPeek::read(&chunk("Yo")));
    let shape = opening.shape.as_ref().expect("a shape is learnt");
    let (prefix, suffix) = shape.around.split_at(shape.split);
    assert!(prefix.ends_with(br#""content":"#), "{shape:?}");
    assert_eq!(suffix, br#"},"finish_reason":null}]}"#);
    for text in ["caf\u{e9}", "", "a\\nb", "x"] {
        let data = chunk(text);
        let start = opening.bytes.len();
        assert!(shape_read(&opening, &data, start).is_some(), "{data}");
        assert_eq!(opening.read(&data), EventPeek::read(&data), "{data}");
    }
    let peek = opening.read(&chunk("caf\u{e9}"));
    assert_eq!(peek.content_chars, 4);
    assert!(peek.choices.is_some_and(|c| !c.blank && c.chars == 4));
    // A `\u` escape is declined by the shape, as by the quick pass: serde reads it.
    let data = chunk("\\u00e9");
    assert!(shape_read(&opening, &data, opening.bytes.len()).is_none());
    assert_eq!(opening.read(&data).content_chars, 1);
    // A chunk whose string does not count (a second `delta` replaces the first) teaches no
    // shape and keeps the one learnt.
    let odd =
        format!(r#"{head}"choices":[{{"index":0,"delta":{{"content":"x"}},"delta":{{}}}}]}}"#);
    assert_eq!(opening.read(&odd), EventPeek::read(&odd));
    assert!(shape_read(&opening, &chunk("again"), opening.bytes.len()).is_some());
    // The finishing chunk changes the shape around the string: read whole.
    let stop = format!(r#"{head}"choices":[{{"index":0,"delta":{{}},"finish_reason":"stop"}}]}}"#);
    assert!(shape_read(&opening, &stop, opening.bytes.len()).is_none());
    assert!(opening.read(&stop).choices.is_some_and(|c| c.finish));
}

/// OpenAI's chunks end in an `obfuscation` member whose random string changes chunk by
/// chunk: the shape takes it as its tail string, and the chunks are read by their strings.
#[test]
fn an_obfuscated_stream_is_read_through_its_shape() {
    let head = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","service_tier":"default","system_fingerprint":"fp_1","#;
    let chunk = |text: &str, pad: &str| {
        format!(
            r#"{head}"choices":[{{"index":0,"delta":{{"content":"{text}"}},"logprobs":null,"finish_reason":null}}],"obfuscation":"{pad}"}}"#
        )
    };
    let mut opening = Opening::default();
    let role = format!(
        r#"{head}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}],"obfuscation":"Q2"}}"#
    );
    assert_eq!(opening.read(&role), EventPeek::read(&role));
    assert_eq!(
        opening.read(&chunk("Hel", "x9Ke")),
        EventPeek::read(&chunk("Hel", "x9Ke"))
    );
    assert!(opening.shape.as_ref().is_some_and(|s| s.tail.is_some()));
    for (text, pad) in [("lo", "a"), ("", "Zk83mQ"), (r"caf\u00e9", "b"), ("!", "")] {
        let data = chunk(text, pad);
        let start = opening.bytes.len();
        assert_eq!(
            shape_read(&opening, &data, start).is_some(),
            !text.contains("\\u"),
            "{data}"
        );
        assert_eq!(opening.read(&data), EventPeek::read(&data), "{data}");
    }
    assert_eq!(opening.learnt, 1, "one shape for the whole stream");
}

fn shape_read(opening: &Opening, data: &str, start: usize) -> Option<EventPeek> {
    opening.shape.as_ref()?.read(data, start)
}
