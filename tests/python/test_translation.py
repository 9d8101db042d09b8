"""The official SDKs on a channel of the other wire format (R16.1): the openai SDK
on an Anthropic channel and the anthropic SDK on an OpenAI channel — text, stream, a tool
call and an upstream error, each in the SDK's own types.

The mock's `x-mock-fault: tool` answer is a tool call in the upstream's format
(`get_weather` with `{"city": "Paris"}`); `status=N` its error of that status.
"""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from conftest import XLATE_CLAUDE_MODEL, XLATE_GPT_MODEL

MESSAGES = [{"role": "user", "content": "Say something deterministic."}]
EXPECTED = "chunk 0 chunk 1 chunk 2 "

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "get_weather",
        "description": "The weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


def test_openai_sdk_on_anthropic_channel(openai_client: openai.OpenAI) -> None:
    resp = openai_client.chat.completions.create(model=XLATE_CLAUDE_MODEL, messages=MESSAGES)
    assert resp.object == "chat.completion"
    assert resp.choices[0].message.content == EXPECTED
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.completion_tokens == 3


def test_openai_sdk_stream_on_anthropic_channel(openai_client: openai.OpenAI) -> None:
    stream = openai_client.chat.completions.create(
        model=XLATE_CLAUDE_MODEL,
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": True},
    )
    parts, finish, usage = [], [], None
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
        if chunk.usage is not None:
            usage = chunk.usage
    assert "".join(parts) == EXPECTED
    assert finish == ["stop"]
    assert usage is not None and usage.completion_tokens == 3


def test_openai_sdk_tool_call_on_anthropic_channel(openai_client: openai.OpenAI) -> None:
    resp = openai_client.chat.completions.create(
        model=XLATE_CLAUDE_MODEL,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=OPENAI_TOOLS,
        extra_headers={"x-mock-fault": "tool"},
    )
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert call.id.startswith("toolu_")
    # The result goes back under the same id, and the conversation continues.
    follow = openai_client.chat.completions.create(
        model=XLATE_CLAUDE_MODEL,
        messages=[
            {"role": "user", "content": "Weather in Paris?"},
            choice.message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"},
        ],
        tools=OPENAI_TOOLS,
    )
    assert follow.choices[0].message.content == EXPECTED


def test_openai_sdk_stream_tool_call_on_anthropic_channel(openai_client: openai.OpenAI) -> None:
    stream = openai_client.chat.completions.create(
        model=XLATE_CLAUDE_MODEL,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=OPENAI_TOOLS,
        stream=True,
        extra_headers={"x-mock-fault": "tool"},
    )
    ids, names, args, finish = [], [], [], []
    for chunk in stream:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                if tc.id:
                    ids.append(tc.id)
                if tc.function and tc.function.name:
                    names.append(tc.function.name)
                if tc.function and tc.function.arguments:
                    args.append(tc.function.arguments)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    assert len(ids) == 1 and ids[0].startswith("toolu_")
    assert names == ["get_weather"]
    assert json.loads("".join(args)) == {"city": "Paris"}
    assert finish == ["tool_calls"]


def test_openai_sdk_error_from_anthropic_channel(openai_client: openai.OpenAI) -> None:
    # A caller-fault status: no breaker or key cooldown is touched for the other tests.
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(
            model=XLATE_CLAUDE_MODEL,
            messages=MESSAGES,
            extra_headers={"x-mock-fault": "status=400"},
        )
    assert e.value.status_code == 400
    assert e.value.body["type"] == "invalid_request_error"
    assert "mock upstream error 400" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.chat.completions.create(model=XLATE_CLAUDE_MODEL, messages=MESSAGES, n=2)
    assert "`n`" in e.value.message


def test_anthropic_sdk_on_openai_channel(anthropic_client: anthropic.Anthropic) -> None:
    msg = anthropic_client.messages.create(model=XLATE_GPT_MODEL, max_tokens=64, messages=MESSAGES)
    assert msg.type == "message"
    assert "".join(b.text for b in msg.content if b.type == "text") == EXPECTED
    assert msg.stop_reason == "end_turn"
    assert msg.usage.output_tokens == 3


def test_anthropic_sdk_stream_on_openai_channel(anthropic_client: anthropic.Anthropic) -> None:
    with anthropic_client.messages.stream(
        model=XLATE_GPT_MODEL, max_tokens=64, messages=MESSAGES
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == EXPECTED
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 3


def test_anthropic_sdk_tool_call_on_openai_channel(anthropic_client: anthropic.Anthropic) -> None:
    msg = anthropic_client.messages.create(
        model=XLATE_GPT_MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=ANTHROPIC_TOOLS,
        extra_headers={"x-mock-fault": "tool"},
    )
    assert msg.stop_reason == "tool_use"
    use = next(b for b in msg.content if b.type == "tool_use")
    assert use.name == "get_weather" and use.input == {"city": "Paris"}
    assert use.id.startswith("call_")
    follow = anthropic_client.messages.create(
        model=XLATE_GPT_MODEL,
        max_tokens=64,
        messages=[
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [b.model_dump() for b in msg.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}],
            },
        ],
        tools=ANTHROPIC_TOOLS,
    )
    assert "".join(b.text for b in follow.content if b.type == "text") == EXPECTED

    with anthropic_client.messages.stream(
        model=XLATE_GPT_MODEL,
        max_tokens=64,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=ANTHROPIC_TOOLS,
        extra_headers={"x-mock-fault": "tool"},
    ) as stream:
        final = stream.get_final_message()
    use = next(b for b in final.content if b.type == "tool_use")
    assert use.input == {"city": "Paris"} and use.id.startswith("call_")


def test_anthropic_sdk_error_from_openai_channel(anthropic_client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as e:
        anthropic_client.messages.create(
            model=XLATE_GPT_MODEL,
            max_tokens=64,
            messages=MESSAGES,
            extra_headers={"x-mock-fault": "status=404"},
        )
    assert e.value.status_code == 404
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "not_found_error"
