//! End-to-end quota and billing tests (R11): settle at the real usage, one charge across a
//! failover, refund on total failure, refusal without an upstream call, the concurrent
//! atomic debit, and a `kill -9` of the real binary mid-request.
#[path = "billing/hedge.rs"]
mod hedge;
use crate::support;

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;
use support::*;
use switchyard_mock::{CACHED_TOKENS, DEFAULT_CHUNKS, PROMPT_TOKENS};

/// Credits per million tokens = micro-credits per token.
const IN_PRICE: i64 = 1000;
const OUT_PRICE: i64 = 2000;

fn yaml(
    chans: &[(&str, i64)],
    m: &HashMap<String, MockUpstream>,
    client: &str,
    price: &str,
) -> String {
    let mut yaml = String::from("routing:\n  retry_times: 3\nchannels:\n");
    for (n, p) in chans {
        yaml.push_str(&channel(n, &format!("{{{n}}}"), *p, &["m"]));
    }
    yaml.push_str(&format!(
        "clients:\n  alice:\n    key: {ALICE}\n{client}pricing:\n  m: {price}\n"
    ));
    fill(&yaml, m)
}

fn default_price() -> String {
    format!("{{input: {IN_PRICE}, output: {OUT_PRICE}}}")
}

/// The real cost of one mock answer at the default price.
fn mock_cost() -> i64 {
    PROMPT_TOKENS as i64 * IN_PRICE + DEFAULT_CHUNKS as i64 * OUT_PRICE
}

async fn account(gw: &Gw) -> serde_json::Value {
    let (s, v) = gw.admin_get("/admin/clients/alice").await;
    assert_eq!(s, 200, "{v}");
    v
}

async fn totals(gw: &Gw) -> switchyard::store::LedgerTotals {
    gw.flush().await;
    let store = &gw.running.as_ref().unwrap().gateway.store;
    store
        .ledger_totals()
        .await
        .unwrap()
        .get("alice")
        .copied()
        .unwrap_or_default()
}

/// Settle charges exactly prompt × input + completion × output; cached tokens carry no
/// discount and the ledger agrees with the in-memory account.
#[tokio::test]
async fn settle_charges_exactly_usage_times_price() {
    let mocks = mocks(&["a"]).await;
    let gw = start_gw(&yaml(
        &[("a", 10)],
        &mocks,
        "    quota: 100\n",
        &default_price(),
    ))
    .await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body["usage"]["prompt_tokens_details"]["cached_tokens"],
        CACHED_TOKENS
    );
    let account = account(&gw).await;
    assert_eq!(account["charged_micro"], mock_cost());
    assert_eq!(account["refunded_micro"], 0);
    assert_eq!(account["remaining_micro"], 100_000_000 - mock_cost());
    assert_eq!(account["quota"], 100);
    let totals = totals(&gw).await;
    assert_eq!((totals.charged, totals.refunded), (mock_cost(), 0));
    gw.stop().await;
}

/// A failover (first channel 503, second 200) precharges and settles once.
#[tokio::test]
async fn failover_charges_once() {
    let mocks = mocks(&["a", "b"]).await;
    mocks["a"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let gw = start_gw(&yaml(
        &[("a", 10), ("b", 0)],
        &mocks,
        "    quota: 100\n",
        &default_price(),
    ))
    .await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    assert_eq!(route(&response), "a->b");
    let totals = totals(&gw).await;
    assert_eq!((totals.charged, totals.refunded), (mock_cost(), 0));
    assert_eq!(account(&gw).await["charged_micro"], mock_cost());
    let store = &gw.running.as_ref().unwrap().gateway.store;
    assert!(store.dangling_precharges().await.unwrap().is_empty());
    // B-log-truth: the request log says a later channel served it; `fallback` is the
    // sticky-routing flag (no binding here) and stays false.
    let rows = support::streams::requests(&gw).await;
    assert_eq!(rows[0]["chain"], "a->b", "{}", rows[0]);
    assert_eq!(rows[0]["failed_over"], true, "{}", rows[0]);
    assert_eq!(rows[0]["fallback"], false, "{}", rows[0]);
    gw.stop().await;
}

/// Every attempt failed: the precharge is refunded exactly once and the balance is whole.
#[tokio::test]
async fn total_failure_leaves_the_balance_unchanged() {
    let mocks = mocks(&["a", "b"]).await;
    for n in ["a", "b"] {
        mocks[n].set_default(Behavior::Status {
            code: 503,
            body: None,
        });
    }
    let gw = start_gw(&yaml(
        &[("a", 10), ("b", 0)],
        &mocks,
        "    quota: 100\n",
        &default_price(),
    ))
    .await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 503);
    let account = account(&gw).await;
    assert_eq!(account["charged_micro"], 0);
    assert_eq!(account["remaining_micro"], 100_000_000);
    let refunded = account["refunded_micro"].as_i64().unwrap();
    assert!(refunded > 0, "{account}");
    let totals = totals(&gw).await;
    assert_eq!((totals.charged, totals.refunded), (0, refunded));
    gw.stop().await;
}

