//! Property (R9.1): for any re-chunking of an upstream SSE byte stream — writes
//! split anywhere, inside a UTF-8 character or between `\r` and `\n`, with or without pauses
//! — the client receives exactly what it receives when the upstream writes one event per
//! write. OpenAI chat, Anthropic messages and Responses formats, over real sockets.
use crate::support;

use std::sync::OnceLock;

use proptest::prelude::*;
use support::*;
use tokio::runtime::Runtime;

/// A model name with multi-byte characters: every chunk echoes it, so byte splits fall
/// inside UTF-8 characters.
const MODEL: &str = "m-é✓";

struct World {
    rt: Runtime,
    gw: Gw,
    _mock: std::collections::HashMap<String, MockUpstream>,
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let (gw, mock) = rt.block_on(async {
            let mocks = mocks(&["up"]).await;
            let yaml = fill(
                &format!(
                    "channels:\n  oa:\n    kind: openai\n    base_url: {{up}}\n    keys: [k]\n    models: [\"{MODEL}\"]\n    translate: false\n  an:\n    kind: anthropic\n    base_url: {{up}}\n    keys: [k]\n    models: [\"{MODEL}\"]\n    paths: []\n    translate: false\n{CLIENTS}"
                ),
                &mocks,
            );
            (start_gw(&yaml).await, mocks)
        });
        World { rt, gw, _mock: mock }
    })
}

fn body(path: &str) -> serde_json::Value {
    match path {
        "/v1/messages" => {
            serde_json::json!({"model": MODEL, "max_tokens": 10, "stream": true, "messages": [{"role": "user", "content": "hi"}]})
        }
        "/v1/responses" => serde_json::json!({"model": MODEL, "stream": true, "input": "hi"}),
        _ => {
            serde_json::json!({"model": MODEL, "stream": true, "messages": [{"role": "user", "content": "hi"}]})
        }
    }
}

fn fetch(path: &str, fault: &str) -> String {
    let world = world();
    world.rt.block_on(async {
        let response = world
            .gw
            .http
            .post(format!("{}{}", world.gw.base, path))
            .bearer_auth(ALICE)
            .header("x-mock-fault", fault)
            .json(&body(path))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    })
}

fn path() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("/v1/chat/completions"),
        Just("/v1/messages"),
        Just("/v1/responses"),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn any_rechunking_relays_the_same_events(
        path in path(),
        sizes in prop::collection::vec(1usize..48, 1..6),
        crlf in any::<bool>(),
        gap in any::<bool>(),
        cl in any::<bool>(),
    ) {
        let base = if crlf { "ok,crlf" } else { "ok" };
        let want = fetch(path, base);
        let split: Vec<String> = sizes.iter().map(ToString::to_string).collect();
        let mut fault = format!("{base},split={}", split.join("/"));
        if gap {
            fault.push_str(",gap=1ms");
        }
        if cl {
            fault.push_str(",cl");
        }
        let got = fetch(path, &fault);
        prop_assert!(!got.contains("stream_incomplete"), "{fault}: {got}");
        prop_assert_eq!(got, want, "{}", fault);
    }
}
