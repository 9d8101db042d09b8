//! `peek`'s two parses agree: the fast pass (`wire::scan`) and the full one (`serde_json`)
//! give the same `Peek` wherever the fast one takes the body.

use super::*;

/// Both parses give the same peek (the fast one adds the estimate), on every recorded
/// client request and on bodies that exercise each member's reading.
#[test]
fn the_fast_pass_and_the_full_parse_agree() {
    let mut bodies = crate::wire::scan::tests::client_bodies();
    for b in [
        r#"{"model":null,"stream":null,"max_tokens":null,"metadata":null,"user":null}"#,
        r#"{"model":"a\u0062","stream":false,"max_tokens":"x","max_output_tokens":7.5}"#,
        r#"{"max_output_tokens":[1],"max_completion_tokens":3,"input":[{"a":1}],"messages":[]}"#,
        r#" {"conversation_id":{"x":[1,{"y":"z"}]}, "session_id":"s", "prompt_cache_key":1 } "#,
        r#"{"model":"m","max_tokens":9,"messages":[{"content":"\u4e2d\n"},"中文"]}"#,
    ] {
        bodies.push(b.as_bytes().to_vec());
    }
    assert!(bodies.len() > 20);
    for body in &bodies {
        let fast = read_fields(body, Fields::from_scan(body).expect("fast pass"));
        let full = read_fields(body, Fields::from_serde(body).unwrap());
        let (mut fast, full) = (fast.unwrap(), full.unwrap());
        assert_eq!(
            fast.input_tokens,
            Some(crate::wire::tokens::estimate_input_tokens(body))
        );
        fast.input_tokens = None;
        assert_eq!(format!("{fast:?}"), format!("{full:?}"));
    }
    // What the full parse refuses in a member it reads is left to it.
    assert!(Fields::from_scan(br#"{"max_output_tokens":1e999}"#).is_none());
    assert!(peek(br#"{"max_output_tokens":1e999}"#).is_err());
}
