//! Metrics tell the truth (R12.2): after a short scripted run, every
//! metric and label that `examples/grafana-dashboard.json` queries exists, and so does every
//! row of README's metrics table with the labels it lists, each with HELP text; series whose
//! label values are known at start are exported at 0 from the first scrape.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::support::*;
use serde_json::json;

/// metric name → the label names seen on its series (an empty set for a series without).
type Series = BTreeMap<String, Vec<BTreeMap<String, String>>>;

fn parse(text: &str) -> (Series, BTreeSet<String>) {
    let mut series = Series::new();
    let mut help = BTreeSet::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help.insert(rest.split_whitespace().next().unwrap_or("").to_string());
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (head, _value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = match head.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (head, ""),
        };
        let mut set = BTreeMap::new();
        for kv in labels.split("\",").filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once("=\"").unwrap();
            set.insert(k.to_string(), v.trim_end_matches('"').to_string());
        }
        series.entry(name.to_string()).or_default().push(set);
    }
    (series, help)
}

/// The value of one exact series line, if present.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{series} ")))
        .map(|v| v.trim().parse().unwrap())
}

fn words(re: &str, text: &str) -> Vec<String> {
    let re = regex::Regex::new(re).unwrap();
    re.captures_iter(text).map(|c| c[1].to_string()).collect()
}

/// (metric names, label names) one dashboard expression and its legend use.
fn used(expr: &str, legend: &str) -> (Vec<String>, BTreeSet<String>) {
    let metrics = words(r"(switchyard_[a-z_]+)", expr);
    let mut labels = BTreeSet::new();
    for by in words(r"by \(([^)]*)\)", expr) {
        labels.extend(by.split(',').map(|l| l.trim().to_string()));
    }
    labels.extend(words(r"[{,]\s*([a-z_]+)\s*=~?", expr));
    labels.extend(words(r"\{\{\s*([a-z_]+)\s*\}\}", legend));
    labels.remove("le");
    (metrics, labels)
}

/// The `base` name of a histogram series (`_bucket`, `_sum`, `_count`) or the name itself.
fn family(series: &Series, name: &str) -> Option<String> {
    if series.contains_key(name) {
        return Some(name.to_string());
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .filter(|b| series.contains_key(&format!("{b}_bucket")))
        .map(|b| format!("{b}_bucket"))
}

fn has_labels(series: &Series, name: &str, labels: &BTreeSet<String>) -> bool {
    series[name]
        .iter()
        .any(|s| labels.iter().all(|l| s.contains_key(l)))
}

/// The scripted run's channels.
const A: &str = "truth_a";
const B: &str = "truth_b";

async fn scripted_run() -> (Gw, String) {
    // Channel names of this test's own: `cargo test` (without nextest) runs every
    // in-process gateway of the suite under one metrics recorder, and the exact counts
    // below must not take in another test's failovers.
    let mocks = mocks(&[A, B]).await;
    let yaml = fill(
        &format!(
            "auto_disable: {{probe_interval: 500ms}}\nchannels:\n{}{}clients:\n  alice: {{key: {ALICE}, quota: 100000000}}\n  bob: {{key: sk-test-bob, quota: 1}}\npricing:\n  m: {{input: 1000000, output: 1000000}}\n",
            channel(A, &format!("{{{A}}}"), 10, &["m"]),
            channel(B, &format!("{{{B}}}"), 0, &["m"]),
        ),
        &mocks,
    );
    let gw = start_gw(&yaml).await;
    assert_eq!(gw.chat("m", false).await.status(), 200);
    let response = gw.chat("m", true).await;
    assert_eq!(response.status(), 200);
    let _ = response.text().await;
    mocks[A].push(Behavior::Status {
        code: 503,
        body: None,
    });
    assert_eq!(gw.chat("m", false).await.status(), 200, "failed over to b");
    for up in [A, B] {
        mocks[up].push(Behavior::Status {
            code: 500,
            body: None,
        });
    }
    assert!(
        gw.chat("m", false).await.status().is_server_error(),
        "refunded"
    );
    let response = gw
        .post(
            "/v1/chat/completions",
            "sk-test-bob",
            json!({"model": "m", "messages": []}),
        )
        .await;
    assert_eq!(response.status(), 402, "bob is over quota");
    tokio::time::sleep(Duration::from_millis(1200)).await; // a probe round
    let text = gw.metrics().await;
    (gw, text)
}

#[tokio::test]
async fn every_series_the_dashboard_and_readme_use_exists() {
    let (gw, text) = scripted_run().await;
    let (series, help) = parse(&text);
    let dash: serde_json::Value =
        serde_json::from_str(include_str!("../../examples/grafana-dashboard.json")).unwrap();
    let mut queries: Vec<(String, String)> = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_default().to_string();
            queries.push((expr, t["legendFormat"].as_str().unwrap_or("").to_string()));
        }
    }
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["definition"].as_str() {
            // label_values(metric, label)
            let inner = q.trim_start_matches("label_values(").trim_end_matches(')');
            let (metric, label) = inner.split_once(',').unwrap();
            queries.push((
                format!("{metric}{{{}=~\"x\"}}", label.trim()),
                String::new(),
            ));
        }
    }
    assert!(queries.len() > 20, "dashboard read: {}", queries.len());
    let mut problems = Vec::new();
    for (expr, legend) in &queries {
        let (metrics, labels) = used(expr, legend);
        assert!(!metrics.is_empty(), "{expr}");
        for name in metrics {
            match family(&series, &name) {
                None => problems.push(format!("{name} does not exist ({expr})")),
                Some(f) if !has_labels(&series, &f, &labels) => problems.push(format!(
                    "{name} has no series with labels {labels:?} ({expr})"
                )),
                Some(f) => {
                    let base = f.trim_end_matches("_bucket");
                    if !help.contains(base) && !help.contains(&f) {
                        problems.push(format!("{name} has no HELP text"));
                    }
                }
            }
        }
    }
    // README's metrics table: each row's metric exists with the labels it lists.
    let readme = include_str!("../../README.md");
    let table = readme.split("| metric | type | labels |").nth(1).unwrap();
    let parens = regex::Regex::new(r"\([^)]*\)").unwrap();
    for row in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        // `channel`, `outcome` (`success`, …): the names outside the parentheses.
        let names = parens.replace_all(cells[3], "");
        let labels: BTreeSet<String> = words(r"`([a-z_]+)`", &names).into_iter().collect();
        match family(&series, name).or_else(|| family(&series, &format!("{name}_bucket"))) {
            None => problems.push(format!("README lists {name}, which does not exist")),
            Some(f) if !has_labels(&series, &f, &labels) => problems.push(format!(
                "README: {name} has no series with labels {labels:?}"
            )),
            Some(_) if !help.contains(name) => problems.push(format!("{name} has no HELP text")),
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "{}\n\n{text}", problems.join("\n"));
    // The labels carry what their legends say.
    assert_eq!(
        value(
            &text,
            &format!("switchyard_failovers_total{{from=\"{A}\",to=\"{B}\"}}")
        ),
        Some(2.0)
    );
    assert!(value(&text, "switchyard_quota_rejected_total{client=\"bob\"}").unwrap() >= 1.0);
    assert!(
        value(
            &text,
            "switchyard_quota_charged_credits_total{client=\"alice\"}"
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        value(
            &text,
            "switchyard_quota_refunded_credits_total{client=\"alice\"}"
        )
        .unwrap()
            >= 1.0
    );
    assert!(
        value(
            &text,
            &format!("switchyard_probes_total{{channel=\"{B}\",result=\"ok\"}}")
        )
        .unwrap()
            >= 1.0
    );
    gw.stop().await;
}

