"""The admin listener of a running gateway (R13.3, R14.6, R12.2)."""

from __future__ import annotations

import httpx

from conftest import Gateway


def test_health_and_ready(gateway: Gateway) -> None:
    assert httpx.get(gateway.admin_url + "/healthz", timeout=10.0).status_code == 200
    assert httpx.get(gateway.admin_url + "/readyz", timeout=10.0).status_code == 200


def test_metrics_exposition(gateway: Gateway) -> None:
    r = httpx.get(gateway.admin_url + "/metrics", timeout=10.0)
    assert r.status_code == 200
    assert r.headers.get("content-type", "").startswith("text/plain")


def test_admin_routes_need_the_token(gateway: Gateway) -> None:
    url = gateway.admin_url + "/admin/channels"
    assert httpx.get(url, timeout=10.0).status_code == 401
    wrong = {"Authorization": "Bearer not-the-token"}
    assert httpx.get(url, headers=wrong, timeout=10.0).status_code == 401
    right = {"Authorization": f"Bearer {gateway.admin_token}"}
    r = httpx.get(url, headers=right, timeout=10.0)
    assert r.status_code == 200
    for name in ("mock-openai", "mock-anthropic", "mock-vip"):
        assert name in r.text, f"{name} missing from /admin/channels"
    # Upstream keys never appear in the admin API (R14.4).
    assert "sk-upstream-test" not in r.text
