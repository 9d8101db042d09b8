//! Property: an upstream stream cut into pieces at any points (and with pings anywhere) gives
//! the client the same answer as the non-stream translation of the same upstream answer —
//! text, reasoning, tool calls with ids and arguments, stop reason and usage — in a stream
//! that follows the client format's event grammar. Every upstream x client pair.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::super::{translate_answer, AnswerOptions, StreamTranslator, WireFormat};
use super::assemble::Ans;
use super::collect::{self, Got};

const OPTS: AnswerOptions<'static> = AnswerOptions {
    created: 9,
    id_seed: "seed1",
    model: None,
};

fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-zA-Z0-9 .,]{1,40}",
        "\\PC{1,16}",
        Just("line\nbreak \"quoted\" \\ ünï 🚀".to_string())
    ]
}

pub(super) fn answer() -> impl Strategy<Value = Ans> {
    let args = prop::collection::btree_map(
        "[a-z]{1,5}",
        prop_oneof![
            piece().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            Just(json!([1, {"a": null}])),
        ],
        0..4,
    )
    .prop_map(|m| Value::Object(m.into_iter().collect()));
    (
        prop::option::of(piece()),
        prop::option::of(piece()),
        prop::collection::vec(("[a-z_]{1,10}", args), 0..4),
        any::<bool>(),
        (0u64..5000, 0u64..5000, 0u64..5000),
    )
        .prop_map(|(thinking, text, calls, max_tokens, (a, b, out))| Ans {
            thinking,
            text,
            calls,
            max_tokens,
            usage: (a.max(b), a.min(b), out),
        })
}

fn stream(from: WireFormat, to: WireFormat, events: &[String]) -> String {
    let mut translator = StreamTranslator::new(from, to, &OPTS, true);
    let mut out = Vec::new();
    let mut terminal = false;
    for e in events {
        let fed = translator.feed(None, e, &mut out);
        assert!(fed.error.is_none(), "{:?} on {e}", fed.error);
        assert!(!terminal, "an event after the terminal one wrote output");
        terminal = fed.terminal;
    }
    assert!(translator.finish(&mut out).terminal);
    String::from_utf8(out).unwrap()
}

fn non_stream(from: WireFormat, to: WireFormat, body: &str) -> Got {
    let answer = translate_answer(from, to, body.as_bytes(), &OPTS)
        .unwrap_or_else(|e| panic!("{e:?}\n{body}"));
    match to {
        WireFormat::Anthropic => collect::from_anthropic_body(&answer.body),
        _ => collect::from_openai_body(&answer.body),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(192))]

    #[test]
    fn split_streams_give_the_non_stream_answer(
        ans in answer(),
        cuts in prop::collection::vec(0usize..64, 0..6),
        pings in any::<bool>(),
    ) {
        let ups = [
            (WireFormat::Anthropic, ans.anthropic_body(), ans.anthropic_stream(&cuts, pings)),
            (WireFormat::OpenAi, ans.openai_body(), ans.openai_stream(&cuts)),
            (WireFormat::Gemini, ans.gemini_body(), ans.gemini_stream(&cuts)),
        ];
        for (from, body, events) in &ups {
            for to in [WireFormat::OpenAi, WireFormat::Anthropic] {
                if *from == to {
                    continue;
                }
                let sse = stream(*from, to, events);
                let got = match to {
                    WireFormat::Anthropic => collect::from_anthropic_stream(&sse),
                    _ => collect::from_openai_stream(&sse),
                };
                let want = non_stream(*from, to, body);
                prop_assert_eq!(&got, &want, "{:?} -> {:?}\n{}", from, to, sse);
                // Nothing lost on the way: the upstream answer itself.
                prop_assert_eq!(got.text, ans.text.clone().unwrap_or_default());
                prop_assert_eq!(got.reasoning, ans.thinking.clone().unwrap_or_default());
                let calls: Vec<(String, Value)> = got.calls.into_iter().map(|(_, n, a)| (n, a)).collect();
                prop_assert_eq!(calls, ans.calls.clone());
                prop_assert_eq!(got.usage, Some(ans.usage));
            }
        }
    }
}
