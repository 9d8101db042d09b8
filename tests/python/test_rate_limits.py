"""Rate limits with the official openai SDK (R15.2): a limited request gets a 429
with Retry-After / retry-after-ms, the SDK waits that long, retries and succeeds."""

from __future__ import annotations

import threading
import time

import httpx
import openai

from conftest import CHAT_MODEL, LIMITED_KEY, Gateway

MESSAGES = [{"role": "user", "content": "hi"}]


def test_openai_sdk_retries_after_retry_after_and_succeeds(gateway: Gateway) -> None:
    # A long stream holds the client's only concurrency permit...
    holder = httpx.Client(timeout=30.0)
    req = holder.build_request(
        "POST",
        gateway.openai_base_url + "/chat/completions",
        headers={"authorization": f"Bearer {LIMITED_KEY}", "x-mock-fault": "stream=400:25ms"},
        json={"model": CHAT_MODEL, "stream": True, "messages": MESSAGES},
    )
    stream = holder.send(req, stream=True)
    assert stream.status_code == 200
    chunks = stream.iter_raw()  # kept: dropping the generator would close the stream
    next(chunks)  # the stream is open
    # ...and is dropped by its client half a second later.
    closer = threading.Timer(0.5, stream.close)
    closer.start()

    seen: list[httpx.Response] = []
    http = httpx.Client(event_hooks={"response": [seen.append]})
    client = openai.OpenAI(
        base_url=gateway.openai_base_url,
        api_key=LIMITED_KEY,
        max_retries=3,
        timeout=30.0,
        http_client=http,
    )
    t0 = time.monotonic()
    resp = client.chat.completions.create(model=CHAT_MODEL, messages=MESSAGES)
    waited = time.monotonic() - t0
    closer.join()
    holder.close()

    assert resp.choices[0].message.content
    statuses = [r.status_code for r in seen]
    assert statuses[0] == 429, statuses
    assert statuses[-1] == 200, statuses
    first = seen[0]
    assert first.headers["retry-after"] == "1"
    assert first.headers["retry-after-ms"] == "1000"
    # The SDK waited what the gateway asked (about 1 s per refusal), not its own backoff.
    assert waited >= 0.9 * (len(statuses) - 1), (waited, statuses)


def test_openai_sdk_raises_rate_limit_error_without_retries(gateway: Gateway) -> None:
    holder = httpx.Client(timeout=30.0)
    req = holder.build_request(
        "POST",
        gateway.openai_base_url + "/chat/completions",
        headers={"authorization": f"Bearer {LIMITED_KEY}", "x-mock-fault": "stream=400:25ms"},
        json={"model": CHAT_MODEL, "stream": True, "messages": MESSAGES},
    )
    stream = holder.send(req, stream=True)
    chunks = stream.iter_raw()  # kept: dropping the generator would close the stream
    next(chunks)
    try:
        client = openai.OpenAI(base_url=gateway.openai_base_url, api_key=LIMITED_KEY, max_retries=0)
        try:
            client.chat.completions.create(model=CHAT_MODEL, messages=MESSAGES)
        except openai.RateLimitError as e:
            assert e.status_code == 429
            assert e.code == "rate_limit_exceeded"
            assert "concurrency limit reached" in str(e)
        else:
            raise AssertionError("expected a RateLimitError")
    finally:
        stream.close()
        holder.close()
