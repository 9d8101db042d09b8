//! Table tests for SSE framing and terminal-event detection (R9.4).
use super::*;

fn events(chunks: &[&[u8]], strip: bool) -> Vec<Event> {
    let mut f = Framer::new(strip);
    let mut out = vec![];
    for c in chunks {
        f.push(c);
        while let Some(e) = f.next_event() {
            out.push(e);
        }
    }
    out
}

#[test]
fn splits_on_blank_lines_across_chunk_boundaries() {
    let evs = events(
        &[
            b"data: a\n",
            b"\nda",
            b"ta: b\r\n\r",
            b"\n: keep",
            b"alive\n\n",
        ],
        false,
    );
    assert_eq!(evs.len(), 3);
    assert_eq!(evs[0].data.as_deref(), Some("a"));
    assert_eq!(evs[1].data.as_deref(), Some("b"));
    assert!(evs[2].comment_only);
    assert_eq!(&evs[1].raw[..], b"data: b\r\n\r\n");
}

#[test]
fn strips_id_lines_only_when_asked() {
    let evs = events(&[b"id: 7\ndata: x\n\n"], true);
    assert_eq!(&evs[0].raw[..], b"data: x\n\n");
    let evs = events(&[b"id: 7\ndata: x\n\n"], false);
    assert_eq!(&evs[0].raw[..], b"id: 7\ndata: x\n\n");
}

#[test]
fn multi_line_data_and_event_names() {
    let evs = events(
        &[b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"],
        false,
    );
    assert_eq!(evs[0].name.as_deref(), Some("message_stop"));
    let evs = events(&[b"data: l1\ndata: l2\n\n"], false);
    assert_eq!(evs[0].data.as_deref(), Some("l1\nl2"));
}

#[test]
fn terminal_event_table() {
    use StreamFormat::*;
    let ev = |name: Option<&str>, data: &str| Event {
        raw: Bytes::new(),
        name: name.map(str::to_string),
        data: Some(data.to_string()),
        comment_only: false,
    };
    let cases: &[(StreamFormat, Event, bool)] = &[
        (Chat, ev(None, "[DONE]"), true),
        (
            Chat,
            ev(
                None,
                r#"{"choices":[{"delta":{"content":"x"},"finish_reason":null}]}"#,
            ),
            false,
        ),
        (
            Chat,
            ev(None, r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#),
            true,
        ),
        (
            Chat,
            ev(
                None,
                r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            ),
            true,
        ),
        (
            Chat,
            ev(None, r#"{"choices":[],"usage":{"prompt_tokens":1}}"#),
            false,
        ),
        (Responses, ev(Some("response.completed"), "{}"), true),
        (Responses, ev(Some("response.failed"), "{}"), true),
        (Responses, ev(Some("response.incomplete"), "{}"), true),
        (
            Responses,
            ev(Some("response.output_text.delta"), "{}"),
            false,
        ),
        (
            Responses,
            ev(None, r#"{"type":"response.completed"}"#),
            true,
        ),
        (
            Messages,
            ev(Some("message_stop"), r#"{"type":"message_stop"}"#),
            true,
        ),
        (
            Messages,
            ev(Some("message_delta"), r#"{"type":"message_delta"}"#),
            false,
        ),
        (Messages, ev(None, r#"{"type":"message_stop"}"#), true),
        (Other, ev(None, "[DONE]"), false),
    ];
    for (i, (f, e, want)) in cases.iter().enumerate() {
        assert_eq!(is_terminal(*f, e), *want, "case {i}: {f:?} {e:?}");
    }
}

#[test]
fn incomplete_events_are_in_each_format() {
    let chat = String::from_utf8(incomplete_event(StreamFormat::Chat, "cut").to_vec()).unwrap();
    assert!(chat.starts_with("data: {\"error\""), "{chat}");
    assert!(chat.contains("stream_incomplete") && !chat.contains("[DONE]"));
    let resp =
        String::from_utf8(incomplete_event(StreamFormat::Responses, "cut").to_vec()).unwrap();
    assert!(resp.starts_with("event: error\n") && resp.contains("\"code\":\"stream_incomplete\""));
    let msg = String::from_utf8(incomplete_event(StreamFormat::Messages, "cut").to_vec()).unwrap();
    assert!(msg.starts_with("event: error\n") && msg.contains("\"type\":\"api_error\""));
}

#[test]
fn hidden_error_in_first_event() {
    let e = events(
        &[b"data: {\"error\":{\"code\":429,\"message\":\"slow down\"}}\n\n"],
        false,
    );
    assert_eq!(hidden_error(&e[0]), Some(Some(429)));
    let e = events(&[b"data: {\"error\":{\"message\":\"boom\"}}\n\n"], false);
    assert_eq!(hidden_error(&e[0]), Some(None));
    let e = events(&[b"data: {\"choices\":[]}\n\n"], false);
    assert_eq!(hidden_error(&e[0]), None);
}
