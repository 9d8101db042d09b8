//! Failover across a translation (R16.2, R16.3): a native primary that fails —
//! 529, 503, a stream cut before content, an error event right after the preamble, a header
//! hang, a first-byte hang — hands the request to a translated fallback, and the client gets
//! the fallback's answer in its own format; with an Anthropic primary and an OpenAI fallback
//! (Claude Code's and the anthropic SDK's requests) and the reverse (OpenCode's and the
//! openai SDK's).
use std::time::Duration;

use super::answer::{self, Reply};
use super::fixture::{self, Fixture};
use super::support::*;
use switchyard_mock::DEFAULT_CHUNKS;

/// The primary's failures; `true` when the fault exists only for streams.
fn faults() -> Vec<(&'static str, Behavior, bool)> {
    let long = Duration::from_secs(30);
    vec![
        (
            "529",
            Behavior::Status {
                code: 529,
                body: None,
            },
            false,
        ),
        (
            "503",
            Behavior::Status {
                code: 503,
                body: None,
            },
            false,
        ),
        (
            "cut before content",
            Behavior::CutMidStream { after_chunks: 0 },
            true,
        ),
        (
            "error after preamble",
            Behavior::ErrorAfterStart { code: 529 },
            true,
        ),
        ("header hang", Behavior::HangBeforeHeaders(long), false),
        ("first-byte hang", Behavior::StallAfterHeaders(long), false),
    ]
}

fn mock_text() -> String {
    (0..DEFAULT_CHUNKS).map(|i| format!("chunk {i} ")).collect()
}

/// One gateway runs every case: the primary fails on purpose in each, so its breaker must
/// not open, and a session's binding to the fallback (written after each successful
/// failover, R8.3; Claude Code's session header matches a default rule) must be gone by the
/// next case — either would plan the primary out, and
/// the case would not test the failover.
const KEEP_CLOSED: &str = "resilience:\n  circuit_breaker:\n    failure_threshold: 100000\naffinity:\n  rules: []\n  sticky: {conversation_ttl: 1ms, session_ttl: 1ms, user_model_ttl: 1ms, bucket_ttl: 1ms}\n";

/// Channels `primary` (kind `first`, priority 10) and `fallback` (kind `second`), both
/// serving the fixtures' models, with short gates.
async fn pair(first: &str, second: &str, models: &[String]) -> (Gw, MockUpstream, MockUpstream) {
    let primary = MockUpstream::start().await.expect("mock");
    let fallback = MockUpstream::start().await.expect("mock");
    primary.set_name("primary");
    fallback.set_name("fallback");
    let list: Vec<String> = models.iter().map(|m| format!("\"{m}\"")).collect();
    let ch = |name: &str, kind: &str, url: String, prio: i64| {
        format!(
            "  {name}:\n    kind: {kind}\n    base_url: {url}\n    keys: [\"sk-{name}\"]\n    models: [{}]\n    priority: {prio}\n",
            list.join(", ")
        )
    };
    let yaml = format!(
        "timeouts:\n  upstream_header: 1s\n  first_byte: 1s\n  non_stream: 2s\nrouting:\n  retry_times: 3\n{KEEP_CLOSED}channels:\n{}{}{CLIENTS}",
        ch("primary", first, primary.base_url(), 10),
        ch("fallback", second, fallback.base_url(), 0),
    );
    (start_gw(&yaml).await, primary, fallback)
}

/// Every fault × stream on and off × each fixture; the failures listed.
async fn run(first: &str, second: &str, files: &[&str]) {
    let fixtures: Vec<Fixture> = files.iter().map(|f| fixture::named(f)).collect();
    let models: Vec<String> = fixtures.iter().filter_map(Fixture::model).collect();
    let (gw, primary, fallback) = pair(first, second, &models).await;
    let mut failed = Vec::new();
    let mut passed = 0;
    for f in &fixtures {
        for (name, fault, stream_only) in faults() {
            for stream in [true, false] {
                if stream_only && !stream {
                    continue;
                }
                // Past the 1 ms binding TTL of the previous case (see KEEP_CLOSED).
                tokio::time::sleep(Duration::from_millis(5)).await;
                primary.reset();
                fallback.reset();
                primary.set_default(fault.clone());
                let label = format!("{first}->{second} {} {name} stream={stream}", f.file);
                match one(&gw, &primary, &fallback, f, stream).await {
                    Ok(()) => passed += 1,
                    Err(e) => failed.push(format!("{label}: {e}")),
                }
            }
        }
    }
    gw.stop().await;
    assert!(
        failed.is_empty(),
        "{} of {} composition cases failed:\n{}",
        failed.len(),
        failed.len() + passed,
        failed.join("\n")
    );
}

async fn one(
    gw: &Gw,
    primary: &MockUpstream,
    fallback: &MockUpstream,
    f: &Fixture,
    stream: bool,
) -> Result<(), String> {
    let api = f.api();
    let reply = Reply::read(f.send(gw, f.body_streaming(stream)).await, fallback).await;
    let detail = reply.detail();
    let (status, route, ctype, text) = (reply.status, &reply.route, &reply.ctype, &reply.text);
    if status != 200 || route != "primary->fallback" {
        return Err(format!("want 200 via primary->fallback, got {detail}"));
    }
    answer::check(api, stream, ctype, text).map_err(|e| format!("{e} | {detail}"))?;
    if answer::text_of(api, stream, text) != mock_text() {
        return Err(format!("not the fallback's text: {detail}"));
    }
    if primary.calls() == 0
        || fallback
            .requests()
            .last()
            .is_none_or(|q| q.refusal.is_some())
    {
        return Err(format!(
            "primary {} calls, fallback {detail}",
            primary.calls()
        ));
    }
    Ok(())
}

#[tokio::test]
async fn anthropic_primary_fails_over_to_a_translated_openai_fallback() {
    run(
        "anthropic",
        "openai",
        &[
            "anthropic-python-messages-plain.json",
            "claude-code-haiku-first-request.json",
            "claude-code-opus-first-request.json",
        ],
    )
    .await;
}

#[tokio::test]
async fn openai_primary_fails_over_to_a_translated_anthropic_fallback() {
    run(
        "openai",
        "anthropic",
        &[
            "openai-python-chat-plain.json",
            "opencode-chat-claude-cache-control.json",
        ],
    )
    .await;
}

/// The same faults with both channels native: the baseline the translated runs compose with.
#[tokio::test]
async fn native_failover_baseline() {
    run(
        "anthropic",
        "anthropic",
        &["anthropic-python-messages-plain.json"],
    )
    .await;
    run("openai", "openai", &["openai-python-chat-plain.json"]).await;
}
