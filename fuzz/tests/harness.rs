//! Stable-Rust fallback for the fuzz targets: each harness on random and structured inputs,
//! bounded by FUZZ_CASES (default 5000).
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(5000)
}

fn sse_like() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop::sample::select(vec![
            "data: ", "event: ", "id: 1", ": keepalive", "\n", "\r\n", "\r", "[DONE]",
            r#"{"choices":[{"finish_reason":"stop"}]}"#, r#"{"type":"message_stop"}"#,
            r#"{"error":{"message":"x","code":429}}"#, r#"{"usage":{"prompt_tokens":3}}"#,
            r#"{"type":"response.completed"}"#, "é", "\u{0}",
        ]),
        0..40,
    )
    .prop_map(|v| v.concat().into_bytes())
}

fn json_like() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
        ".{0,12}".prop_map(serde_json::Value::from),
    ];
    let keys = prop::sample::select(vec![
        "model", "stream", "usage", "error", "prompt_tokens", "completion_tokens", "code",
        "message", "type", "status", "input_tokens", "cached_tokens", "prompt_tokens_details", "x",
    ]);
    leaf.prop_recursive(4, 32, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(keys.clone().prop_map(String::from), inner, 0..5)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
    .prop_map(|v| serde_json::to_vec_pretty(&v).unwrap())
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![prop::collection::vec(any::<u8>(), 0..256), sse_like(), json_like()]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test] fn sse_framer(d in bytes()) { switchyard_fuzz::sse_framer(&d) }
    #[test] fn status_set(s in "[0-9xX, \\-]{0,24}") { switchyard_fuzz::status_set(s.as_bytes()) }
    #[test] fn usage(d in bytes()) { switchyard_fuzz::usage(&d) }
    #[test] fn hidden_error(d in bytes()) { switchyard_fuzz::hidden_error(&d) }
    #[test] fn request_peek(d in json_like()) { switchyard_fuzz::request_peek(&d) }
    #[test] fn request_peek_raw(d in bytes()) { switchyard_fuzz::request_peek(&d) }
    #[test] fn config_load(s in "(listen: |channels:\n  a:\n    kind: |base_url: |keys: |models: |[a-z0-9:/\\[\\]{}\"' ,.\n-]){0,40}") {
        switchyard_fuzz::config_load(s.as_bytes())
    }
}
