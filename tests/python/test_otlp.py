"""OpenTelemetry traces over OTLP/HTTP (R20.1), against a real receiver.

The test starts its own gateway (its own config: `telemetry.otlp` on), a small upstream
that records the headers it receives, and an OTLP/HTTP receiver that decodes every export
with the published OTLP protobuf definitions (`opentelemetry-proto`). It asserts the spans
(one per request, one child per attempt), their attributes (GenAI semantic conventions and
switchyard's own), the continuation of the client's `traceparent`, the `traceparent` each
attempt sends upstream, `channels.*.traceparent: false`, and the trace id in the
`request failed` log line.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from conftest import free_port, spawn_gateway, stop, tail, wait_ready

CLIENT_KEY = "sk-otlp-client"
UPSTREAM_KEY = "sk-otlp-upstream-secret"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
WAIT_S = 15.0

CONFIG = """\
listen: 127.0.0.1:{gateway_port}
admin:
  listen: 127.0.0.1:{admin_port}
  token: otlp-admin
storage:
  path: {db_path}
telemetry:
  otlp:
    endpoint: http://127.0.0.1:{otlp_port}
    protocol: {protocol}
    headers: {{x-otlp-tenant: switchyard-tests}}
    sample_ratio: 1.0
    service_name: switchyard-otlp-test
channels:
  bad:
    kind: openai
    base_url: http://127.0.0.1:{up_port}/bad/v1
    keys: ["{up_key}"]
    models: [traced-model, always-bad]
    priority: 10
  good:
    kind: openai
    base_url: http://127.0.0.1:{up_port}/good/v1
    keys: ["{up_key}"]
    models: [traced-model]
    priority: 5
  quiet:
    kind: openai
    base_url: http://127.0.0.1:{up_port}/quiet/v1
    keys: ["{up_key}"]
    models: [quiet-model]
    traceparent: false
clients:
  tracer:
    key: {client_key}
"""


class Recorder:
    """What a test server received, shared with its handler threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list = []

    def add(self, item) -> None:
        with self.lock:
            self.items.append(item)

    def snapshot(self) -> list:
        with self.lock:
            return list(self.items)


def serve(handler_cls) -> tuple[ThreadingHTTPServer, int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_cls)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


def upstream_handler(seen: Recorder):
    class Upstream(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            seen.add((self.path, {k.lower(): v for k, v in self.headers.items()}))
            if self.path.startswith("/bad/"):
                status, answer = 500, {"error": {"message": "boom", "type": "server_error"}}
            else:
                status, answer = 200, {
                    "id": "chatcmpl-otlp",
                    "object": "chat.completion",
                    "model": "upstream-" + body.get("model", "?"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "traced"},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 12,
                        "completion_tokens": 5,
                        "total_tokens": 17,
                        "prompt_tokens_details": {"cached_tokens": 4},
                    },
                }
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Upstream


def otlp_handler(exports: Recorder):
    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            raw = self.rfile.read(length)
            ok = self.path == "/v1/traces" and self.headers.get("content-type", "").startswith(
                "application/x-protobuf"
            )
            if ok:
                req = trace_service_pb2.ExportTraceServiceRequest()
                req.ParseFromString(raw)
                exports.add((dict((k.lower(), v) for k, v in self.headers.items()), req))
            data = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200 if ok else 400)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Receiver


def attrs(span: trace_pb2.Span) -> dict:
    out = {}
    for kv in span.attributes:
        v = kv.value
        kind = v.WhichOneof("value")
        if kind == "array_value":
            out[kv.key] = [x.string_value for x in v.array_value.values]
        else:
            out[kv.key] = getattr(v, kind)
    return out


class Stack:
    def __init__(self, work: Path, protocol: str = "http/protobuf", otlp_port: int = 0) -> None:
        self.seen = Recorder()
        self.exports = Recorder()
        self.up, up_port = serve(upstream_handler(self.seen))
        self.otlp, port = serve(otlp_handler(self.exports))
        otlp_port = otlp_port or port
        gateway_port, admin_port = free_port(), free_port()
        config = work / "switchyard.yaml"
        config.write_text(
            CONFIG.format(
                gateway_port=gateway_port,
                admin_port=admin_port,
                otlp_port=otlp_port,
                protocol=protocol,
                up_port=up_port,
                up_key=UPSTREAM_KEY,
                client_key=CLIENT_KEY,
                db_path=work / "switchyard.db",
            )
        )
        self.log = work / "switchyard.log"
        self.proc = spawn_gateway(config, work, self.log)
        self.base = f"http://127.0.0.1:{gateway_port}"
        self.admin = f"http://127.0.0.1:{admin_port}"
        wait_ready(self.proc, self.admin, self.log)

    def close(self) -> None:
        stop(self.proc)
        self.up.shutdown()
        self.otlp.shutdown()

    def chat(self, model: str, headers: dict | None = None) -> httpx.Response:
        body = {
            "model": model,
            "messages": [{"role": "user", "content": "a secret prompt"}],
            "max_tokens": 64,
            "temperature": 0.25,
        }
        h = {"authorization": f"Bearer {CLIENT_KEY}", **(headers or {})}
        return httpx.post(self.base + "/v1/chat/completions", json=body, headers=h, timeout=30)

    def spans(self, trace_hex: str, count: int) -> list[trace_pb2.Span]:
        """The exported spans of a trace, once `count` of them arrived."""
        want = bytes.fromhex(trace_hex)
        deadline = time.monotonic() + WAIT_S
        found: list = []
        while time.monotonic() < deadline:
            found = [
                s
                for _, req in self.exports.snapshot()
                for rs in req.resource_spans
                for ss in rs.scope_spans
                for s in ss.spans
                if s.trace_id == want
            ]
            if len(found) >= count:
                return found
            time.sleep(0.1)
        pytest.fail(f"{len(found)} of {count} spans of {trace_hex} exported:\n{tail(self.log)}")

    def upstream_headers(self, prefix: str) -> list[dict]:
        return [h for path, h in self.seen.snapshot() if path.startswith(prefix)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory):
    s = Stack(tmp_path_factory.mktemp("otlp"))
    try:
        yield s
    finally:
        s.close()


