//! Tests of the HTTP/1 framing tracker (R14.5).
use super::*;

fn feed_all(t: &mut Tracker, chunks: &[&[u8]]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut rejected = false;
    for c in chunks {
        let mut b = c.to_vec();
        rejected |= t.feed(&mut b);
        out.extend_from_slice(&b);
    }
    (out, rejected)
}

#[test]
fn cl_plus_te_is_neutralised() {
    let req: &[u8] = b"POST /v1/x HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    let (out, rejected) = feed_all(&mut Tracker::default(), &[req]);
    assert!(rejected);
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("Transfer-Encoding: xxxxxxx\r\n"), "{text}");
    assert_eq!(text.len(), req.len());
}

#[test]
fn normal_keep_alive_traffic_is_untouched_and_tracked() {
    let reqs: &[&[u8]] = &[
        b"POST /a HTTP/1.1\r\nContent-Length: 5\r\n\r\nhel",
        b"lo",
        b"POST /b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        b"GET /c HTTP/1.1\r\nHost: x\r\n\r\n",
        // A body that looks like headers must not be read as a head.
        b"POST /d HTTP/1.1\r\nContent-Length: 49\r\n\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST /e HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
    ];
    let mut tracker = Tracker::default();
    let all: Vec<u8> = reqs.concat();
    let (out, rejected) = feed_all(&mut tracker, &reqs[..5]);
    assert!(!rejected);
    assert_eq!(out, reqs[..5].concat());
    let (_, rejected) = feed_all(&mut tracker, &reqs[5..]);
    assert!(rejected, "the real sixth head is caught");
    assert!(all.len() > out.len());
}

#[test]
fn byte_by_byte_split_refuses_when_it_cannot_rewrite() {
    let req: &[u8] = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n";
    let mut tracker = Tracker::default();
    let chunks: Vec<&[u8]> = req.chunks(1).collect();
    let (_, rejected) = feed_all(&mut tracker, &chunks);
    assert!(rejected);
    assert!(tracker.refuse);
}

#[test]
fn h2_preface_and_tls_are_passed_through() {
    let mut tracker = Tracker::default();
    let mut b =
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    let copy = b.clone();
    assert!(!tracker.feed(&mut b));
    assert_eq!(b, copy);
}

/// Every way of splitting a keep-alive stream into two reads tracks it the same: benign
/// requests pass untouched, and a smuggling-shaped third request is always caught (rewritten
/// when its TE line is whole in one read, else the connection is refused).
#[test]
fn every_two_way_split_tracks_the_same() {
    let benign: &[u8] = b"POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhelloPOST /b HTTP/1.1\r\nTRANSFER-ENCODING: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
    let evil: &[u8] =
        b"POST /c HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    for k in 0..=benign.len() {
        let mut tracker = Tracker::default();
        let (out, rejected) = feed_all(&mut tracker, &[&benign[..k], &benign[k..]]);
        assert!(!rejected, "split at {k}");
        assert_eq!(out, benign, "split at {k}");
        assert_eq!(tracker.state, State::Head, "split at {k}");
    }
    let stream = [benign, evil].concat();
    for k in 0..=stream.len() {
        let mut tracker = Tracker::default();
        let (out, rejected) = feed_all(&mut tracker, &[&stream[..k], &stream[k..]]);
        assert!(rejected, "split at {k}");
        let text = String::from_utf8_lossy(&out);
        assert!(
            tracker.refuse || text.contains("Transfer-Encoding: xxxxxxx\r\n"),
            "split at {k}: {text}"
        );
    }
}

/// Three reads, split anywhere: a line is read in place when it is whole in one read and
/// gathered when it spans reads; both ways find the same framing, and a smuggling-shaped
/// head is always caught (rewritten in place only when its TE line is whole in one read).
#[test]
fn every_three_way_split_tracks_the_same() {
    let benign: &[u8] = b"POST /a HTTP/1.1\r\ncontent-length: 5\r\n\r\nhelloPOST /b HTTP/1.1\r\nTRANSFER-ENCODING: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\nX-T: 1\r\n\r\n";
    let evil: &[u8] =
        b"GET /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n";
    let stream = [benign, evil].concat();
    for a in 0..=stream.len() {
        for b in a..=stream.len() {
            let parts = [&stream[..a], &stream[a..b], &stream[b..]];
            let mut tracker = Tracker::default();
            let (out, rejected) = feed_all(&mut tracker, &parts);
            assert!(rejected, "split at {a}, {b}");
            assert_eq!(out[..benign.len()], *benign, "split at {a}, {b}");
            // The TE value can be rewritten when its line (from byte 17 of the evil head)
            // and the head's end (its empty line's LF, byte 65) arrive in one read.
            let (te, head_end) = (benign.len() + 17, benign.len() + 65);
            let te_whole = ![a, b].iter().any(|&s| s > te && s <= head_end);
            let text = String::from_utf8_lossy(&out);
            if te_whole {
                assert!(!tracker.refuse, "split at {a}, {b}");
                assert!(
                    text.contains("Transfer-Encoding: xxxxxxx\r\n"),
                    "split at {a}, {b}"
                );
            } else {
                assert!(tracker.refuse, "split at {a}, {b}: {text}");
            }
        }
    }
}

/// Where the next head stands after each read (the header-read timer's input, `timer`): a
/// head is incomplete from its first byte to its empty line; bodies and the time between
/// requests are not heads; an HTTP/2 preface or an upgrade is not followed any more.
#[test]
fn head_progress_by_read() {
    let mut t = Tracker::default();
    let mut step = |bytes: &[u8]| {
        t.feed(&mut bytes.to_vec());
        t.head()
    };
    assert_eq!(step(b""), Progress::Between);
    assert_eq!(step(b"PO"), Progress::Incomplete, "a partial request line");
    assert_eq!(step(b"ST /a HTTP/1.1\r\n"), Progress::Incomplete);
    assert_eq!(step(b"Content-Length: 4\r\n"), Progress::Incomplete);
    assert_eq!(step(b"\r\nab"), Progress::Between, "in the body");
    assert_eq!(step(b"cd"), Progress::Between, "between requests");
    let whole = b"POST /b HTTP/1.1\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(step(whole), Progress::Between, "a head whole in one read");
    assert_eq!(step(b"GET /c HTTP/1.1\r\nHost: x\r"), Progress::Incomplete);
    assert_eq!(step(b"\n\r\n"), Progress::Between);
    assert_eq!(
        step(b"GET /d HTTP/1.1\r\nUpgrade: websocket\r\n\r\n"),
        Progress::Untracked
    );
    let mut h2 = Tracker::default();
    h2.feed(&mut b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec());
    assert_eq!(h2.head(), Progress::Untracked);
}
