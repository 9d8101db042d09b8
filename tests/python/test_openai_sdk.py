"""The official openai SDK against a running gateway and mock upstream (R1, R9, R14)."""

from __future__ import annotations

import httpx
import openai
import pytest

from conftest import CHAT_MODEL, EMBED_MODEL, VIP_ONLY_MODEL, VIRTUAL_MODEL, Gateway

MESSAGES = [{"role": "user", "content": "Say something deterministic."}]


def chat_text(client: openai.OpenAI, model: str = CHAT_MODEL) -> str:
    resp = client.chat.completions.create(model=model, messages=MESSAGES)
    return resp.choices[0].message.content or ""


def stream_chat(client: openai.OpenAI, **extra) -> tuple[str, list[str]]:
    """Returns the concatenated content deltas and every finish_reason seen."""
    stream = client.chat.completions.create(model=CHAT_MODEL, messages=MESSAGES, stream=True, **extra)
    parts: list[str] = []
    finish: list[str] = []
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                parts.append(choice.delta.content)
            if choice.finish_reason:
                finish.append(choice.finish_reason)
    return "".join(parts), finish


def test_chat_non_stream(openai_client: openai.OpenAI) -> None:
    raw = openai_client.chat.completions.with_raw_response.create(
        model=CHAT_MODEL, messages=MESSAGES
    )
    resp = raw.parse()
    assert resp.choices, "no choices in the response"
    assert resp.choices[0].message.content, "empty assistant content"
    assert resp.usage is not None, "usage missing"
    assert resp.usage.total_tokens > 0
    assert raw.headers.get("x-request-id"), "x-request-id header missing"
    # debug_headers: true in the test config: one attempt on the only channel.
    assert raw.headers.get("x-switchyard-route") == "mock-openai"


def test_request_id_is_taken_from_the_request(openai_client: openai.OpenAI) -> None:
    raw = openai_client.chat.completions.with_raw_response.create(
        model=CHAT_MODEL, messages=MESSAGES, extra_headers={"x-request-id": "pytest-rid-42"}
    )
    assert raw.headers.get("x-request-id") == "pytest-rid-42"


def test_chat_stream_matches_non_stream(openai_client: openai.OpenAI) -> None:
    expected = chat_text(openai_client)
    text, finish = stream_chat(openai_client)
    assert text, "stream produced no content"
    assert finish, "stream ended without a finish_reason"
    assert text == expected


def test_chat_stream_with_upstream_keepalives(openai_client: openai.OpenAI) -> None:
    """SSE comment lines from the upstream must not break the SDK's parser."""
    expected = chat_text(openai_client)
    text, finish = stream_chat(openai_client, extra_headers={"x-mock-fault": "keepalive=3:50ms"})
    assert finish, "stream ended without a finish_reason"
    assert text == expected


def test_virtual_model(openai_client: openai.OpenAI) -> None:
    assert chat_text(openai_client, VIRTUAL_MODEL)


def test_responses_non_stream(openai_client: openai.OpenAI) -> None:
    resp = openai_client.responses.create(model=CHAT_MODEL, input="Say something.")
    assert resp.output_text, "empty output_text"
    assert resp.status in (None, "completed")


def test_responses_stream(openai_client: openai.OpenAI) -> None:
    stream = openai_client.responses.create(model=CHAT_MODEL, input="Say something.", stream=True)
    deltas: list[str] = []
    types: list[str] = []
    for event in stream:
        types.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
    assert deltas, f"no text deltas; events: {types}"
    assert types[-1] == "response.completed", f"last event {types[-1]!r}"


def test_embeddings(openai_client: openai.OpenAI) -> None:
    resp = openai_client.embeddings.create(model=EMBED_MODEL, input="hello")
    assert len(resp.data) == 1
    vector = resp.data[0].embedding
    assert len(vector) > 0
    assert all(isinstance(x, float) for x in vector)


def test_models_list(openai_client: openai.OpenAI) -> None:
    ids = {m.id for m in openai_client.models.list()}
    assert CHAT_MODEL in ids
    assert EMBED_MODEL in ids
    # Only models the caller's group can reach are listed (R1.1).
    assert VIP_ONLY_MODEL not in ids


def test_models_retrieve(openai_client: openai.OpenAI) -> None:
    model = openai_client.models.retrieve(CHAT_MODEL)
    assert model.id == CHAT_MODEL and model.object == "model"
    with pytest.raises(openai.NotFoundError):
        openai_client.models.retrieve(VIP_ONLY_MODEL)


def test_wrong_key_is_rejected(gateway: Gateway) -> None:
    client = openai.OpenAI(
        base_url=gateway.openai_base_url, api_key="sk-not-a-client", max_retries=0, timeout=30.0
    )
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model=CHAT_MODEL, messages=MESSAGES)
    client.close()


def test_missing_key_is_rejected(gateway: Gateway) -> None:
    r = httpx.post(
        gateway.openai_base_url + "/chat/completions",
        json={"model": CHAT_MODEL, "messages": MESSAGES},
        timeout=30.0,
    )
    assert r.status_code == 401
    assert "error" in r.json()


def test_unknown_model_names_the_model(openai_client: openai.OpenAI) -> None:
    model = "no-such-model-7f3a"
    with pytest.raises((openai.NotFoundError, openai.BadRequestError)) as info:
        openai_client.chat.completions.create(model=model, messages=MESSAGES)
    err = info.value
    assert 400 <= err.status_code < 500
    assert model in str(err.message) or model in str(err.body)