def test_a_request_is_a_span_with_one_child_per_attempt(stack: Stack) -> None:
    tp = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"
    r = stack.chat("traced-model", {"traceparent": tp, "tracestate": "vendor=abc"})
    assert r.status_code == 200, r.text
    spans = stack.spans(TRACE_ID, 3)
    servers = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]
    clients = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_CLIENT]
    assert len(servers) == 1, spans
    req = servers[0]
    # The client's trace is continued: its span is the request span's parent.
    assert req.parent_span_id.hex() == CLIENT_SPAN
    assert req.trace_state == "vendor=abc"
    a = attrs(req)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "traced-model"
    assert a["gen_ai.response.model"] == "traced-model"
    assert a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.max_tokens"] == 64
    assert a["gen_ai.request.temperature"] == 0.25
    assert a["gen_ai.request.stream"] is False
    assert a["gen_ai.usage.input_tokens"] == 12
    assert a["gen_ai.usage.output_tokens"] == 5
    assert a["gen_ai.usage.cache_read.input_tokens"] == 4
    assert a["gen_ai.response.finish_reasons"] == ["stop"]
    assert a["switchyard.request_id"] == r.headers["x-request-id"]
    assert a["switchyard.chain"].startswith("bad->") and a["switchyard.chain"].endswith("->good")
    assert a["switchyard.channel"] == "good"
    assert a["http.response.status_code"] == 200
    # Attempts: children of the request span, the failed one an error, the last a success.
    assert len(clients) >= 2 and len(clients) == a["switchyard.attempts"]
    clients.sort(key=lambda s: attrs(s)["switchyard.attempt.index"])
    for c in clients:
        assert c.parent_span_id == req.span_id
        assert req.start_time_unix_nano <= c.start_time_unix_nano <= c.end_time_unix_nano
        assert c.end_time_unix_nano <= req.end_time_unix_nano
    first, last = attrs(clients[0]), attrs(clients[-1])
    assert first["switchyard.channel"] == "bad"
    assert first["http.response.status_code"] == 500
    assert first["switchyard.outcome"] != "success"
    assert clients[0].status.code == trace_pb2.Status.STATUS_CODE_ERROR
    assert last["switchyard.channel"] == "good"
    assert last["switchyard.outcome"] == "success"
    assert last["http.response.status_code"] == 200
    assert last["gen_ai.provider.name"] == "openai"
    assert last["gen_ai.request.model"] == "traced-model"
    assert len(last["switchyard.key_fp"]) > 0
    # No content and no key in any span.
    dump = b"".join(s.SerializeToString() for s in spans)
    assert b"secret prompt" not in dump and b"traced" not in dump.replace(b"traced-model", b"")
    assert UPSTREAM_KEY.encode() not in dump and CLIENT_KEY.encode() not in dump
    # Each attempt sent its own span as the upstream's parent, in the client's trace.
    sent = [h["traceparent"] for h in stack.upstream_headers("/bad/") + stack.upstream_headers("/good/")]
    sent = [t for t in sent if TRACE_ID in t]
    assert sorted(t.split("-")[2] for t in sent) == sorted(c.span_id.hex() for c in clients)
    assert all(t.startswith(f"00-{TRACE_ID}-") and t.endswith("-01") for t in sent)
    headers = stack.upstream_headers("/good/")[-1]
    assert headers["tracestate"] == "vendor=abc"
    # The export itself: service name, the configured header.
    hdrs, req_msg = stack.exports.snapshot()[-1]
    assert hdrs.get("x-otlp-tenant") == "switchyard-tests"
    names = {
        kv.value.string_value
        for rs in req_msg.resource_spans
        for kv in rs.resource.attributes
        if kv.key == "service.name"
    }
    assert names == {"switchyard-otlp-test"}


