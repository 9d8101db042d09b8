//! Task calls, task ids and the (client, task id) cache (R10.5, B-tenants).
use std::sync::Mutex;
use std::time::Duration;

use super::*;

#[test]
fn task_calls() {
    let paths = vec!["/v1/videos".to_string(), "/v1/mj/submit".to_string()];
    let post = Method::POST;
    let get = Method::GET;
    let rows: &[(&Method, &str, Option<TaskCall>)] = &[
        (&post, "/v1/videos", Some(TaskCall::Submit)),
        (&post, "/v1/videos/", Some(TaskCall::Submit)),
        (&get, "/v1/videos", None),
        (
            &get,
            "/v1/videos/task_1",
            Some(TaskCall::FollowUp { id: "task_1" }),
        ),
        (
            &get,
            "/v1/videos/task_1/content",
            Some(TaskCall::FollowUp { id: "task_1" }),
        ),
        (
            &post,
            "/v1/videos/task_1/remix",
            Some(TaskCall::FollowUp { id: "task_1" }),
        ),
        (&post, "/v1/videosx", None),
        (&post, "/v1/chat/completions", None),
        (&post, "/v1/mj/submit", Some(TaskCall::Submit)),
        (&get, "/v1/videos//x", None),
    ];
    for (m, path, want) in rows {
        assert_eq!(task_call(&paths, m, path), *want, "{m} {path}");
    }
    assert_eq!(task_call(&[], &post, "/v1/videos"), None);
}

#[test]
fn task_ids() {
    let rows: &[(&str, Option<&str>)] = &[
        (r#"{"id":"task_1","status":"queued"}"#, Some("task_1")),
        (r#"{"task_id":"t2"}"#, Some("t2")),
        (r#"{"code":0,"data":{"id":"d3"}}"#, Some("d3")),
        (r#"{"data":{"task_id":"d4"}}"#, Some("d4")),
        (r#"{"data":"d5"}"#, None),
        (r#"{"id":12345}"#, Some("12345")),
        (r#"{"id":"has space"}"#, None),
        (r#"{"id":""}"#, None),
        (r#"{"id":null,"task_id":"t6"}"#, Some("t6")),
        ("not json", None),
        ("", None),
    ];
    for (body, want) in rows {
        assert_eq!(task_id(body.as_bytes()).as_deref(), *want, "{body}");
    }
    let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(MAX_TASK_ID + 1));
    assert_eq!(task_id(long.as_bytes()), None);
}

#[test]
fn cache_is_bounded_and_evicts_oldest() {
    let cache = TaskCache::new(3);
    for i in 0..5 {
        cache.bind("alice", &format!("t{i}"), &format!("ch{i}"));
    }
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.get("alice", "t0"), None);
    assert_eq!(cache.get("alice", "t1"), None);
    let entry = cache.get("alice", "t4").unwrap();
    assert_eq!(
        (entry.channels.as_slice(), entry.complete),
        (&["ch4".to_string()][..], false)
    );
    // A second channel for the same id goes first; the first stays (no overwrite).
    cache.bind("alice", "t4", "other");
    assert_eq!(cache.len(), 3);
    assert_eq!(cache.get("alice", "t4").unwrap().channels, ["other", "ch4"]);
    // Another client's equal id is a separate entry.
    assert_eq!(cache.get("bob", "t4"), None);
    // SQLite's older bindings come after the cached ones; the entry is then complete.
    assert_eq!(
        cache.fill("alice", "t4", vec!["ch4".into(), "old".into()]),
        ["other", "ch4", "old"]
    );
    assert!(cache.get("alice", "t4").unwrap().complete);
    // A known-unknown id is cached, and a later binding is added to it.
    assert!(cache.fill("bob", "t2", vec![]).is_empty());
    assert_eq!(cache.get("bob", "t2").unwrap().channels.len(), 0);
    cache.bind("bob", "t2", "late");
    assert_eq!(cache.get("bob", "t2").unwrap().channels, ["late"]);
    assert_eq!(cache.len(), 3);
}

/// B-task-negative-cache: "the store knows no binding" is believed for NEGATIVE_TTL only — a
/// poll on one replica that raced the submission on another must see the binding once it
/// is written — while a known binding stays cached.
#[tokio::test(start_paused = true)]
async fn a_negative_answer_expires_and_a_binding_does_not() {
    let cache = TaskCache::new(8);
    assert!(cache.fill("alice", "t1", vec![]).is_empty());
    assert_eq!(cache.get("alice", "t1").map(|e| e.channels.len()), Some(0));
    tokio::time::advance(NEGATIVE_TTL - Duration::from_millis(1)).await;
    assert!(cache.get("alice", "t1").is_some(), "still believed");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(cache.get("alice", "t1"), None, "asked again");
    // The store now has the binding another replica wrote.
    assert_eq!(cache.fill("alice", "t1", vec!["ch".into()]), ["ch"]);
    tokio::time::advance(NEGATIVE_TTL * 100).await;
    let entry = cache.get("alice", "t1").expect("a binding stays cached");
    assert_eq!(
        (entry.channels.as_slice(), entry.complete),
        (&["ch".to_string()][..], true)
    );
}

/// B-shared-task-bindings: a new binding is announced while Redis answers (not while it is
/// away); another replica's binding is applied silently, turns a cached negative answer
/// into the binding, and does not reorder a channel already known.
#[tokio::test(start_paused = true)]
async fn bindings_are_announced_and_other_replicas_applied() {
    use crate::state::sync::{Change, Sink};
    use std::sync::atomic::{AtomicBool, Ordering};
    #[derive(Default)]
    struct Rec(Mutex<Vec<Change>>, AtomicBool);
    impl Sink for Rec {
        fn emit(&self, change: Change) {
            self.0.lock().unwrap().push(change);
        }
        fn is_live(&self) -> bool {
            !self.1.load(Ordering::Relaxed)
        }
    }
    let cache = TaskCache::new(8);
    let rec = Arc::new(Rec::default());
    cache.share(rec.clone());
    cache.bind("alice", "t1", "a");
    assert_eq!(
        std::mem::take(&mut *rec.0.lock().unwrap()),
        vec![Change::TaskBound {
            client: "alice".into(),
            id: "t1".into(),
            channel: "a".into()
        }]
    );
    rec.1.store(true, Ordering::Relaxed);
    cache.bind("alice", "t2", "a");
    assert!(
        rec.0.lock().unwrap().is_empty(),
        "Redis away: the store only"
    );
    rec.1.store(false, Ordering::Relaxed);

    assert!(
        cache.fill("bob", "t9", vec![]).is_empty(),
        "negative answer cached"
    );
    cache.apply("bob", "t9", "b");
    let entry = cache.get("bob", "t9").expect("cached");
    assert_eq!(
        (entry.channels.as_slice(), entry.complete),
        (&["b".to_string()][..], true)
    );
    cache.bind("bob", "t9", "c");
    rec.0.lock().unwrap().clear();
    cache.apply("bob", "t9", "b");
    assert_eq!(
        cache.get("bob", "t9").unwrap().channels,
        ["c", "b"],
        "known: kept in place"
    );
    cache.apply("bob", "t8", "d");
    assert!(
        rec.0.lock().unwrap().is_empty(),
        "applied bindings are not announced"
    );
    let entry = cache.get("bob", "t8").expect("cached");
    assert!(
        !entry.complete,
        "the store is still read for older bindings"
    );
}
