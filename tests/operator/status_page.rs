//! The live status page (R20.2): `GET /status` and `/status.json` on the admin listener,
//! behind the admin token or the read-only `admin.status_token`, showing an open breaker, a
//! disabled channel, recent rates and the client's hour — over real sockets, then in a real
//! browser (headless Chromium) that renders the page, with a screenshot saved under the
//! test's output directory.

use std::time::Duration;

use serde_json::Value;
use switchyard::app::start;

use super::support::*;

const STATUS_TOKEN: &str = "test-status-token";

/// `flaky` answers 500 and opens its breaker after two failures; `parked` is disabled by the
/// operator; `steady` answers.
fn body(mocks: &std::collections::HashMap<String, MockUpstream>) -> String {
    fill(
        &format!(
            "resilience:\n  retry:\n    max_retries: 0\n  circuit_breaker:\n    failure_threshold: 2\n    success_threshold: 1\n    timeout: 120s\nchannels:\n{}{}{}clients:\n  alice:\n    key: {ALICE}\n    quota: 100\n    limits:\n      rpm: 50\n",
            channel("flaky", "{flaky}", 10, &["m"]),
            channel("parked", "{parked}", 5, &["m"]),
            channel("steady", "{steady}", 0, &["m"]),
        ),
        mocks,
    )
}

/// A gateway whose admin block also has `status_token`.
async fn start_with_status_token(body: &str) -> Gw {
    let dir = tempfile::tempdir().expect("tempdir");
    let config_path = dir.path().join("switchyard.yaml");
    let token_line = format!("  token: {ADMIN_TOKEN}\n");
    let head = head(dir.path()).replace(
        &token_line,
        &format!("{token_line}  status_token: {STATUS_TOKEN}\n"),
    );
    assert!(head.contains(STATUS_TOKEN), "the head changed: {head}");
    std::fs::write(&config_path, format!("{head}{body}")).expect("write config");
    let running = start(&config_path).await.expect("gateway starts");
    Gw {
        base: format!("http://{}", running.bound.listen),
        admin: format!("http://{}", running.bound.admin),
        running: Some(running),
        dir,
        config_path,
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client"),
    }
}

/// Open `flaky`'s breaker and disable `parked`; every request is answered by `steady`.
async fn cause_trouble(gw: &Gw) {
    let status = gw
        .admin_post("/admin/channels/parked/disable?reason=maintenance+window")
        .await;
    assert_eq!(status, 200);
    for _ in 0..3 {
        let response = gw.chat("m", false).await;
        assert_eq!(response.status(), 200);
    }
}

async fn status_json(gw: &Gw, token: &str) -> Value {
    let response = gw
        .http
        .get(format!("{}/status.json", gw.admin))
        .bearer_auth(token)
        .send()
        .await
        .expect("status.json");
    assert_eq!(response.status(), 200);
    response.json().await.expect("status JSON")
}

fn channel_of<'a>(status: &'a Value, name: &str) -> &'a Value {
    status["channels"]
        .as_array()
        .and_then(|a| a.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no channel {name} in {status}"))
}

