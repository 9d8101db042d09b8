//! SSE framing (R9.1): any read boundaries, line ends, `id:` stripping, the one JSON parse.
use super::*;

/// The events a framer gives for `chunks`, read as they arrive.
pub(crate) fn events(chunks: &[&[u8]], strip: bool) -> Vec<Event> {
    let mut framer = Framer::new(strip);
    let mut out = vec![];
    for c in chunks {
        framer.push(c);
        while let Some(e) = framer.next_event() {
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
fn data_is_parsed_once_and_shared() {
    let evs = events(
        &[
            b"data: {\"type\":\"ping\",\"n\":1}\n\n",
            b"data: [DONE]\n\n",
        ],
        false,
    );
    let first = evs[0].json().unwrap() as *const serde_json::Value;
    let second = evs[0].json().unwrap() as *const serde_json::Value;
    assert_eq!(first, second, "the second reader gets the first parse");
    assert_eq!(evs[0].kind(), Some("ping"));
    assert_eq!(evs[1].json(), None);
    // Parsing does not change what an event is.
    let fresh = events(&[b"data: {\"type\":\"ping\",\"n\":1}\n\n"], false);
    assert_eq!(evs[0], fresh[0]);
    assert_eq!(format!("{:?}", evs[0]), format!("{:?}", fresh[0]));
}

/// An event's one `data:` line is its received bytes, not a copy (one allocation fewer per
/// streamed event); invalid UTF-8 still reads as U+FFFD, and several lines are joined.
#[test]
fn one_data_line_is_shared_with_the_event_bytes() {
    let evs = events(
        &[
            b"data: {\"n\":1}\n\n",
            b"data: a\xffb\n\n",
            b"data: x\ndata:\n\n",
        ],
        false,
    );
    let data = evs[0].data.as_deref().unwrap();
    assert_eq!(data, "{\"n\":1}");
    let raw = evs[0].raw.as_ptr_range();
    assert!(
        raw.contains(&data.as_ptr()),
        "the data was copied out of the event"
    );
    assert_eq!(evs[1].data.as_deref(), Some("a\u{fffd}b"));
    assert_eq!(evs[2].data.as_deref(), Some("x\n"));
}
