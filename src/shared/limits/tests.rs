//! Pure parts of the Redis limit store: key names, the divided fallback, reply decoding, the
//! planning mirror's answer and its ageing.

use super::*;

#[test]
fn a_subjects_keys_share_one_hash_tag() {
    assert_eq!(subject_prefix(Subject::Client("alice")), "sy:lim:{c:alice}");
    let k = subject_prefix(Subject::Key {
        channel: "openai-1",
        key: "00aa",
    });
    assert_eq!(k, "sy:lim:{k:openai-1/00aa}");
    for full in keys(&k) {
        assert!(full.starts_with("sy:lim:{k:openai-1/00aa}:"), "{full}");
    }
    assert!(
        !subject_prefix(Subject::Client("a}b")).contains("a}b"),
        "braces are hexed"
    );
}

#[test]
fn replies_decode_into_refusals_and_reports() {
    let ask = Ask {
        rpm: 10,
        tpm: 1000,
        concurrency: 2,
        tokens: 300,
        ..Ask::default()
    };
    // Refused on tpm after 61 s, 10 requests used, 900 tokens used, 1 held.
    let counts = [0, 3, 61_000, 10, 0, 900, 1, 60_000, 0, 61_000, -1, -1, -1];
    let reply = Reply::parse(&counts, &ask);
    assert!(!reply.admitted);
    let refusal = reply.refusal(&ask);
    assert_eq!(refusal.kind, Kind::Tpm);
    assert_eq!(refusal.retry_after, Some(Duration::from_secs(61)));
    assert_eq!(refusal.needed, 300);
    assert_eq!(refusal.numbers().unwrap().remaining, 100);
    assert_eq!(refusal.report.get(Kind::Rpm).unwrap().remaining, 0);
    assert_eq!(refusal.report.get(Kind::Concurrency).unwrap().remaining, 1);
    assert_eq!(
        refusal.report.get(Kind::Rpd),
        None,
        "unlimited kinds stay unset"
    );
    assert_eq!(
        room(&refusal.report, &ask),
        Room::After(Duration::from_secs(61))
    );
    let never = Reply::parse(&[0, 3, -1, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1], &ask);
    assert!(never.refusal(&ask).can_never_fit());
    let ok = Reply::parse(&[1, 0, 0, 1, 0, 300, 1, 60_000, 0, 60_000, 7, -1, 7], &ask);
    assert!(ok.admitted);
    assert_eq!(ok.granules, [7, -1, 7]);
    assert_eq!(room(&ok.report, &ask), Room::Now);
    let too_big = Ask {
        tokens: 5000,
        ..ask
    };
    assert_eq!(room(&ok.report, &too_big), Room::Never);
}

/// B-shared-mirror-ages: the planning mirror ages. An upstream key whose mirrored rpm was used up
/// (reset 60 s) is held back until then and offered again after — without any admission
/// refreshing the mirror (a held-back key is never taken). A mirrored "no permit left" is
/// believed for CONCURRENCY_RETRY only.
#[tokio::test(start_paused = true)]
async fn the_planning_mirror_ages_past_its_resets() {
    let conn = Conn::open("redis://127.0.0.1:1/").unwrap();
    conn.health.mark_up();
    let store = RedisStore::new(conn, 1);
    let key = Subject::Key {
        channel: "ch",
        key: "fp",
    };
    let ask = Ask {
        rpm: 2,
        concurrency: 1,
        ..Ask::default()
    };
    let mut used = Report::default();
    let n = |remaining, reset_s| Numbers {
        limit: 2,
        remaining,
        reset: Duration::from_secs(reset_s),
    };
    used.set(Kind::Rpm, Some(n(0, 60)));
    let t0 = Instant::now();
    store.remember(&subject_prefix(key), used, t0);
    assert_eq!(
        store.peek(key, &ask, t0).room,
        Room::After(Duration::from_secs(60))
    );
    let later = t0 + Duration::from_secs(20);
    assert_eq!(
        store.peek(key, &ask, later).room,
        Room::After(Duration::from_secs(40)),
        "the reset comes nearer"
    );
    let after = t0 + Duration::from_secs(61);
    let peeked = store.peek(key, &ask, after);
    assert_eq!(
        peeked.room,
        Room::Now,
        "the window emptied: the key is offered"
    );
    assert_eq!(peeked.report.get(Kind::Rpm).unwrap().remaining, 2);

    let mut busy = Report::default();
    busy.set(
        Kind::Concurrency,
        Some(Numbers {
            limit: 1,
            remaining: 0,
            reset: Duration::ZERO,
        }),
    );
    store.remember(&subject_prefix(key), busy, t0);
    assert_eq!(
        store.peek(key, &ask, t0).room,
        Room::After(CONCURRENCY_RETRY)
    );
    assert_eq!(
        store.peek(key, &ask, t0 + CONCURRENCY_RETRY).room,
        Room::Now
    );
}
