//! The fixture format and its runner. A fixture file opens with `#` lines naming the public
//! reference its bodies were written from; then cases:
//!
//! ```text
//! === <request|answer|stream|error> <from> -> <to> [option ...] | <name>
//! --- input
//! <JSON body, or SSE text>
//! --- expect [status]
//! <JSON body, or SSE text>
//! ```
//!
//! Instead of `--- expect`: `--- refuse <field path>` (a request the target cannot express)
//! or `--- error <status> <type>` (an answer that is an error for the client).
//! Options: `include_usage`, `status=<n>`, `model=<name>`, `keep_parts` (text parts are not
//! joined for OpenAI), `reasoning=content|drop` (`RequestOptions::reasoning_history`),
//! `dropped=<a,b,...>` (the fields the translation must report as dropped, in any order;
//! without it none may be reported).

use serde_json::Value;

use super::super::{
    translate_answer, translate_error, translate_request, AnswerOptions, ReasoningHistory,
    RequestOptions, StreamTranslator, WireFormat,
};

pub struct Case {
    pub name: String,
    pub kind: String,
    pub from: WireFormat,
    pub to: WireFormat,
    pub opts: Vec<String>,
    pub input: String,
    /// (section header words after `---`, body)
    pub outcome: (Vec<String>, String),
}

fn format(s: &str) -> WireFormat {
    match s {
        "openai" => WireFormat::OpenAi,
        "anthropic" => WireFormat::Anthropic,
        "gemini" => WireFormat::Gemini,
        other => panic!("unknown format {other}"),
    }
}

pub fn cases(text: &str) -> Vec<Case> {
    let mut out = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(header) = line.strip_prefix("=== ") else {
            continue;
        };
        let (spec, name) = header.split_once(" | ").expect("header needs ` | name`");
        let words: Vec<&str> = spec.split_whitespace().collect();
        assert_eq!(words[2], "->", "{header}");
        let mut sections: Vec<(Vec<String>, String)> = Vec::new();
        while let Some(l) = lines.peek() {
            if l.starts_with("=== ") {
                break;
            }
            let line = lines.next().unwrap_or_default();
            if let Some(sec) = line.strip_prefix("--- ") {
                sections.push((
                    sec.split_whitespace().map(str::to_string).collect(),
                    String::new(),
                ));
            } else if let Some((_, body)) = sections.last_mut() {
                body.push_str(line);
                body.push('\n');
            }
        }
        let mut sections = sections.into_iter();
        let (h, input) = sections.next().expect("input section");
        assert_eq!(h[0], "input", "{name}");
        out.push(Case {
            name: name.to_string(),
            kind: words[0].to_string(),
            from: format(words[1]),
            to: format(words[3]),
            opts: words[4..].iter().map(|s| s.to_string()).collect(),
            input,
            outcome: sections.next().expect("outcome section"),
        });
    }
    out
}

impl Case {
    fn opt(&self, key: &str) -> Option<&str> {
        self.opts.iter().find_map(|o| {
            o.strip_prefix(key)
                .and_then(|r| r.strip_prefix('='))
                .or_else(|| (o == key).then_some(""))
        })
    }

    pub fn answer_options(&self) -> AnswerOptions<'_> {
        AnswerOptions {
            created: 1_700_000_000,
            id_seed: "req42",
            model: self.opt("model"),
        }
    }
}

/// Run every case of a fixture file; panics with the case name on the first mismatch.
pub fn run_file(text: &str) -> usize {
    let cases = cases(text);
    assert!(!cases.is_empty(), "no cases");
    for c in &cases {
        match c.kind.as_str() {
            "request" => run_request(c),
            "answer" => run_answer(c),
            "stream" => run_stream(c),
            "error" => run_error(c),
            k => panic!("unknown kind {k}"),
        }
    }
    cases.len()
}

fn json(s: &str, what: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{what}: bad JSON ({e}):\n{s}"))
}