#[tokio::test]
async fn the_status_json_shows_an_open_breaker_a_disabled_channel_and_recent_numbers() {
    let mocks = mocks(&["flaky", "parked", "steady"]).await;
    mocks["flaky"].set_default(Behavior::Status {
        code: 500,
        body: None,
    });
    let gw = start_with_status_token(&body(&mocks)).await;
    cause_trouble(&gw).await;
    let status = status_json(&gw, STATUS_TOKEN).await;

    let flaky = channel_of(&status, "flaky");
    let breaker = &flaky["health"]["breaker"];
    assert_eq!(breaker["state"], "open", "{flaky}");
    let left = breaker["open_remaining_ms"].as_u64().unwrap_or(0);
    assert!(left > 100_000 && left <= 120_000, "{flaky}");
    assert_eq!(
        flaky["recent"]["attempts"], 2,
        "the third request skipped it: {flaky}"
    );
    assert_eq!(flaky["recent"]["errors"], 2, "{flaky}");
    assert_eq!(flaky["recent"]["error_rate"], 1.0, "{flaky}");
    assert_eq!(flaky["recent"]["last_error"]["status"], 500, "{flaky}");
    assert_eq!(
        flaky["recent"]["last_error"]["class"], "http_5xx",
        "{flaky}"
    );
    assert!(flaky["recent"]["last_success_ms"].is_null(), "{flaky}");

    let parked = channel_of(&status, "parked");
    assert_eq!(parked["enabled"], false, "{parked}");
    assert_eq!(
        parked["disabled"]["reason"], "disabled by operator: maintenance window",
        "{parked}"
    );
    assert_eq!(
        parked["recent"]["attempts"], 0,
        "a disabled channel is never called"
    );

    let steady = channel_of(&status, "steady");
    assert_eq!(steady["enabled"], true);
    assert_eq!(steady["health"]["breaker"]["state"], "closed");
    assert_eq!(steady["recent"]["attempts"], 3, "{steady}");
    assert_eq!(steady["recent"]["errors"], 0, "{steady}");
    assert!(
        steady["recent"]["latency_p95_ms"].as_u64().is_some(),
        "{steady}"
    );
    assert!(
        steady["recent"]["ttfb_p50_ms"].as_u64().is_some(),
        "{steady}"
    );
    assert!(steady["recent"]["last_success_ms"].as_i64().is_some());

    let alice = &status["clients"][0];
    assert_eq!(alice["name"], "alice");
    assert_eq!(alice["last_hour"]["requests"], 3, "{alice}");
    assert_eq!(alice["last_hour"]["errors"], 0, "{alice}");
    assert!(
        alice["last_hour"]["tokens"].as_u64().unwrap_or(0) > 0,
        "{alice}"
    );
    assert_eq!(alice["quota"], 100, "{alice}");
    assert_eq!(alice["limits"]["rpm"]["limit"], 50, "{alice}");
    assert_eq!(alice["limits"]["rpm"]["used"], 3, "{alice}");

    assert_eq!(status["generation"], 1);
    assert_eq!(status["config"]["last_reload"]["result"], "ok");
    assert_eq!(status["shared_state"]["redis"], "off");
    assert_eq!(status["shared_state"]["storage"], "sqlite");
    gw.stop().await;
}

#[tokio::test]
async fn the_status_routes_take_the_status_token_which_opens_nothing_else() {
    let mocks = mocks(&["flaky", "parked", "steady"]).await;
    let gw = start_with_status_token(&body(&mocks)).await;
    for (method, path) in switchyard::admin::status::ROUTES {
        assert_eq!(*method, "GET");
        let url = format!("{}{}", gw.admin, path);
        for token in [None, Some("wrong-token"), Some(ALICE), Some("")] {
            let mut rq = gw.http.get(&url);
            if let Some(t) = token {
                rq = rq.bearer_auth(t);
            }
            let response = rq.send().await.expect("sent");
            assert_eq!(response.status(), 401, "{path} with {token:?}");
        }
        for token in [STATUS_TOKEN, ADMIN_TOKEN] {
            let response = gw
                .http
                .get(&url)
                .bearer_auth(token)
                .send()
                .await
                .expect("sent");
            assert_eq!(response.status(), 200, "{path} with {token}");
        }
        let response = gw
            .http
            .get(format!("{url}?token={STATUS_TOKEN}"))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200, "{path} with ?token=");
    }
    let response = gw
        .http
        .get(format!("{}/admin/channels", gw.admin))
        .bearer_auth(STATUS_TOKEN)
        .send()
        .await
        .expect("sent");
    assert_eq!(
        response.status(),
        401,
        "the status token is read-only: no /admin/*"
    );

    let response = gw
        .http
        .get(format!("{}/status", gw.admin))
        .bearer_auth(STATUS_TOKEN)
        .send()
        .await
        .expect("sent");
    let header = |n: &str| {
        response
            .headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    assert_eq!(header("referrer-policy"), "no-referrer");
    assert!(header("content-security-policy").contains("default-src 'none'"));
    let html = response.text().await.expect("html");
    assert!(html.contains("<script id=\"initial\" type=\"application/json\">{"));
    assert!(!html.contains("__STATUS_JSON__") && !html.contains("__REFRESH_MS__"));
    assert!(!html.contains("sk-up-"), "no upstream key on the page");
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "no external asset"
    );
    gw.stop().await;
}

