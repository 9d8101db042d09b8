"""The official anthropic SDK against a running gateway and mock upstream (R1, R14.1)."""

from __future__ import annotations

import anthropic
import pytest

from conftest import CLAUDE_MODEL, Gateway

MESSAGES = [{"role": "user", "content": "Say something deterministic."}]


def text_of(message) -> str:
    return "".join(block.text for block in message.content if block.type == "text")


def test_messages_non_stream(anthropic_client: anthropic.Anthropic) -> None:
    msg = anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=MESSAGES)
    assert msg.type == "message"
    assert text_of(msg), "empty text content"
    assert msg.stop_reason is not None
    assert msg.usage.output_tokens > 0


def test_request_id_and_no_deprecation_warning(anthropic_client: anthropic.Anthropic) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        msg = anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=MESSAGES)
    assert msg._request_id, "the gateway sent no request-id header"
    models = anthropic_client.models.list()
    assert CLAUDE_MODEL in {m.id for m in models.data}
    assert anthropic_client.models.retrieve(CLAUDE_MODEL).id == CLAUDE_MODEL


def test_messages_with_sdk_default_auth(anthropic_bearer_client: anthropic.Anthropic) -> None:
    msg = anthropic_bearer_client.messages.create(
        model=CLAUDE_MODEL, max_tokens=64, messages=MESSAGES
    )
    assert text_of(msg)


def test_messages_stream(anthropic_client: anthropic.Anthropic) -> None:
    expected = text_of(
        anthropic_client.messages.create(model=CLAUDE_MODEL, max_tokens=64, messages=MESSAGES)
    )
    with anthropic_client.messages.stream(
        model=CLAUDE_MODEL, max_tokens=64, messages=MESSAGES
    ) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed, "stream produced no text"
    assert streamed == text_of(final)
    assert final.stop_reason is not None
    assert streamed == expected


def test_wrong_key_is_rejected(gateway: Gateway) -> None:
    client = anthropic.Anthropic(
        base_url=gateway.base_url,
        api_key=None,
        auth_token=None,
        default_headers={"x-api-key": "sk-not-a-client"},
        max_retries=0,
        timeout=30.0,
    )
    with pytest.raises(anthropic.AuthenticationError) as info:
        client.messages.create(model=CLAUDE_MODEL, max_tokens=16, messages=MESSAGES)
    # Anthropic endpoint errors use the Anthropic error envelope (R1.4).
    assert isinstance(info.value.body, dict)
    assert info.value.body.get("type") == "error"
    client.close()
