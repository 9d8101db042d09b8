//! The scripted tool loops of `TOOLTEST:` / `READTEST:` prompts: a call of the client's shell
//! (or `Read`) tool in the endpoint's format, then text quoting the tool's result.
use serde_json::{json, Value};
use switchyard_mock::{MockUpstream, ANSWER_PREFIX, TOOL_COMMAND};

use super::{data_lines, post};

fn tool(name: &str) -> Value {
    json!({"type": "function", "function": {"name": name, "parameters": {"type": "object"}}})
}

#[tokio::test]
async fn chat_tooltest_calls_the_shell_tool_then_quotes_its_output() {
    let mock = MockUpstream::start().await.unwrap();
    let prompt = json!({"role": "user", "content": "TOOLTEST: run it"});
    let body = json!({"model": "m", "tools": [tool("read"), tool("bash")], "messages": [prompt]});
    let json: Value = post(&mock, "chat/completions", body)
        .await
        .json()
        .await
        .unwrap();
    let call = &json["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "bash", "{json}");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args["command"], TOOL_COMMAND);
    assert_eq!(json["choices"][0]["finish_reason"], "tool_calls");
    let id = call["id"].as_str().unwrap();
    let body = json!({"model": "m", "stream": true, "tools": [tool("bash")], "messages": [prompt,
        json["choices"][0]["message"], {"role": "tool", "tool_call_id": id, "content": "tool-ok-42\n"}]});
    let text = post(&mock, "chat/completions", body)
        .await
        .text()
        .await
        .unwrap();
    let said: String = data_lines(&text)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert_eq!(said, format!("{ANSWER_PREFIX}tool-ok-42"), "{text}");
}

#[tokio::test]
async fn messages_tooltest_and_readtest_use_bash_and_read() {
    let mock = MockUpstream::start().await.unwrap();
    let tools = json!([{"name": "Bash", "input_schema": {"type": "object"}}, {"name": "Read", "input_schema": {"type": "object"}}]);
    let ask = |text: &str| {
        json!({"model": "m", "max_tokens": 50, "tools": tools,
        "messages": [{"role": "user", "content": [{"type": "text", "text": text}]}]})
    };
    let json: Value = post(&mock, "messages", ask("TOOLTEST: go"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(json["stop_reason"], "tool_use", "{json}");
    assert_eq!(json["content"][0]["name"], "Bash");
    assert_eq!(json["content"][0]["input"]["command"], TOOL_COMMAND);
    let json: Value = post(
        &mock,
        "messages",
        ask("READTEST: look at /tmp/x/shot.png please"),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(json["content"][0]["name"], "Read", "{json}");
    assert_eq!(
        json["content"][0]["input"],
        json!({"file_path": "/tmp/x/shot.png"})
    );
    let mut body = ask("READTEST: look at /tmp/x/shot.png please");
    body["messages"].as_array_mut().unwrap().extend([
        json!({"role": "assistant", "content": [json["content"][0]]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": json["content"][0]["id"],
            "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]}]}),
    ]);
    let body: Value = post(&mock, "messages", body).await.json().await.unwrap();
    assert_eq!(
        body["content"][0]["text"],
        format!("{ANSWER_PREFIX}[an image]"),
        "{body}"
    );
}

#[tokio::test]
async fn responses_tooltest_is_a_function_call_item() {
    let mock = MockUpstream::start().await.unwrap();
    let tools =
        json!([{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]);
    let prompt = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "TOOLTEST: go"}]});
    let body: Value = post(
        &mock,
        "responses",
        json!({"model": "m", "tools": tools, "input": [prompt]}),
    )
    .await
    .json()
    .await
    .unwrap();
    let item = &body["output"][0];
    assert_eq!(
        (item["type"].clone(), item["name"].clone()),
        (json!("function_call"), json!("exec_command")),
        "{body}"
    );
    let text = post(
        &mock,
        "responses",
        json!({"model": "m", "stream": true, "tools": tools, "input": [prompt]}),
    )
    .await
    .text()
    .await
    .unwrap();
    let done = data_lines(&text)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|e| e["type"] == "response.function_call_arguments.done")
        .expect("arguments done");
    let args: Value = serde_json::from_str(done["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"cmd": TOOL_COMMAND}));
    let out = json!({"type": "function_call_output", "call_id": item["call_id"], "output": "Output:\ntool-ok-42\n"});
    let body: Value = post(
        &mock,
        "responses",
        json!({"model": "m", "tools": tools, "input": [prompt, item, out]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(
        body["output"][0]["content"][0]["text"],
        format!("{ANSWER_PREFIX}Output:\ntool-ok-42"),
        "{body}"
    );
}

/// An image of a tool result on Chat Completions comes as a user message right after the
/// tool message; the script reads both as the tool's result.
#[tokio::test]
async fn chat_readtest_reads_the_image_after_the_tool_message() {
    let mock = MockUpstream::start().await.unwrap();
    let prompt = json!({"role": "user", "content": "READTEST: /tmp/x/shot.png"});
    let json: Value = post(
        &mock,
        "chat/completions",
        json!({"model": "m", "tools": [tool("Read")], "messages": [prompt]}),
    )
    .await
    .json()
    .await
    .unwrap();
    let call = json["choices"][0]["message"].clone();
    assert_eq!(
        call["tool_calls"][0]["function"]["arguments"], r#"{"file_path":"/tmp/x/shot.png"}"#,
        "{json}"
    );
    let id = call["tool_calls"][0]["id"].clone();
    let image = json!({"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]});
    let body = json!({"model": "m", "tools": [tool("Read")], "messages": [prompt, call,
        {"role": "tool", "tool_call_id": id, "content": "the image follows"}, image]});
    let body: Value = post(&mock, "chat/completions", body)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        format!("{ANSWER_PREFIX}the image follows\n[an image]"),
        "{body}"
    );
}
