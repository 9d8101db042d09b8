"""Start a real mock upstream and a real switchyard gateway for the SDK tests.

The binaries come from ``target/debug`` (or ``SWITCHYARD_BIN`` /
``MOCK_UPSTREAM_BIN``); a missing binary stops the whole run with an error.
Both processes are stopped at the end of the session, also when a test or the
start-up fails.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import string
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
TARGET_DIR = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
GATEWAY_BIN = Path(os.environ.get("SWITCHYARD_BIN", TARGET_DIR / "debug" / "switchyard"))
MOCK_BIN = Path(
    os.environ.get("MOCK_UPSTREAM_BIN", TARGET_DIR / "debug" / "examples" / "mock_upstream")
)

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0

CLIENT_KEY = "sk-test-client"
# A client with `limits: {concurrency: 1}` (R15.1).
LIMITED_KEY = "sk-test-limited"
ADMIN_TOKEN = "test-admin-token"
CHAT_MODEL = "gpt-5.4-mini"
EMBED_MODEL = "text-embedding-3-small"
CLAUDE_MODEL = "claude-sonnet-5-5"
VIRTUAL_MODEL = "resilient-chat"
# Served only to the "vip" group; the test client is in "default".
VIP_ONLY_MODEL = "vip-only-model"
# Served only by an Anthropic channel (OpenAI SDK tests translate) and only by an OpenAI
# channel (Anthropic SDK tests translate), R16.1.
XLATE_CLAUDE_MODEL = "xlate-claude"
XLATE_GPT_MODEL = "xlate-gpt"
# Served only by an OpenAI-format channel with `responses: chat` (R16.4): the Responses API
# translated to Chat Completions.
XLATE_CHAT_ONLY_MODEL = "xlate-chat-only"

CONFIG_TEMPLATE = string.Template(
    """\
listen: 127.0.0.1:${gateway_port}
admin:
  listen: 127.0.0.1:${admin_port}
  token: ${admin_token}
storage:
  path: ${db_path}
debug_headers: true
channels:
  mock-openai:
    kind: openai
    base_url: http://127.0.0.1:${mock_port}/v1
    keys: ["sk-upstream-test-openai"]
    models: [${chat_model}, ${embed_model}]
    groups: [default]
    priority: 10
  mock-anthropic:
    kind: anthropic
    base_url: http://127.0.0.1:${mock_port}/v1
    keys: ["sk-upstream-test-anthropic"]
    models: [${claude_model}]
    groups: [default]
    priority: 10
  xlate-anthropic:
    kind: anthropic
    base_url: http://127.0.0.1:${mock_port}/v1
    keys: ["sk-upstream-test-anthropic"]
    models: [${xlate_claude_model}]
    groups: [default]
  xlate-openai:
    kind: openai
    base_url: http://127.0.0.1:${mock_port}/v1
    keys: ["sk-upstream-test-openai"]
    models: [${xlate_gpt_model}]
    groups: [default]
  xlate-chatonly:
    kind: openai
    base_url: http://127.0.0.1:${mock_port}/v1
    keys: ["sk-upstream-test-openai"]
    models: [${xlate_chat_only_model}]
    groups: [default]
    responses: chat
  mock-vip:
    kind: openai
    base_url: http://127.0.0.1:${mock_port}/v1
    keys: ["sk-upstream-test-vip"]
    models: [${vip_only_model}]
    groups: [vip]
virtual_models:
  ${virtual_model}:
    targets: [mock-openai/${chat_model}]
    groups: [default]
clients:
  tester:
    key: ${client_key}
    group: default
  limited:
    key: ${limited_key}
    group: default
    limits: {concurrency: 1}
