"""The openai SDK's Responses API on every channel type (issue 28, R16.4): a native Responses
channel, an OpenAI-compatible channel that serves only Chat Completions (`responses: chat`)
and an Anthropic channel — `client.responses.create`, `client.responses.stream` (the SDK's
own event accumulator and final response) and a function call, each in the SDK's types.

The mock's `x-mock-fault: tool` answer is a tool call in the upstream's format
(`get_weather` with `{"city": "Paris"}`).
"""

from __future__ import annotations

import json

import openai
import pytest

from conftest import CHAT_MODEL, XLATE_CHAT_ONLY_MODEL, XLATE_CLAUDE_MODEL

EXPECTED = "chunk 0 chunk 1 chunk 2 "
TRANSLATED = [XLATE_CHAT_ONLY_MODEL, XLATE_CLAUDE_MODEL]
EVERY = [CHAT_MODEL, *TRANSLATED]

TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
]


@pytest.mark.parametrize("model", EVERY)
def test_create(openai_client: openai.OpenAI, model: str) -> None:
    resp = openai_client.responses.create(
        model=model, instructions="Be brief.", input="Say something.", max_output_tokens=64
    )
    assert resp.output_text, f"{model}: empty output_text"
    assert resp.usage is not None and resp.usage.input_tokens > 0
    if model in TRANSLATED:
        assert resp.status == "completed"
        assert resp.output_text == EXPECTED
        assert resp.id.startswith("resp_")
        assert resp.output[0].type == "message"
        assert resp.usage.output_tokens == 3


@pytest.mark.parametrize("model", [CHAT_MODEL, *TRANSLATED])
def test_stream_helper(openai_client: openai.OpenAI, model: str) -> None:
    deltas: list[str] = []
    types: list[str] = []
    with openai_client.responses.stream(model=model, input="Say something.") as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert deltas, f"{model}: no text deltas; events: {types}"
    assert types[0] == "response.created"
    assert types[-1] == "response.completed", types
    assert final.output_text == "".join(deltas)
    if model in TRANSLATED:
        assert final.output_text == EXPECTED
        numbers = []
        stream2 = openai_client.responses.create(model=model, input="x", stream=True)
        for event in stream2:
            numbers.append(event.sequence_number)
        assert numbers == list(range(len(numbers))), numbers


@pytest.mark.parametrize("model", TRANSLATED)
def test_function_call_round_trip(openai_client: openai.OpenAI, model: str) -> None:
    resp = openai_client.responses.create(
        model=model,
        input="Weather in Paris?",
        tools=TOOLS,
        extra_headers={"x-mock-fault": "tool"},
    )
    calls = [o for o in resp.output if o.type == "function_call"]
    assert len(calls) == 1, resp.output
    call = calls[0]
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    # The result goes back with the whole history (store: false), as Codex sends it.
    follow = openai_client.responses.create(
        model=model,
        input=[
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"},
        ],
        tools=TOOLS,
        store=False,
    )
    assert follow.output_text == EXPECTED


@pytest.mark.parametrize("model", TRANSLATED)
def test_stream_function_call(openai_client: openai.OpenAI, model: str) -> None:
    with openai_client.responses.stream(
        model=model, input="Weather?", tools=TOOLS, extra_headers={"x-mock-fault": "tool"}
    ) as stream:
        args = "".join(
            e.delta for e in stream if e.type == "response.function_call_arguments.delta"
        )
        final = stream.get_final_response()
    assert json.loads(args) == {"city": "Paris"}
    call = next(o for o in final.output if o.type == "function_call")
    assert call.arguments == args


@pytest.mark.parametrize("model", TRANSLATED)
def test_state_bound_request_is_a_clear_400(openai_client: openai.OpenAI, model: str) -> None:
    with pytest.raises(openai.BadRequestError) as e:
        openai_client.responses.create(model=model, input="and?", previous_response_id="resp_1")
    assert "natively" in str(e.value)
