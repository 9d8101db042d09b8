//! The fast pass agrees with `serde_json`: it accepts nothing the full parse refuses, finds
//! the same members at the same bytes, and tallies the same estimate as `wire::tokens`.

use std::path::PathBuf;

use proptest::prelude::*;
use serde_json::value::RawValue;

use super::*;
use crate::wire::json;
use crate::wire::tokens::estimate_input_tokens;

/// `messages` is counted, not read as text (a `Count` in `wire::request`).
const WANTED: [Want; 4] = [
    Want {
        name: "model",
        text: true,
    },
    Want {
        name: "messages",
        text: false,
    },
    Want {
        name: "stream",
        text: true,
    },
    Want {
        name: "metadata",
        text: true,
    },
];

/// The full parse of the same members, as `wire::request` reads them (a `null` kept).
#[derive(serde::Deserialize)]
struct Oracle<'a> {
    #[serde(borrow, default, deserialize_with = "json::raw_or_null")]
    model: Option<&'a RawValue>,
    #[serde(default)]
    messages: crate::wire::lenient::Count,
    #[serde(borrow, default, deserialize_with = "json::raw_or_null")]
    stream: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "json::raw_or_null")]
    metadata: Option<&'a RawValue>,
}

/// The spans of `model`, `stream` and `metadata`.
type Spans = [Option<(usize, usize)>; 3];

/// The full parse's view: whether it accepts the body as an object, and each wanted
/// member's span (`None` when it refuses).
fn by_serde(body: &[u8]) -> Option<(Spans, usize)> {
    let o: Oracle = serde_json::from_slice(body).ok()?;
    let spans = [o.model, o.stream, o.metadata].map(|r| r.map(|r| json::span_of(body, r)));
    Some((spans, o.messages.0))
}

/// Checks one body: an acceptance is one the full parse makes too, with the same spans,
/// element counts and estimate.
fn agree(body: &[u8]) -> Option<Found<'_, 4>> {
    let found = top_members(body, &WANTED)?;
    let Some((spans, turns)) = by_serde(body) else {
        panic!(
            "accepted what serde_json refuses: {:?}",
            String::from_utf8_lossy(body)
        );
    };
    let m = &found.members;
    for (member, span) in [m[0], m[2], m[3]].iter().zip(spans) {
        assert_eq!(member.map(|m| m.span), span);
    }
    assert_eq!(m[1].map_or(0, |m| m.elements), turns);
    assert_eq!(found.tally.total(body.len()), estimate_input_tokens(body));
    Some(found)
}

/// The body of every recorded client request (`tests/fixtures/clients/`), compact and
/// pretty-printed.
pub(crate) fn client_bodies() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/clients");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("fixtures") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&path).expect("read")).expect("json");
            if v["body"].is_object() {
                out.push(serde_json::to_vec(&v["body"]).expect("compact"));
                out.push(serde_json::to_vec_pretty(&v["body"]).expect("pretty"));
            }
        }
    }
    assert!(out.len() >= 20, "the recorded client requests are read");
    out
}