/// A channel name with markup stays text: the inlined JSON cannot close its script element.
#[tokio::test]
async fn a_hostile_reason_cannot_break_out_of_the_inlined_json() {
    let mocks = mocks(&["flaky", "parked", "steady"]).await;
    let gw = start_with_status_token(&body(&mocks)).await;
    let status = gw
        .admin_post("/admin/channels/parked/disable?reason=%3C%2Fscript%3E%3Cscript%3Ealert(1)%3C%2Fscript%3E")
        .await;
    assert_eq!(status, 200);
    let html = gw
        .http
        .get(format!("{}/status?token={STATUS_TOKEN}", gw.admin))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("html");
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "only the page's own: {html}"
    );
    assert!(
        html.contains("\\u003c/script>\\u003cscript>alert(1)"),
        "{html}"
    );
    gw.stop().await;
}

/// The page in a real browser: headless Chromium renders the tables from the inlined JSON;
/// the DOM shows the open breaker and the disabled channel, and a screenshot is kept.
#[tokio::test]
async fn chromium_renders_the_open_breaker_and_the_disabled_channel() {
    let Some(chromium) = chromium() else {
        return;
    };
    let mocks = mocks(&["flaky", "parked", "steady"]).await;
    mocks["flaky"].set_default(Behavior::Status {
        code: 500,
        body: None,
    });
    let gw = start_with_status_token(&body(&mocks)).await;
    cause_trouble(&gw).await;
    let url = format!("{}/status?token={STATUS_TOKEN}", gw.admin);
    let profile = tempfile::tempdir().expect("profile dir");
    let dom = run_chromium(&chromium, profile.path(), &["--dump-dom", &url]).await;
    let flaky = row(&dom, "flaky");
    assert!(flaky.contains("data-field=\"breaker\">open ("), "{flaky}");
    assert!(flaky.contains("s left)"), "{flaky}");
    assert!(flaky.contains("http_5xx 500, "), "the last error: {flaky}");
    let parked = row(&dom, "parked");
    assert!(
        parked.contains("disabled: disabled by operator: maintenance window"),
        "{parked}"
    );
    let steady = row(&dom, "steady");
    assert!(steady.contains("data-field=\"state\">enabled<"), "{steady}");
    assert!(
        steady.contains("data-field=\"breaker\">closed<"),
        "{steady}"
    );
    assert!(dom.contains("data-client=\"alice\""), "{dom}");
    assert!(dom.contains("config generation 1"), "{dom}");

    let out = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("status_page");
    std::fs::create_dir_all(&out).expect("output dir");
    let png = out.join("status.png");
    let _ = std::fs::remove_file(&png);
    let shot = format!("--screenshot={}", png.display());
    run_chromium(
        &chromium,
        profile.path(),
        &[&shot, "--window-size=1500,620", "--hide-scrollbars", &url],
    )
    .await;
    let bytes = std::fs::read(&png).expect("screenshot written");
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "a real PNG"
    );
    println!("status page screenshot: {}", png.display());
    gw.stop().await;
}

/// The Chromium binary, or None (printed why) when it is missing outside CI; in CI its
/// absence fails the test (`.ci/run` installs it).
fn chromium() -> Option<String> {
    let found = ["chromium", "chromium-browser"].into_iter().find(|b| {
        std::process::Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        assert!(
            std::env::var("CI").is_err(),
            "CI is set and `chromium --version` does not run (not installed, or broken): \
             .ci/run installs it with apt-get; its \"system packages\" section says why it could not"
        );
        eprintln!("skipping the browser test: chromium is not installed and CI is not set");
    }
    found.map(str::to_string)
}

async fn run_chromium(bin: &str, profile: &std::path::Path, args: &[&str]) -> String {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
    ])
    .arg("--no-first-run")
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(args)
    .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(90), cmd.output())
        .await
        .expect("chromium finishes within 90 s")
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The rendered table row of channel `name`.
fn row<'a>(dom: &'a str, name: &str) -> &'a str {
    let start = dom
        .find(&format!("data-channel=\"{name}\""))
        .unwrap_or_else(|| panic!("no row for {name} in the DOM:\n{dom}"));
    let end = dom[start..].find("</tr>").map_or(dom.len(), |e| start + e);
    &dom[start..end]
}