fn run_request(c: &Case) {
    let reasoning_history = match c.opt("reasoning") {
        Some("content") => ReasoningHistory::ReasoningContent,
        Some("drop") => ReasoningHistory::Drop,
        _ => ReasoningHistory::Auto,
    };
    let opts = RequestOptions {
        join_text_parts: c.opt("keep_parts").is_none(),
        reasoning_history,
        ..RequestOptions::new("upstream-model")
    };
    let translated = translate_request(c.from, c.to, c.input.as_bytes(), &opts);
    let (h, body) = &c.outcome;
    match h[0].as_str() {
        "expect" => {
            let got = translated.unwrap_or_else(|e| panic!("{}: refused: {e}", c.name));
            let mut dropped = got.dropped.clone();
            dropped.sort_unstable();
            let mut want_dropped: Vec<&str> = c
                .opt("dropped")
                .map_or(Vec::new(), |d| d.split(',').collect());
            want_dropped.sort_unstable();
            assert_eq!(dropped, want_dropped, "{}: dropped fields", c.name);
            let got: Value = serde_json::from_slice(&got.body).unwrap();
            let want = json(body, &c.name);
            assert_eq!(
                got,
                want,
                "{}:\n got {}\nwant {}",
                c.name,
                pretty(&got),
                pretty(&want)
            );
        }
        "refuse" => {
            let error = translated
                .err()
                .unwrap_or_else(|| panic!("{}: translated, expected a refusal", c.name));
            assert_eq!(error.field, h[1], "{}: {error}", c.name);
            let words = body.trim();
            assert!(
                error.reason.contains(words),
                "{}: reason `{}` lacks `{words}`",
                c.name,
                error.reason
            );
        }
        other => panic!("{}: section {other}", c.name),
    }
}

fn run_answer(c: &Case) {
    let answer = translate_answer(c.from, c.to, c.input.as_bytes(), &c.answer_options());
    let (h, body) = &c.outcome;
    match h[0].as_str() {
        "expect" => {
            let got = answer.unwrap_or_else(|e| panic!("{}: error {e:?}", c.name));
            let got: Value = serde_json::from_slice(&got.body).unwrap();
            let want = json(body, &c.name);
            assert_eq!(
                got,
                want,
                "{}:\n got {}\nwant {}",
                c.name,
                pretty(&got),
                pretty(&want)
            );
        }
        "error" => {
            let error = answer
                .err()
                .unwrap_or_else(|| panic!("{}: translated, expected an error", c.name));
            assert_eq!(
                error.client_status(c.to).to_string(),
                h[1],
                "{}: {error:?}",
                c.name
            );
            assert_eq!(error.client_type(c.to), h[2], "{}: {error:?}", c.name);
            assert!(error.message.contains(body.trim()), "{}: {error:?}", c.name);
        }
        other => panic!("{}: section {other}", c.name),
    }
}

fn run_stream(c: &Case) {
    let include_usage = c.opt("include_usage").is_some();
    let mut translator = StreamTranslator::new(c.from, c.to, &c.answer_options(), include_usage);
    let mut out = Vec::new();
    for (name, data) in sse_events(&c.input) {
        translator.feed(name.as_deref(), &data, &mut out);
    }
    translator.finish(&mut out);
    let got = String::from_utf8(out).unwrap();
    assert_same_events(&got, &c.outcome.1, &c.name);
}

fn run_error(c: &Case) {
    let status: u16 = c
        .opt("status")
        .and_then(|s| s.parse().ok())
        .expect("status= option");
    let got = translate_error(c.from, status, c.input.trim_end().as_bytes(), c.to);
    let (h, body) = &c.outcome;
    assert_eq!(
        h.get(1).map(String::as_str),
        Some(got.status.to_string().as_str()),
        "{}",
        c.name
    );
    let gv: Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(gv, json(body, &c.name), "{}: got {}", c.name, pretty(&gv));
}

pub fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Split SSE text into (event name, data) pairs; lines may end in `\r\n`.
pub fn sse_events(text: &str) -> Vec<(Option<String>, String)> {
    let text = text.replace("\r\n", "\n");
    let mut out = Vec::new();
    for block in text.split("\n\n") {
        let mut name = None;
        let mut data: Option<String> = None;
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("event:") {
                name = Some(v.trim().to_string());
            } else if let Some(v) = line.strip_prefix("data:") {
                let v = v.strip_prefix(' ').unwrap_or(v);
                match &mut data {
                    Some(d) => {
                        d.push('\n');
                        d.push_str(v);
                    }
                    None => data = Some(v.to_string()),
                }
            }
        }
        if let Some(d) = data {
            out.push((name, d));
        }
    }
    out
}

/// Compare two SSE texts event by event: names equal, data equal as JSON (or as text).
pub fn assert_same_events(got: &str, want: &str, name: &str) {
    let (g, w) = (sse_events(got), sse_events(want));
    let show = || format!("{name}:\n--- got\n{got}\n--- want\n{want}");
    assert_eq!(g.len(), w.len(), "event count differs. {}", show());
    for (i, ((gn, gd), (wn, wd))) in g.iter().zip(&w).enumerate() {
        assert_eq!(gn, wn, "event {i} name. {}", show());
        match (
            serde_json::from_str::<Value>(gd),
            serde_json::from_str::<Value>(wd),
        ) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "event {i} data. {}", show()),
            _ => assert_eq!(gd.trim(), wd.trim(), "event {i} data. {}", show()),
        }
    }
}