#[tokio::test]
async fn series_known_at_start_are_exported_at_zero() {
    let mocks = mocks(&["z", "zc"]).await;
    let body = |extra: &str| {
        fill(
            &format!(
                "channels:\n{}{extra}clients:\n  zoe: {{key: {ALICE}, quota: 10}}\n",
                channel("z", "{z}", 0, &["m"])
            ),
            &mocks,
        )
    };
    let gw = start_gw(&body("")).await;
    let text = gw.metrics().await;
    let zero = |text: &str, s: &str| {
        assert_eq!(value(text, s), Some(0.0), "{s} not exported at 0:\n{text}");
    };
    for outcome in switchyard::telemetry::ATTEMPT_OUTCOMES {
        zero(
            &text,
            &format!("switchyard_attempts_total{{channel=\"z\",outcome=\"{outcome}\"}}"),
        );
    }
    // (Reload results at 0: `reload_status`, in a process of its own.)
    for r in ["ok", "failed", "reenabled"] {
        zero(
            &text,
            &format!("switchyard_probes_total{{channel=\"z\",result=\"{r}\"}}"),
        );
    }
    for s in [
        "switchyard_circuit_breaker_state{channel=\"z\"}",
        "switchyard_channel_disabled{channel=\"z\"}",
        "switchyard_retries_total{channel=\"z\"}",
        "switchyard_quota_rejected_total{client=\"zoe\"}",
        "switchyard_quota_charged_credits_total{client=\"zoe\"}",
        "switchyard_requests_total{status=\"other\"}",
        "switchyard_streams_total{outcome=\"incomplete\"}",
    ] {
        zero(&text, s);
    }
    // A channel added by a reload is exported at 0 as soon as it is live.
    gw.rewrite(&body(&channel("zc", "{zc}", 0, &["m"])));
    assert!(gw.wait_generation(2).await);
    let text = gw.metrics().await;
    zero(
        &text,
        "switchyard_attempts_total{channel=\"zc\",outcome=\"http_5xx\"}",
    );
    zero(&text, "switchyard_circuit_breaker_state{channel=\"zc\"}");
    gw.stop().await;
}
