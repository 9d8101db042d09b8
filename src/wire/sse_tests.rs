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

/// `events`, each read handed over whole (`Framer::push_read`) where `whole[i]`, else
/// copied in (`push`), the end completed (`finish`); after each read's events the framer
/// holds no part of the read and names no source, and every event of a read taken whole
/// while nothing was held is a slice of that read.
fn events_by_read(chunks: &[&[u8]], whole: &[bool], strip: bool) -> Vec<Event> {
    let mut framer = Framer::new(strip);
    let mut out = vec![];
    for (i, c) in chunks.iter().enumerate() {
        let read = Bytes::copy_from_slice(c);
        let fresh = framer.held() == 0;
        if whole.get(i).copied().unwrap_or(false) {
            framer.push_read(read.clone());
        } else {
            framer.push(c);
        }
        let source = framer.source();
        assert_eq!(
            source.is_some(),
            fresh && whole.get(i) == Some(&true) && !c.is_empty()
        );
        while let Some(e) = framer.next_event() {
            // (An event whose `id:` lines are stripped is a copy without them.)
            if let (Some(src), false) = (&source, strip) {
                assert!(
                    src.as_ptr_range().contains(&e.raw.as_ptr()),
                    "an event of a read taken whole was copied"
                );
            }
            out.push(e);
        }
        assert!(
            framer.source().is_none(),
            "the read is named after its events"
        );
        assert!(
            framer.read.is_empty(),
            "a part of the read is held across a wait"
        );
    }
    framer.finish();
    while let Some(e) = framer.next_event() {
        out.push(e);
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

/// Lines of every shape an upstream sends: the one-`data:`-line event in each line ending,
/// `data` without a space or a colon, several data lines, comments, `id:` and `event:` lines,
/// blank runs, non-UTF-8 bytes.
const LINES: &[&[u8]] = &[
    b"data: {\"a\":1}\n\n",
    b"data:{\"a\":2}\n\n",
    b"data: x\r\n\r\n",
    b"data: y\r\r",
    b"data: z\n",
    b"data\n\n",
    b"data: \n\n",
    b": keepalive\n\n",
    b"id: 7\n",
    b"event: ping\n",
    b"\n",
    b"\r\n",
    b"data: \xff\xfe\n\n",
    b"retry: 5\n\n",
    b"datum: q\n\n",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]
    /// However a stream is cut into reads, the framer gives the events it gives for the
    /// whole stream in one read, and each is what `parse_event` makes of its bytes: the
    /// one-data-line reading (`one_data_line`) is never told apart from the full one.
    #[test]
    fn events_read_alike_however_the_stream_is_cut(
        picks in proptest::collection::vec(0..LINES.len(), 1..24),
        cuts in proptest::collection::vec(proptest::prelude::any::<proptest::sample::Index>(), 0..8),
        strip in proptest::prelude::any::<bool>(),
        taken_whole in proptest::collection::vec(proptest::prelude::any::<bool>(), 0..9),
    ) {
        let stream: Vec<u8> = picks.iter().flat_map(|&i| LINES[i].iter().copied()).collect();
        let mut at: Vec<usize> = cuts.iter().map(|c| c.index(stream.len() + 1)).collect();
        at.sort_unstable();
        let mut chunks = vec![];
        let mut from = 0;
        for to in at.into_iter().chain([stream.len()]) {
            chunks.push(&stream[from..to]);
            from = to;
        }
        let whole = events(&[&stream], strip);
        let cut = events(&chunks, strip);
        proptest::prop_assert_eq!(&cut, &whole);
        // Reads handed over whole, or some whole and some copied, frame alike (the end
        // completed the same way in both: `finish` on the whole stream too).
        let mut framer = Framer::new(strip);
        framer.push(&stream);
        let mut ended: Vec<Event> = std::iter::from_fn(|| framer.next_event()).collect();
        framer.finish();
        ended.extend(std::iter::from_fn(|| framer.next_event()));
        proptest::prop_assert_eq!(&events_by_read(&chunks, &taken_whole, strip), &ended);
        let all_whole = vec![true; chunks.len()];
        proptest::prop_assert_eq!(&events_by_read(&chunks, &all_whole, strip), &ended);
        if !strip {
            for ev in &whole {
                proptest::prop_assert_eq!(ev, &parse_event(ev.raw.clone(), false));
            }
        }
    }
}

/// A peeking framer's events (a chat stream's) answer `peek()` with the look taken as they
/// were framed, the same as reading their data afresh, and so do their clones (a resumed
/// stream's splice rewrites a clone); an event not framed so reads its own on first use.
#[test]
fn a_peeking_framers_events_answer_their_first_look() {
    let stream: &[&[u8]] = &[
        b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"caf\xc3\xa9\"},\"finish_reason\":null}]}\n\n",
        b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
        b"data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: {\"error\":{\"message\":\"x\"}}\n\n",
        b"data: [DONE]\n\n",
    ];
    let mut framer = Framer::new(true).peeking();
    let mut seen = 0;
    for chunk in stream {
        framer.push(chunk);
        while let Some(ev) = framer.next_event() {
            let data = ev.data.as_deref().unwrap_or_default().to_string();
            let fresh = crate::wire::peek::EventPeek::read(&data);
            assert!(ev.framed.is_some(), "{data}");
            assert_eq!(*ev.peek(), fresh, "{data}");
            assert_eq!(*ev.clone().peek(), fresh, "{data}");
            assert_eq!(*Event::data(&data).peek(), fresh, "{data}");
            seen += 1;
        }
    }
    assert_eq!(seen, 5);
    let content = events(&[stream[0]], true);
    assert!(content[0].framed.is_none(), "a plain framer takes no look");
    assert_eq!(
        content[0].peek().choices.map(|c| (c.chars, c.finish)),
        Some((4, false))
    );
}
