//! Tests of `storage.url`, `storage.lease_ttl`, `storage.queue_capacity`, `storage.pool_size`,
//! `storage.pool_timeout` and `shared.fail_open`
//! (R17): PostgreSQL or SQLite, never both; a bad URL names the key and never echoes it.

use std::time::Duration;

use crate::config::tests::{env, errs, load, CH};
use crate::config::*;

#[test]
fn sqlite_is_the_default_and_postgres_is_read_from_storage_url() {
    let cfg = load(CH).unwrap();
    assert!(cfg.storage.url.is_none());
    assert_eq!(cfg.storage.path, "./switchyard.db");
    assert_eq!(cfg.storage.lease_ttl, Duration::from_secs(30));
    assert_eq!(cfg.storage.queue_capacity, 8192);
    assert!(!cfg.shared.fail_open);

    let yaml = format!("storage:\n  url: postgres://sy:pw-canary-42@db:5433/sy\n  lease_ttl: 5s\n  queue_capacity: 64\nshared:\n  fail_open: true\n{CH}");
    let cfg = load(&yaml).unwrap();
    let url = cfg.storage.url.as_ref().expect("url");
    assert_eq!(url.expose(), "postgres://sy:pw-canary-42@db:5433/sy");
    assert!(
        !format!("{cfg:?}").contains("pw-canary-42"),
        "the URL is a secret"
    );
    assert_eq!(cfg.storage.lease_ttl, Duration::from_secs(5));
    assert_eq!(cfg.storage.queue_capacity, 64);
    assert!(cfg.shared.fail_open);
}

#[test]
fn a_file_with_both_path_and_url_is_an_error() {
    let errors = errs(&format!(
        "storage:\n  path: a.db\n  url: postgres://u@h/d\n{CH}"
    ));
    assert_eq!(errors.0.len(), 1, "{errors}");
    assert_eq!(errors.0[0].key, "storage.url");
    assert!(errors.0[0].reason.contains("not both"), "{errors}");
}

#[test]
fn a_bad_url_names_the_key_and_hides_the_value() {
    for (url, says) in [
        ("mysql://u:secret-pw@h/d", "not a PostgreSQL URL"),
        (
            "postgres://u:secret-pw@h:notaport/d",
            "not a usable PostgreSQL URL",
        ),
        (
            "postgres://u:secret-pw@h/d?sslmode=require",
            "sslmode=require",
        ),
        (
            "postgres://u:secret-pw@h/d?sslmode=bogus",
            "not a usable PostgreSQL URL",
        ),
    ] {
        let errors = errs(&format!("storage:\n  url: \"{url}\"\n{CH}"));
        assert_eq!(errors.0.len(), 1, "{url}: {errors}");
        assert_eq!(errors.0[0].key, "storage.url", "{url}");
        let text = errors.to_string();
        assert!(text.contains(says), "{url}: {text}");
        assert!(
            !text.contains("secret-pw"),
            "{url}: the value leaked: {text}"
        );
    }
}

#[test]
fn lease_queue_and_fail_open_are_checked() {
    let errors = errs(&format!(
        "storage:\n  url: postgres://u@h/d\n  lease_ttl: 0s\n  queue_capacity: 0\nshared:\n  fail_open: maybe\n{CH}"
    ));
    let keys: Vec<&str> = errors.0.iter().map(|error| error.key.as_str()).collect();
    assert!(keys.contains(&"storage.lease_ttl"), "{errors}");
    assert!(keys.contains(&"storage.queue_capacity"), "{errors}");
    assert!(keys.contains(&"shared.fail_open"), "{errors}");
    let errors = errs(&format!("shared:\n  replica: 3\n{CH}"));
    assert!(errors.to_string().contains("shared.replica"), "{errors}");
}

#[test]
fn the_url_can_come_from_the_environment() {
    let yaml = format!("storage:\n  url: ${{PG_URL}}\n{CH}");
    let cfg = load_str(
        &yaml,
        std::path::Path::new("t.yaml"),
        &env(&[("PG_URL", "postgresql://sy@127.0.0.1/sy")]),
    )
    .unwrap();
    assert_eq!(
        cfg.storage
            .url
            .map(|url| url.expose().to_string())
            .as_deref(),
        Some("postgresql://sy@127.0.0.1/sy")
    );
}

/// B-pg-pool: the PostgreSQL pool is configurable (`storage.pool_size`,
/// `storage.pool_timeout`) and so is the debit batch (`storage.debit_batch`); zero (and a
/// batch past the largest) is refused with the key named.
#[test]
fn the_pool_size_and_timeout_are_read_and_checked() {
    let cfg = load(CH).unwrap();
    assert_eq!(
        (
            cfg.storage.pool_size,
            cfg.storage.pool_timeout,
            cfg.storage.debit_batch
        ),
        (8, Duration::from_secs(2), 256)
    );
    let yaml = format!(
        "storage:\n  url: postgres://u@h/d\n  pool_size: 32\n  pool_timeout: 250ms\n  debit_batch: 1\n{CH}"
    );
    let cfg = load(&yaml).unwrap();
    assert_eq!(
        (
            cfg.storage.pool_size,
            cfg.storage.pool_timeout,
            cfg.storage.debit_batch
        ),
        (32, Duration::from_millis(250), 1)
    );
    let errors = errs(&format!(
        "storage:\n  url: postgres://u@h/d\n  pool_size: 0\n  pool_timeout: 0s\n  debit_batch: 0\n{CH}"
    ));
    let keys: Vec<&str> = errors.0.iter().map(|error| error.key.as_str()).collect();
    assert!(keys.contains(&"storage.pool_size"), "{errors}");
    assert!(keys.contains(&"storage.pool_timeout"), "{errors}");
    assert!(keys.contains(&"storage.debit_batch"), "{errors}");
    let errors = errs(&format!(
        "storage:\n  url: postgres://u@h/d\n  debit_batch: 5000\n{CH}"
    ));
    assert!(
        errors.to_string().contains("storage.debit_batch"),
        "{errors}"
    );
}

/// `check --explain` shows the PostgreSQL pool and debit batch in effect, never the URL.
#[test]
fn explain_shows_the_pool_and_debit_batch() {
    let yaml = format!(
        "storage:\n  url: postgres://u:hunter2@h/d\n  pool_size: 16\n  pool_timeout: 500ms\n{CH}"
    );
    let text = crate::config::explain::explain(&load(&yaml).unwrap());
    assert!(
        text.contains("storage: postgres pool_size=16 pool_timeout=500ms debit_batch=256"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
}
