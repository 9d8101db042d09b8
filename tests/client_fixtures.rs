//! The real clients' recorded requests (`tests/fixtures/clients/`, R16.3) replayed through
//! the gateway against each channel kind they can reach — anthropic, openai, an
//! OpenAI-compatible chat-only server, azure, gemini, a DeepSeek thinking server, and an
//! OpenAI channel serving Claude names with gpt-5 — streamed and not, against a mock that
//! validates requests as each provider does; token counting on a group with no Anthropic
//! channel; and failover from a native primary to a translated fallback and back
//! (`composition`).
//!
//! Each test runs every case and fails once, listing every case that failed with the
//! gateway's answer and the mock's refusal, so one run shows the whole picture.
use crate::support;

#[path = "client_fixtures/answer.rs"]
mod answer;
#[path = "client_fixtures/composition.rs"]
mod composition;
#[path = "client_fixtures/fixture.rs"]
mod fixture;

use answer::Reply;
use fixture::{Api, Fixture};
use support::*;
use switchyard_mock::Flavour;

/// One channel kind the fixtures are replayed against.
pub struct Kind {
    pub name: &'static str,
    /// `channels.up.kind`.
    pub kind: &'static str,
    pub flavour: Flavour,
    /// The channel's base URL after `http://ADDR`.
    pub base: &'static str,
    /// Extra channel lines.
    pub extra: &'static str,
    /// Every fixture model served under this upstream name (`model_mapping`).
    pub upstream_model: Option<&'static str>,
}

const ANTHROPIC: Kind = Kind {
    name: "anthropic",
    kind: "anthropic",
    flavour: Flavour::Native,
    base: "/v1",
    extra: "",
    upstream_model: None,
};

const OPENAI: Kind = Kind {
    name: "openai",
    kind: "openai",
    flavour: Flavour::Native,
    base: "/v1",
    extra: "",
    upstream_model: None,
};

/// vLLM / DeepSeek: Chat Completions only, so `/v1/responses` is served through chat.
const CHAT_ONLY: Kind = Kind {
    name: "chat-only",
    kind: "openai",
    flavour: Flavour::ChatOnly,
    base: "/v1",
    extra: "    responses: chat\n",
    upstream_model: None,
};

const AZURE: Kind = Kind {
    name: "azure",
    kind: "azure",
    flavour: Flavour::Native,
    base: "",
    extra: "    api_version: \"2024-10-21\"\n",
    upstream_model: None,
};

const GEMINI: Kind = Kind {
    name: "gemini",
    kind: "gemini",
    flavour: Flavour::Native,
    base: "/v1beta",
    extra: "",
    upstream_model: None,
};

/// A DeepSeek thinking model behind a chat-only server: reasoning goes back as
/// `reasoning_content`.
const DEEPSEEK: Kind = Kind {
    name: "deepseek-thinking",
    kind: "openai",
    flavour: Flavour::DeepseekThinking,
    base: "/v1",
    extra: "    responses: chat\n    reasoning_history: reasoning_content\n",
    upstream_model: Some("deepseek-reasoner"),
};

/// The most common relay: Claude names served by an OpenAI reasoning model.
const GPT5: Kind = Kind {
    name: "openai-gpt5",
    kind: "openai",
    flavour: Flavour::Native,
    base: "/v1",
    extra: "",
    upstream_model: Some("gpt-5.4"),
};

/// The gateway for `kind` with one channel `up` serving every model the fixtures name;
/// `Err` when the gateway refuses the configuration.
async fn gateway(
    kind: &Kind,
    mock: &MockUpstream,
    models: &[String],
    extra: &str,
) -> Result<Gw, String> {
    let list: Vec<String> = models.iter().map(|m| format!("\"{m}\"")).collect();
    let mapping = match kind.upstream_model {
        Some(up) => {
            let pairs: Vec<String> = models.iter().map(|m| format!("\"{m}\": {up}")).collect();
            format!("    model_mapping: {{{}}}\n", pairs.join(", "))
        }
        None => String::new(),
    };
    let yaml = format!(
        "routing:\n  retry_times: 0\nchannels:\n  up:\n    kind: {}\n    base_url: http://{}{}\n    keys: [\"sk-up\"]\n    models: [{}]\n{}{mapping}{CLIENTS}",
        kind.kind,
        mock.addr(),
        kind.base,
        list.join(", "),
        extra,
    );
    try_start_gw(&yaml).await
}

/// Every model the fixtures name.
fn models(fixtures: &[Fixture]) -> Vec<String> {
    let mut models: Vec<String> = fixtures.iter().filter_map(Fixture::model).collect();
    models.sort();
    models.dedup();
    models
}