def test_a_request_without_a_traceparent_starts_a_trace(stack: Stack) -> None:
    before = len(stack.upstream_headers("/good/"))
    r = stack.chat("traced-model")
    assert r.status_code == 200, r.text
    tp = stack.upstream_headers("/good/")[before:][-1]["traceparent"]
    version, trace, parent, flags = tp.split("-")
    assert (version, flags) == ("00", "01") and trace != TRACE_ID
    spans = stack.spans(trace, 3)
    req = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER][0]
    assert req.parent_span_id == b"", "a root span"
    assert parent in {s.span_id.hex() for s in spans if s.parent_span_id == req.span_id}


def test_an_unsampled_parent_is_propagated_not_exported(stack: Stack) -> None:
    trace = "0af7651916cd43dd8448eb211c80319c"
    before = len(stack.upstream_headers("/good/"))
    r = stack.chat("traced-model", {"traceparent": f"00-{trace}-b7ad6b7169203331-00"})
    assert r.status_code == 200, r.text
    tp = stack.upstream_headers("/good/")[before:][-1]["traceparent"]
    assert tp.startswith(f"00-{trace}-") and tp.endswith("-00")
    # A sampled request after it is exported; the unsampled one never is.
    marker = "5b8efff798038103d269b633813fc60c"
    stack.chat("traced-model", {"traceparent": f"00-{marker}-b7ad6b7169203331-01"})
    stack.spans(marker, 3)
    every = {s.trace_id.hex() for _, q in stack.exports.snapshot() for rs in q.resource_spans
             for ss in rs.scope_spans for s in ss.spans}
    assert trace not in every


def test_a_channel_can_keep_trace_context_to_itself(stack: Stack) -> None:
    trace = "11111111111111111111111111111111"
    r = stack.chat("quiet-model", {"traceparent": f"00-{trace}-b7ad6b7169203331-01"})
    assert r.status_code == 200, r.text
    h = stack.upstream_headers("/quiet/")[-1]
    assert "traceparent" not in h and "tracestate" not in h
    # The gateway still traces the request.
    stack.spans(trace, 2)


def test_a_failed_request_logs_its_trace_id(stack: Stack) -> None:
    trace = "22222222222222222222222222222222"
    r = stack.chat("always-bad", {"traceparent": f"00-{trace}-b7ad6b7169203331-01"})
    assert r.status_code >= 500, r.text
    spans = stack.spans(trace, 2)
    req = [s for s in spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER][0]
    assert req.status.code == trace_pb2.Status.STATUS_CODE_ERROR
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        lines = [ln for ln in stack.log.read_text(errors="replace").splitlines()
                 if "request failed" in ln and trace in ln]
        if lines:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"no `request failed` line with trace id {trace}:\n{tail(stack.log)}")
    # The request log (the admin API's stored rows) carries the trace id too.
    rid = r.headers["x-request-id"]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        rows = httpx.get(f"{stack.admin}/admin/requests?limit=50",
                            headers={"Authorization": "Bearer otlp-admin"}, timeout=5).json()
        row = [x for x in rows["requests"] if x["id"] == rid]
        if row:
            assert row[0].get("trace_id") == trace, row[0]
            return
        time.sleep(0.1)
    pytest.fail(f"request {rid} never reached the request log")


def test_grpc_export_carries_the_same_spans(tmp_path: Path) -> None:
    """`protocol: grpc`: the unary TraceService/Export call, decoded by a grpcio server."""
    from concurrent import futures

    import grpc

    exports = Recorder()

    def export(request, context):
        exports.add((dict(context.invocation_metadata()), request))
        return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "opentelemetry.proto.collector.trace.v1.TraceService",
                {
                    "Export": grpc.unary_unary_rpc_method_handler(
                        export,
                        request_deserializer=trace_service_pb2.ExportTraceServiceRequest.FromString,
                        response_serializer=trace_service_pb2.ExportTraceServiceResponse.SerializeToString,
                    )
                },
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    s = None
    try:
        s = Stack(tmp_path, protocol="grpc", otlp_port=port)
        trace = "33333333333333333333333333333333"
        r = s.chat("traced-model", {"traceparent": f"00-{trace}-b7ad6b7169203331-01"})
        assert r.status_code == 200, r.text
        s.exports = exports
        spans = s.spans(trace, 3)
        req = [x for x in spans if x.kind == trace_pb2.Span.SPAN_KIND_SERVER][0]
        assert req.parent_span_id.hex() == "b7ad6b7169203331"
        assert attrs(req)["gen_ai.usage.output_tokens"] == 5
        children = [x for x in spans if x.parent_span_id == req.span_id]
        assert len(children) == attrs(req)["switchyard.attempts"] >= 2
        metadata, _ = exports.snapshot()[-1]
        assert metadata.get("x-otlp-tenant") == "switchyard-tests"
    finally:
        if s is not None:
            s.close()
        server.stop(0)