"""
)


@dataclass(frozen=True)
class Gateway:
    base_url: str  # http://127.0.0.1:PORT (no /v1)
    admin_url: str  # http://127.0.0.1:PORT
    client_key: str
    admin_token: str
    log_path: Path

    @property
    def openai_base_url(self) -> str:
        return self.base_url + "/v1"


def pytest_sessionstart(session: pytest.Session) -> None:
    missing = [str(p) for p in (GATEWAY_BIN, MOCK_BIN) if not os.access(p, os.X_OK)]
    if missing:
        pytest.exit(
            "missing binaries: "
            + ", ".join(missing)
            + " — build them first: cargo build --all-targets (or make build)",
            returncode=3,
        )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, lines: int = 60) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "<no log>"


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=STOP_TIMEOUT_S)


def start_mock(log_path: Path) -> tuple[subprocess.Popen, int]:
    """Start the mock on port 0 and read the port it reports."""
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [str(MOCK_BIN), "--listen", "127.0.0.1:0", "--name", "pytest-mock"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    log.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    pattern = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
    while time.monotonic() < deadline:
        match = pattern.search(log_path.read_text(errors="replace"))
        if match:
            return proc, int(match.group(1))
        if proc.poll() is not None:
            raise RuntimeError(
                f"mock upstream exited with {proc.returncode} during start-up:\n{tail(log_path)}"
            )
        time.sleep(0.05)
    stop(proc)
    raise RuntimeError(f"mock upstream did not report its address:\n{tail(log_path)}")


def spawn_gateway(config_path: Path, work: Path, log_path: Path) -> subprocess.Popen:
    """Start the gateway on `config_path`, its output in `log_path`; settings from the file
    only (no SWITCHYARD_* from the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SWITCHYARD_")}
    env.setdefault("RUST_LOG", "info")
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [str(GATEWAY_BIN), "serve", "--config", str(config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=work,
        )


def wait_ready(proc: subprocess.Popen, admin_url: str, log_path: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    last = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"switchyard exited with {proc.returncode} during start-up:\n{tail(log_path)}"
            )
        try:
            r = httpx.get(admin_url + "/readyz", timeout=1.0)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}"
        except httpx.HTTPError as e:
            last = repr(e)
        time.sleep(0.1)
    raise RuntimeError(f"switchyard not ready after {START_TIMEOUT_S}s ({last}):\n{tail(log_path)}")


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory):
    work = tmp_path_factory.mktemp("switchyard")
    mock_log = work / "mock.log"
    gw_log = work / "switchyard.log"
    mock = None
    gw = None
    try:
        mock, mock_port = start_mock(mock_log)
        gateway_port, admin_port = free_port(), free_port()
        while admin_port == gateway_port:
            admin_port = free_port()
        config_path = work / "switchyard.yaml"
        config_path.write_text(
            CONFIG_TEMPLATE.substitute(
                gateway_port=gateway_port,
                admin_port=admin_port,
                mock_port=mock_port,
                admin_token=ADMIN_TOKEN,
                db_path=work / "switchyard.db",
                client_key=CLIENT_KEY,
                limited_key=LIMITED_KEY,
                chat_model=CHAT_MODEL,
                embed_model=EMBED_MODEL,
                claude_model=CLAUDE_MODEL,
                virtual_model=VIRTUAL_MODEL,
                vip_only_model=VIP_ONLY_MODEL,
                xlate_claude_model=XLATE_CLAUDE_MODEL,
                xlate_gpt_model=XLATE_GPT_MODEL,
                xlate_chat_only_model=XLATE_CHAT_ONLY_MODEL,
            )
        )
        gw = spawn_gateway(config_path, work, gw_log)
        admin_url = f"http://127.0.0.1:{admin_port}"
        wait_ready(gw, admin_url, gw_log)
        yield Gateway(
            base_url=f"http://127.0.0.1:{gateway_port}",
            admin_url=admin_url,
            client_key=CLIENT_KEY,
            admin_token=ADMIN_TOKEN,
            log_path=gw_log,
        )
        if gw.poll() is not None:
            pytest.fail(f"switchyard died during the tests:\n{tail(gw_log)}")
    finally:
        stop(gw)
        stop(mock)


@pytest.fixture
def openai_client(gateway: Gateway):
    import openai

    client = openai.OpenAI(
        base_url=gateway.openai_base_url, api_key=gateway.client_key, max_retries=0, timeout=30.0
    )
    yield client
    client.close()


@pytest.fixture
def anthropic_client(gateway: Gateway):
    """An Anthropic SDK client that authenticates with `x-api-key` only.

    Recent SDK releases send `api_key` as `Authorization: Bearer`; the key is
    put in `x-api-key` explicitly so the Anthropic-style header is the one
    exercised (R14.1). `anthropic_bearer_client` covers the SDK default.
    """
    import anthropic

    client = anthropic.Anthropic(
        base_url=gateway.base_url,
        api_key=None,
        auth_token=None,
        default_headers={"x-api-key": gateway.client_key},
        max_retries=0,
        timeout=30.0,
    )
    yield client
    client.close()


@pytest.fixture
def anthropic_bearer_client(gateway: Gateway):
    """An Anthropic SDK client configured the usual way (`api_key=`)."""
    import anthropic

    client = anthropic.Anthropic(
        base_url=gateway.base_url, api_key=gateway.client_key, max_retries=0, timeout=30.0
    )
    yield client
    client.close()