/// Replays one fixture with `stream` (`None`: as recorded) and checks the answer and what
/// the mock received.
async fn replay(
    gw: &Gw,
    mock: &MockUpstream,
    kind: &Kind,
    f: &Fixture,
    stream: Option<bool>,
) -> Result<(), String> {
    mock.reset();
    let api = f.api();
    let body = match stream {
        Some(on) => f.body_streaming(on),
        None => f.body.clone(),
    };
    let streams = stream.unwrap_or_else(|| f.streams());
    let reply = Reply::read(f.send(gw, body).await, mock).await;
    let (status, detail) = (reply.status, || reply.detail());
    let want = if api == Api::Upgrade { 426 } else { 200 };
    if status != want {
        return Err(format!("want {want}, got {}", detail()));
    }
    if api == Api::Upgrade || api == Api::Probe {
        return match mock.calls() {
            0 => Ok(()),
            n => Err(format!("answered locally, yet {n} upstream calls")),
        };
    }
    answer::check(api, streams, &reply.ctype, &reply.text)
        .map_err(|e| format!("{e} | {}", detail()))?;
    let local_count = api == Api::CountTokens && kind.kind != "anthropic";
    let reqs = mock.requests();
    match (local_count, reqs.last()) {
        (true, None) => Ok(()),
        (true, Some(_)) => Err(format!("count_tokens made {} upstream calls", reqs.len())),
        (false, None) => Err("no upstream request".into()),
        (false, Some(q)) if q.refusal.is_some() => {
            Err(format!("answered after a refused request: {}", detail()))
        }
        (false, Some(_)) => Ok(()),
    }
}

/// Every fixture of `apis` on `kind`, as recorded and with `stream` flipped.
async fn replay_all(kind: &Kind, apis: &[Api]) {
    let fixtures: Vec<Fixture> = fixture::all()
        .into_iter()
        .filter(|f| apis.contains(&f.api()))
        .collect();
    let mock = MockUpstream::start().await.expect("mock starts");
    mock.set_flavour(kind.flavour);
    let models = models(&fixture::all());
    let mut failed = Vec::new();
    let gw = match gateway(kind, &mock, &models, kind.extra).await {
        Ok(gw) => gw,
        // A channel option the gateway does not know yet: the rest runs without it.
        Err(e) if !kind.extra.is_empty() => {
            failed.push(format!(
                "{}: channel options {:?}: {e}",
                kind.name, kind.extra
            ));
            gateway(kind, &mock, &models, "")
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", kind.name))
        }
        Err(e) => panic!("{}: {e}", kind.name),
    };
    let mut passed = 0;
    for f in &fixtures {
        let flips: &[Option<bool>] = match f.api() {
            Api::Messages | Api::Chat | Api::Responses => &[None, Some(!f.streams())],
            _ => &[None],
        };
        for s in flips {
            let label = format!(
                "{} {} ({}) stream={}",
                kind.name,
                f.file,
                f.client,
                s.unwrap_or_else(|| f.streams())
            );
            match replay(&gw, &mock, kind, f, *s).await {
                Ok(()) => passed += 1,
                Err(e) => failed.push(format!("{label}: {e}")),
            }
        }
    }
    gw.stop().await;
    assert!(
        failed.is_empty(),
        "{} of {} cases failed on {}:\n{}",
        failed.len(),
        failed.len() + passed,
        kind.name,
        failed.join("\n")
    );
}

const EVERY: &[Api] = &[
    Api::Messages,
    Api::CountTokens,
    Api::Chat,
    Api::Responses,
    Api::Probe,
    Api::Upgrade,
];

#[tokio::test]
async fn fixtures_on_an_anthropic_channel() {
    replay_all(&ANTHROPIC, EVERY).await;
}

#[tokio::test]
async fn fixtures_on_an_openai_channel() {
    replay_all(&OPENAI, EVERY).await;
}

#[tokio::test]
async fn fixtures_on_a_chat_only_channel() {
    replay_all(&CHAT_ONLY, EVERY).await;
}

#[tokio::test]
async fn fixtures_on_an_azure_channel() {
    replay_all(&AZURE, EVERY).await;
}

#[tokio::test]
async fn fixtures_on_a_gemini_channel() {
    replay_all(&GEMINI, EVERY).await;
}

/// Claude Code's and aider's Anthropic requests on a DeepSeek thinking model: the thinking of
/// the tool loop goes back as `reasoning_content`, never as a fake signature.
#[tokio::test]
async fn anthropic_clients_on_a_deepseek_thinking_channel() {
    replay_all(&DEEPSEEK, &[Api::Messages, Api::CountTokens]).await;
}

/// Claude names mapped to gpt-5.4: the output limit goes as `max_completion_tokens`.
#[tokio::test]
async fn anthropic_clients_on_a_gpt5_channel() {
    replay_all(&GPT5, &[Api::Messages, Api::CountTokens]).await;
}

/// `/context` on a group with no Anthropic channel: Anthropic's shape from a local estimate,
/// no upstream call, nothing charged.
#[tokio::test]
async fn count_tokens_without_an_anthropic_channel_is_local() {
    let fixture = fixture::named("claude-code-count-tokens.json");
    let mock = MockUpstream::start().await.expect("mock starts");
    let gw = gateway(
        &OPENAI,
        &mock,
        &models(&[fixture::named("claude-code-count-tokens.json")]),
        "",
    )
    .await
    .expect("gateway starts");
    let response = fixture.send(&gw, fixture.body.clone()).await;
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.expect("JSON");
    assert!(
        body["input_tokens"].as_u64().is_some_and(|n| n > 0),
        "{body}"
    );
    assert_eq!(mock.calls(), 0, "no upstream call");
    let (_, c) = gw.admin_get("/admin/clients/alice").await;
    assert_eq!(
        c["charged_micro"].as_i64().unwrap_or(0),
        0,
        "nothing charged: {c}"
    );
    gw.stop().await;
}