/// A key that cannot afford the estimate gets a 402 in its wire format, and no upstream
/// is called; unlimited and unpriced requests pass.
#[tokio::test]
async fn exhausted_key_is_refused_without_an_upstream_call() {
    let mocks = mocks(&["a"]).await;
    // 1 credit per token: the default 1024-token estimate alone exceeds 1 credit.
    let gw = start_gw(&yaml(
        &[("a", 10)],
        &mocks,
        "    quota: 1\n",
        "{input: 1000000, output: 1000000}",
    ))
    .await;
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 402);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "insufficient_quota", "{body}");
    let response = gw
        .post("/v1/messages", ALICE, json!({"model": "m", "max_tokens": 4096, "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(response.status(), 402);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["type"], "error", "Anthropic format: {body}");
    assert_eq!(mocks["a"].calls(), 0);
    let account = account(&gw).await;
    assert_eq!(
        (
            account["charged_micro"].as_i64(),
            account["remaining_micro"].as_i64()
        ),
        (Some(0), Some(1_000_000))
    );
    assert!(gw
        .metrics()
        .await
        .contains("switchyard_quota_rejected_total"));
    gw.stop().await;
}

/// 40 concurrent requests on a key that affords exactly 10 estimates: at most 10 reach
/// the upstream and the balance never goes below zero (R11.3).
#[tokio::test]
async fn concurrent_requests_admit_only_what_the_quota_affords() {
    let mocks = mocks(&["a"]).await;
    mocks["a"].set_default(Behavior::HangBeforeHeaders(Duration::from_millis(1500)));
    // Input free; 10 completion tokens × 100 000 micro = exactly 1 credit per estimate.
    let gw = start_gw(&yaml(
        &[("a", 10)],
        &mocks,
        "    quota: 10\n",
        "{input: 0, output: 100000}",
    ))
    .await;
    let body =
        json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
    let reqs: Vec<_> = (0..40)
        .map(|_| {
            let (http, url, body) = (
                gw.http.clone(),
                format!("{}/v1/chat/completions", gw.base),
                body.clone(),
            );
            tokio::spawn(async move {
                http.post(url)
                    .bearer_auth(ALICE)
                    .json(&body)
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mid = account(&gw).await;
    assert!(mid["remaining_micro"].as_i64().unwrap() >= 0, "{mid}");
    let mut codes = Vec::new();
    for r in reqs {
        codes.push(r.await.unwrap());
    }
    let ok = codes.iter().filter(|c| **c == 200).count();
    let refused = codes.iter().filter(|c| **c == 402).count();
    assert_eq!(ok, 10, "{codes:?}");
    assert_eq!(refused, 30, "{codes:?}");
    assert_eq!(mocks["a"].calls(), ok);
    let account = account(&gw).await;
    let cost = DEFAULT_CHUNKS as i64 * 100_000;
    assert_eq!(account["charged_micro"], 10 * cost);
    assert!(
        account["remaining_micro"].as_i64().unwrap() >= 0,
        "{account}"
    );
    let totals = totals(&gw).await;
    assert_eq!(totals.charged, 10 * cost);
    gw.stop().await;
}

/// A trusted key skips the precharge and pays the full cost at settle (R11.4).
#[tokio::test]
async fn trusted_key_pays_at_settle() {
    let mocks = mocks(&["a"]).await;
    let gw = start_gw(&yaml(
        &[("a", 10)],
        &mocks,
        "    quota: 1\n    trusted: true\n",
        &default_price(),
    ))
    .await;
    // The estimate (1024 tokens × 2000) would exceed 1 credit; a trusted key is not asked.
    let response = gw.chat("m", false).await;
    assert_eq!(response.status(), 200);
    let totals = totals(&gw).await;
    assert_eq!((totals.charged, totals.refunded), (mock_cost(), 0));
    assert_eq!(account(&gw).await["trusted"], true);
    gw.stop().await;
}

mod killed {
    //! `kill -9` of the real binary with one request in flight.
    use super::*;
    use std::process::{Child, Command, Stdio};

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }

    fn spawn(config: &std::path::Path) -> Child {
        Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("--config")
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    async fn wait_ready(http: &reqwest::Client, admin: &str) {
        for _ in 0..200 {
            if let Ok(r) = http.get(format!("{admin}/readyz")).send().await {
                if r.status() == 200 {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("gateway did not become ready");
    }

    /// Rows of `kind` in the binary's ledger (read-only, through SQLite directly).
    fn ledger_rows(db: &std::path::Path, kind: &str) -> i64 {
        let Ok(c) =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        else {
            return 0;
        };
        c.query_row("SELECT COUNT(*) FROM ledger WHERE kind = ?1", [kind], |r| {
            r.get(0)
        })
        .unwrap_or(0)
    }

    async fn wait_rows(db: &std::path::Path, kind: &str, rows: i64) {
        for _ in 0..200 {
            if ledger_rows(db, kind) >= rows {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("ledger never reached {rows} {kind} rows");
    }

    /// One gateway binary's files and addresses: a SQLite store, one channel to `up`, the
    /// given clients, the default price.
    struct Binary {
        _dir: tempfile::TempDir,
        db: std::path::PathBuf,
        config: std::path::PathBuf,
        http: reqwest::Client,
        base: String,
        admin: String,
    }

    impl Binary {
        fn new(up: &MockUpstream, clients: &str) -> Binary {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("switchyard.db");
            let (listen, admin_port) = (free_port(), free_port());
            let config = dir.path().join("switchyard.yaml");
            std::fs::write(
                &config,
                format!(
                    "listen: 127.0.0.1:{listen}\nadmin:\n  listen: 127.0.0.1:{admin_port}\n  token: {ADMIN_TOKEN}\nstorage:\n  path: {}\nchannels:\n{}clients:\n{clients}pricing:\n  m: {}\n",
                    db.display(),
                    channel("a", &up.base_url(), 10, &["m"]),
                    default_price()
                ),
            )
            .unwrap();
            let http = reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .build()
                .unwrap();
            Binary {
                _dir: dir,
                db,
                config,
                http,
                base: format!("http://127.0.0.1:{listen}"),
                admin: format!("http://127.0.0.1:{admin_port}"),
            }
        }
    }

    #[tokio::test]
    async fn kill_9_mid_request_refunds_the_precharge_and_keeps_settled_charges() {
        let up = MockUpstream::start().await.unwrap();
        let clients = format!("  alice:\n    key: {ALICE}\n    quota: 100\n");
        let gw = Binary::new(&up, &clients);
        let (db, config, http, base, admin) = (&gw.db, &gw.config, &gw.http, &gw.base, &gw.admin);
        let chat = |stream: bool| {
            http.post(format!("{base}/v1/chat/completions"))
                .bearer_auth(ALICE)
                .json(&json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
        };
        let alice = |http: reqwest::Client| {
            let url = format!("{admin}/admin/clients/alice");
            async move {
                let response = http.get(url).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
                response.json::<serde_json::Value>().await.unwrap()
            }
        };

        let mut child = spawn(config);
        wait_ready(http, admin).await;
        for _ in 0..2 {
            let response = chat(false).await.unwrap();
            assert_eq!(response.status(), 200);
        }
        // Both settles committed before the kill.
        wait_rows(db, "settle", 2).await;
        // A slow stream keeps the third request in flight with its precharge committed.
        up.set_default(Behavior::Stream {
            chunks: 1000,
            delay: Duration::from_millis(50),
        });
        let mut inflight = chat(true).await.unwrap();
        assert_eq!(inflight.status(), 200);
        let _ = inflight.chunk().await;
        wait_rows(db, "precharge", 3).await;
        let before = alice(http.clone()).await;
        assert!(
            before["charged_micro"].as_i64().unwrap() > 2 * mock_cost(),
            "{before}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        drop(inflight);

        let mut child = spawn(config);
        wait_ready(http, admin).await;
        let after = alice(http.clone()).await;
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(after["charged_micro"], 2 * mock_cost(), "{after}");
        assert_eq!(
            after["remaining_micro"],
            100_000_000 - 2 * mock_cost(),
            "{after}"
        );
        assert_eq!(ledger_rows(db, "refund"), 1);
        assert_eq!(ledger_rows(db, "settle"), 2);
    }

    const BOB: &str = "sk-test-bob";

    /// Settles of `client` folded into its compacted totals (`batch_fold`).
    fn folded_entries(db: &std::path::Path, client: &str) -> i64 {
        let Ok(c) =
            rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        else {
            return 0;
        };
        c.query_row(
            "SELECT entries FROM ledger_compacted WHERE client = ?1",
            [client],
            |r| r.get(0),
        )
        .unwrap_or(0)
    }

    /// R11.2 with the writer's fold: a client without a quota is charged through its
    /// compacted totals (no ledger row per request), a quota client beside it keeps its
    /// rows, and after a `kill -9` both balances come back exactly.
    #[tokio::test]
    async fn kill_9_keeps_what_an_unlimited_client_was_charged() {
        let up = MockUpstream::start().await.unwrap();
        let clients =
            format!("  alice:\n    key: {ALICE}\n  bob:\n    key: {BOB}\n    quota: 100\n");
        let gw = Binary::new(&up, &clients);
        let (db, config, http, base, admin) = (&gw.db, &gw.config, &gw.http, &gw.base, &gw.admin);
        let chat = |key: &'static str, stream: bool| {
            http.post(format!("{base}/v1/chat/completions"))
                .bearer_auth(key)
                .json(&json!({"model": "m", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}))
                .send()
        };
        let charged = |http: reqwest::Client, who: &'static str| {
            let url = format!("{admin}/admin/clients/{who}");
            async move {
                let response = http.get(url).bearer_auth(ADMIN_TOKEN).send().await.unwrap();
                let v = response.json::<serde_json::Value>().await.unwrap();
                v["charged_micro"].as_i64().unwrap()
            }
        };

        let mut child = spawn(config);
        wait_ready(http, admin).await;
        // Concurrent requests of both clients, streamed and not, so that their entries
        // share writer batches.
        let mut sent = Vec::new();
        for i in 0..6 {
            sent.push(chat(ALICE, i % 2 == 0));
            sent.push(chat(BOB, i % 2 == 1));
        }
        for response in futures_util::future::join_all(sent).await {
            let response = response.unwrap();
            assert_eq!(response.status(), 200);
            response.bytes().await.unwrap();
        }
        wait_rows(db, "settle", 6).await;
        for _ in 0..200 {
            if folded_entries(db, "alice") >= 6 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(folded_entries(db, "alice"), 6);
        assert_eq!(charged(http.clone(), "alice").await, 6 * mock_cost());
        child.kill().unwrap();
        child.wait().unwrap();

        let mut child = spawn(config);
        wait_ready(http, admin).await;
        let (alice, bob) = (
            charged(http.clone(), "alice").await,
            charged(http.clone(), "bob").await,
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!((alice, bob), (6 * mock_cost(), 6 * mock_cost()));
        // Only bob's sessions are rows: six precharges and six settles.
        assert_eq!(ledger_rows(db, "precharge"), 6);
        assert_eq!(ledger_rows(db, "settle"), 6);
    }
}

/// B-cancel-guards (cancellation harness, local mode): a client that leaves while its
/// precharge waits for room in a full writer queue gets the debit back at once, and the
/// ledger (precharge + refund) agrees with the account once the writer runs again. Before
/// the fix the debit was taken and the session never existed: the account stayed charged
/// until a restart.
#[tokio::test]
async fn a_client_leaving_while_its_precharge_waits_for_the_writer_is_refunded() {
    let mocks = mocks(&["a"]).await;
    let gw = start_gw(&yaml(
        &[("a", 0)],
        &mocks,
        "    quota: 1000\n",
        &default_price(),
    ))
    .await;
    let lock = jam(&gw).await;
    let quick = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let left = quick
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(ALICE)
        .json(&json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await;
    assert!(left.is_err(), "the client gave up while the queue was full");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let account = account(&gw).await;
    assert_eq!(
        account["charged_micro"], 0,
        "the debit came back at once: {account}"
    );
    assert!(account["refunded_micro"].as_i64().unwrap() > 0, "{account}");
    lock.execute_batch("ROLLBACK").unwrap();
    let totals = totals(&gw).await;
    assert_eq!(totals.charged, 0, "the ledger agrees: {totals:?}");
    assert_eq!(totals.refunded, account["refunded_micro"].as_i64().unwrap());
    gw.stop().await;
}

/// B-token-estimate: a request without an output limit from a client whose estimate moves
/// money (a quota) or tokens (`tpm`) is sent upstream with the estimate's limit — the
/// model's `pricing.<model>.max_output` — and precharged that much; a limit the client
/// names is kept, and an unlimited client's body goes up as written.
#[tokio::test]
async fn the_estimates_output_limit_is_sent_for_limited_clients() {
    let mocks = mocks(&["a"]).await;
    let clients = "    quota: 1000\n  bob:\n    key: sk-test-bob\n  carol:\n    key: sk-test-carol\n    limits: {tpm: 1000000}\n";
    let price = format!("{{input: {IN_PRICE}, output: {OUT_PRICE}, max_output: 300}}");
    let gw = start_gw(&yaml(&[("a", 10)], &mocks, clients, &price)).await;
    let ask = |max: Option<u64>| {
        let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        if let Some(n) = max {
            body["max_tokens"] = json!(n);
        }
        body
    };
    let sent = |i: usize| mocks["a"].requests()[i].json().unwrap();
    let cases = [
        (ALICE, None, Some(300)),
        (ALICE, Some(50), Some(50)),
        ("sk-test-carol", None, Some(300)),
        ("sk-test-bob", None, None),
    ];
    for (i, (key, max, want)) in cases.into_iter().enumerate() {
        let response = gw.post("/v1/chat/completions", key, ask(max)).await;
        assert_eq!(response.status(), 200, "{key}");
        let body = sent(i);
        assert_eq!(body["max_tokens"].as_u64(), want, "{key} {max:?}: {body}");
        assert_eq!(body["messages"][0]["content"], "hi", "{body}");
    }
    // A request that names no limit is precharged the bound it is sent: a quota that cannot
    // cover 300 output tokens refuses it, though it covers the 50 the client may name.
    let dear = format!("{{input: {IN_PRICE}, output: 4000, max_output: 300}}");
    let gw2 = start_gw(&yaml(&[("a", 10)], &mocks, "    quota: 1\n", &dear)).await;
    let response = gw2.post("/v1/chat/completions", ALICE, ask(None)).await;
    assert_eq!(
        response.status(),
        402,
        "300 x 4000 micro-credits > 1 credit"
    );
    let response = gw2.post("/v1/chat/completions", ALICE, ask(Some(50))).await;
    assert_eq!(response.status(), 200);
    gw2.stop().await;
    gw.stop().await;
}

/// A chat request whose body goes exactly as written, as the client with `key`.
async fn post_bytes(gw: &Gw, key: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
    gw.http
        .post(format!("{}/v1/chat/completions", gw.base))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("request sent")
}

const CAROL: &str = "sk-test-carol";

/// B-max-tokens-field on a large body: when the upstream model and the renamed limit are its
/// only edits, the body goes out as the client's bytes around the replaced ones (no copy,
/// `upstream::request_body`), and the upstream gets every byte a copy would have made,
/// under an exact Content-Length: on the first attempt, and again on each attempt of a
/// failover (each sends its own). A stream, whose plan edits the body further, is copied
/// and edited as before.
#[tokio::test]
async fn a_large_edited_body_goes_out_byte_for_byte() {
    let mocks = mocks(&["a", "b"]).await;
    let clients = "  carol:\n    key: sk-test-carol\n";
    let fields =
        "    max_tokens_field: max_completion_tokens\n    model_mapping: {m: m-upstream}\n";
    let config = yaml(&[("a", 10), ("b", 5)], &mocks, clients, &default_price())
        .replace("    priority: 10\n", &format!("    priority: 10\n{fields}"))
        .replace("    priority: 5\n", &format!("    priority: 5\n{fields}"));
    let gw = start_gw(&config).await;
    let text = "say \\\"max_tokens\\\": 1, \\\"model\\\":\\\"m\\\" \u{e9}t\u{e9} ".repeat(1500);
    let body = format!(
        r#"{{"model" : "m","max_tokens":64,"messages":[{{"role":"user","content":"{text}"}}],"stream":false}}"#
    );
    assert!(body.len() > 40_000);
    let expected = body
        .replacen("\"max_tokens\"", "\"max_completion_tokens\"", 1)
        .replacen("\"m\"", "\"m-upstream\"", 1);
    let check = |sent: &switchyard_mock::RecordedRequest, what: &str| {
        assert!(
            sent.body == expected.as_bytes(),
            "{what}: the body as a copy would make it"
        );
        let length = sent.headers.iter().find(|(k, _)| k == "content-length");
        assert_eq!(
            length.map(|(_, v)| v.as_str()),
            Some(expected.len().to_string().as_str()),
            "{what}"
        );
    };
    let response = post_bytes(&gw, CAROL, body.clone()).await;
    assert_eq!(response.status(), 200);
    check(&mocks["a"].requests()[0], "first attempt");
    // A failover: `a` refuses every attempt, `b` answers; every attempt sent the same bytes.
    mocks["a"].set_default(Behavior::Status {
        code: 503,
        body: None,
    });
    let response = post_bytes(&gw, CAROL, body.clone()).await;
    assert_eq!(response.status(), 200);
    let retried = mocks["a"].requests();
    assert!(retried.len() >= 2, "a was tried again");
    for (i, sent) in retried.iter().enumerate().skip(1) {
        check(sent, &format!("attempt {i} on a"));
    }
    check(&mocks["b"].requests()[0], "the failover to b");
    // A stream: its plan asks for the usage chunk, so the body is copied and edited further.
    let streamed = body.replace(r#""stream":false"#, r#""stream":true"#);
    let response = post_bytes(&gw, CAROL, streamed).await;
    assert_eq!(response.status(), 200);
    let sent = mocks["b"].requests()[1].json().unwrap();
    assert_eq!(sent["max_completion_tokens"], 64, "{}", sent["model"]);
    assert!(sent.get("max_tokens").is_none());
    assert_eq!(sent["model"], "m-upstream");
    assert_eq!(sent["stream_options"]["include_usage"], true);
    let asked: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        sent["messages"], asked["messages"],
        "the content is untouched"
    );
    gw.stop().await;
}

/// B-token-estimate with B-max-tokens-field: the estimate's limit goes up under the field the
/// channel takes — `max_completion_tokens` where the channel asks for it — so the request
/// carries one limit and is not parsed again to rename it; a client's own `max_tokens` is
/// renamed in place, every other byte kept.
#[tokio::test]
async fn the_estimates_output_limit_goes_under_the_channels_field() {
    let mocks = mocks(&["a"]).await;
    let clients = "  carol:\n    key: sk-test-carol\n    limits: {tpm: 1000000}\n";
    let price = format!("{{input: {IN_PRICE}, output: {OUT_PRICE}, max_output: 300}}");
    let config = yaml(&[("a", 10)], &mocks, clients, &price).replace(
        "    priority: 10\n",
        "    priority: 10\n    max_tokens_field: max_completion_tokens\n    model_mapping: {m: m-upstream}\n",
    );
    let gw = start_gw(&config).await;
    let ask = r#"{"model":"m","messages":[{"role":"user","content":"say \"max_tokens\": 1"}]}"#;
    let with_limit =
        r#"{"max_tokens" : 50,"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    // The limit after the model: the model's rewrite (longer) and the key's rename in one copy.
    let limit_last =
        r#"{"model": "m", "messages":[{"role":"user","content":"hi"}], "max_tokens":7 }"#;
    let cases = [(ask, 300), (with_limit, 50), (limit_last, 7)];
    for (i, (body, want)) in cases.into_iter().enumerate() {
        let response = post_bytes(&gw, CAROL, body).await;
        assert_eq!(response.status(), 200, "{body}");
        let sent = mocks["a"].requests()[i].clone();
        let json = sent.json().unwrap();
        assert_eq!(json["max_completion_tokens"].as_u64(), Some(want), "{json}");
        assert!(json.get("max_tokens").is_none(), "one limit: {json}");
        assert_eq!(json["model"], "m-upstream", "{json}");
        assert_eq!(
            json["messages"][0]["content"],
            serde_json::from_str::<serde_json::Value>(body).unwrap()["messages"][0]["content"],
            "the content is untouched: {json}"
        );
    }
    // A max_tokens that is not a number is no limit: the bound is added, and the body never
    // carries the channel's field twice.
    let odd = r#"{"model":"m","max_tokens":"many","messages":[{"role":"user","content":"hi"}]}"#;
    post_bytes(&gw, CAROL, odd).await;
    let sent = String::from_utf8(mocks["a"].requests()[3].body.to_vec()).unwrap();
    assert_eq!(
        sent.matches("\"max_completion_tokens\"").count(),
        1,
        "{sent}"
    );
    // The client's own limit was renamed in the bytes it sent: nothing else moved.
    for (i, body) in [(1, with_limit), (2, limit_last)] {
        let sent = String::from_utf8(mocks["a"].requests()[i].body.to_vec()).unwrap();
        assert_eq!(
            sent,
            body.replace("\"max_tokens\"", "\"max_completion_tokens\"")
                .replace("\"m\"", "\"m-upstream\""),
            "renamed in place"
        );
    }
    gw.stop().await;
}
