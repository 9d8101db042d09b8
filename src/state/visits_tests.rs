//! Visits on paused time (R6.1): a cancelled half-open probe frees its slot
//! at once; targets are (channel, upstream model).
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::routing::policy::{Outcome, OutcomeFacts};
use crate::state::Snapshot;

fn snapshot() -> Snapshot {
    let yaml = "listen: 127.0.0.1:0\nadmin:\n  listen: 127.0.0.1:0\nstorage:\n  path: \":memory:\"\nresilience:\n  circuit_breaker:\n    scope: model\n    failure_threshold: 1\n    success_threshold: 1\n    timeout: 60s\nchannels:\n  c:\n    kind: openai\n    base_url: http://127.0.0.1:9/v1\n    keys: [\"k\"]\n    models: [m1, m2]\nclients:\n  a:\n    key: sk-a\n";
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("c.yaml");
    std::fs::write(&config_path, yaml).unwrap();
    let cfg = crate::config::load(&config_path).unwrap();
    let table = crate::routing::compile::compile(Arc::new(cfg), 1);
    Snapshot::new(table, &crate::state::Registry::default())
}

fn status(code: u16) -> OutcomeFacts {
    let outcome = Outcome::Status {
        code,
        error_code: None,
        error_type: None,
        message: String::new(),
    };
    OutcomeFacts::of(
        &outcome,
        &Default::default(),
        crate::routing::family::PathFamily::Chat,
    )
}

fn usable(snapshot: &Snapshot, model: &str) -> bool {
    crate::state::outcome::available(
        &snapshot.table.channels[0],
        &snapshot.states[0],
        model,
        Instant::now(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_probe_frees_its_slot_at_once() {
    let snapshot = snapshot();
    let store = Store::open(":memory:").unwrap();
    let m1: Arc<str> = Arc::from("m1");
    {
        let mut visits = Visits::new(&snapshot, &store);
        assert_eq!(visits.admit(0, &m1, 0), Admission::Admitted);
        visits.attempt(0, 0, &status(500), Duration::ZERO);
    }
    assert!(!usable(&snapshot, "m1"), "open after one failure");
    assert!(
        usable(&snapshot, "m2"),
        "another upstream model of the channel is not affected"
    );
    tokio::time::advance(Duration::from_secs(60)).await;
    {
        let mut visits = Visits::new(&snapshot, &store);
        assert_eq!(visits.admit(0, &m1, 0), Admission::Probe);
        // The request is dropped before its attempt finishes.
    }
    let mut visits = Visits::new(&snapshot, &store);
    assert_eq!(
        visits.admit(0, &m1, 0),
        Admission::Probe,
        "the slot is free at once, not after the 60 s timeout"
    );
    visits.attempt(0, 0, &OutcomeFacts::succeeded(200), Duration::ZERO);
    drop(visits);
    assert!(
        usable(&snapshot, "m1"),
        "the probe's success closes the breaker"
    );
}

#[tokio::test(start_paused = true)]
async fn two_models_on_one_channel_are_two_visits() {
    let snapshot = snapshot();
    let store = Store::open(":memory:").unwrap();
    let (m1, m2): (Arc<str>, Arc<str>) = (Arc::from("m1"), Arc::from("m2"));
    let mut visits = Visits::new(&snapshot, &store);
    assert_eq!(visits.admit(0, &m1, 0), Admission::Admitted);
    visits.attempt(0, 0, &status(503), Duration::ZERO);
    // Moving to m2 on the same channel settles m1's visit and admits m2 on its own breaker.
    assert_eq!(visits.admit(0, &m2, 0), Admission::Admitted);
    assert!(!usable(&snapshot, "m1"));
    visits.attempt(0, 0, &OutcomeFacts::succeeded(200), Duration::ZERO);
    drop(visits);
    assert!(usable(&snapshot, "m2"));
}