/// Every recorded client request takes the fast pass, compact and pretty-printed.
#[test]
fn every_recorded_client_body_takes_the_fast_pass() {
    for body in client_bodies() {
        assert!(
            agree(&body).is_some(),
            "fell back: {}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
    }
}

#[test]
fn what_the_full_parse_refuses_is_left_to_it() {
    let refused: &[&[u8]] = &[
        b"{",
        b"{}x",
        b"{\"a\":1,}",
        b"{\"a\" 1}",
        b"{\"a\":[1,]}",
        b"{\"a\":[1 2]}",
        b"{\"a\":01}",
        b"{\"a\":1.}",
        b"{\"a\":1e}",
        b"{\"a\":-}",
        b"{\"a\":+1}",
        b"{\"a\":tru}",
        b"{\"a\":nul}",
        b"{\"a\":\"x\ty\"}",
        b"{\"a\":\"\\x\"}",
        b"{\"a\":\"\\u12g4\"}",
        b"{\"a\":\"open}",
        b"{\"a\":{\"b\"}}",
        b"{\"a\":{1:2}}",
        b"{\"model\":\"m\",\"model\":\"n\"}",
        b"{\"messages\":[}",
    ];
    for body in refused {
        assert!(
            top_members(body, &WANTED).is_none(),
            "{:?}",
            String::from_utf8_lossy(body)
        );
    }
    // Not errors, but left to the full parse: an escaped key, deep nesting.
    assert!(top_members(br#"{"mod\u0065l":"m"}"#, &WANTED).is_none());
    let deep = format!(
        "{{\"a\":{}{}}}",
        "[".repeat(MAX_DEPTH),
        "]".repeat(MAX_DEPTH)
    );
    assert!(top_members(deep.as_bytes(), &WANTED).is_none());
    let ok = format!(
        "{{\"a\":{}{}}}",
        "[".repeat(MAX_DEPTH - 1),
        "]".repeat(MAX_DEPTH - 1)
    );
    assert!(agree(ok.as_bytes()).is_some());
}

#[test]
fn members_values_and_counts() {
    let body = br#" { "messages" : [ {"role":"user","content":"a\"b\\"} , 2, [] ] ,
        "other":{"model":"nested"}, "model":"m\u00e9", "stream":true, "metadata":null,
        "n":-1.5e+3, "u":"\ud83d\ude00 x \/"} "#;
    let found = agree(body).expect("accepted");
    let text = |i: usize| found.members[i].map(|m| &body[m.span.0..m.span.1]);
    assert_eq!(text(0), Some(&br#""m\u00e9""#[..]));
    assert_eq!(found.members[1].map(|m| m.elements), Some(3));
    assert_eq!(text(2), Some(&b"true"[..]));
    assert_eq!(text(3), Some(&b"null"[..]));
    assert!(agree(b"{}").is_some());
    // A counted member that is not an array is read by the full parse: left to it.
    assert!(top_members(b"{\"messages\":\"text\"}", &WANTED).is_none());
    assert!(top_members(b"{\"messages\":1e999}", &WANTED).is_none());
}

/// Small JSON-like bodies, valid or nearly so: the alphabet of the grammar's tokens.
fn jsonish() -> impl Strategy<Value = Vec<u8>> {
    let token = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        " ",
        "\"",
        "\\",
        "\\u00e9",
        "\\n",
        "\\x",
        "\"model\"",
        "\"messages\"",
        "\"a\"",
        "1",
        "0",
        "-",
        ".",
        "e",
        "+",
        "12.5e-3",
        "true",
        "null",
        "fals",
        "é",
        "\t",
        "\u{1}",
        "\"s\"",
    ]);
    prop::collection::vec(token, 0..40).prop_map(|t| {
        let mut b = b"{".to_vec();
        b.extend(t.concat().into_bytes());
        b
    })
}

/// Valid JSON objects whose members are the wanted names among others.
fn objects() -> impl Strategy<Value = Vec<u8>> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        ".{0,40}".prop_map(serde_json::Value::from),
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
    ];
    let value = leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
            prop::collection::hash_map("[a-z]{1,6}", inner, 0..6)
                .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    });
    let key = prop_oneof![
        prop::sample::select(WANTED.map(|w| w.name).to_vec()).prop_map(String::from),
        "[a-z\u{e9}]{1,8}",
    ];
    (prop::collection::hash_map(key, value, 0..8), any::<bool>()).prop_map(|(m, pretty)| {
        let v = serde_json::Value::Object(m.into_iter().collect());
        if pretty {
            serde_json::to_vec_pretty(&v).expect("json")
        } else {
            serde_json::to_vec(&v).expect("json")
        }
    })
}

/// A valid object with a few bytes inserted, replaced or removed: almost JSON.
fn mutated() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop::sample::select(b"{}[],:\" \\u0e.-+1\t\x01\xc3a".to_vec());
    let edit = (any::<prop::sample::Index>(), 0..3u8, byte);
    (objects(), prop::collection::vec(edit, 1..3)).prop_map(|(mut b, edits)| {
        for (at, op, c) in edits {
            if b.is_empty() {
                break;
            }
            let i = at.index(b.len());
            match op {
                0 => b.insert(i, c),
                1 => b[i] = c,
                _ => {
                    b.remove(i);
                }
            }
        }
        b
    })
}

proptest! {
    #[test]
    fn never_accepts_what_serde_refuses(body in jsonish()) {
        agree(&body);
    }

    #[test]
    fn never_accepts_a_damaged_object_serde_refuses(body in mutated()) {
        agree(&body);
    }

    #[test]
    fn takes_every_valid_object(body in objects()) {
        let v: serde_json::Value = serde_json::from_slice(&body).expect("json");
        // A counted member that is not an array is left to the full parse.
        let counted = v.get("messages").is_none_or(serde_json::Value::is_array);
        prop_assert_eq!(agree(&body).is_some(), counted);
    }
}
