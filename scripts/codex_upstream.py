"""The upstreams of scripts/codex-e2e.sh, in one process: a chat-only OpenAI-compatible
server under /v1 (`/v1/responses` answers 404 {"detail":"Not Found"}, as vLLM does), an
Anthropic Messages server (/v1/messages) and a native Responses server under /native/v1.
Each answers a conversation without a tool result with an `exec_command` call
(`echo tool-ok-$((6*7))`) and one with a result with text that quotes whether the result
held `tool-ok-42`. Every request is logged, one JSON line each, to the file in argv[2]."""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = open(sys.argv[2], "a")
CMD = json.dumps({"cmd": "echo tool-ok-$((6*7))"})


def verdict(text):
    return "The command printed " + ("tool-ok-42" if "tool-ok-42" in text else "something else")


def native(req):
    """Responses events for a native server."""
    outputs = [i for i in req.get("input", []) if isinstance(i, dict) and i.get("type") == "function_call_output"]
    seq = iter(range(1000))

    def e(kind, **f):
        return f"event: {kind}\ndata: {json.dumps({'type': kind, 'sequence_number': next(seq), **f})}\n\n"

    resp = {"id": "resp_native_1", "object": "response", "created_at": 1, "model": req["model"], "status": "in_progress", "output": []}
    ev = [e("response.created", response=resp), e("response.in_progress", response=resp)]
    if not outputs:
        item = {"id": "fc_1", "type": "function_call", "status": "in_progress", "call_id": "call_native_1", "name": "exec_command", "arguments": ""}
        ev.append(e("response.output_item.added", output_index=0, item=item))
        ev.append(e("response.function_call_arguments.delta", item_id="fc_1", output_index=0, delta=CMD))
        item = {**item, "status": "completed", "arguments": CMD}
        ev.append(e("response.function_call_arguments.done", item_id="fc_1", output_index=0, arguments=CMD))
    else:
        text = verdict(str(outputs[-1].get("output")))
        item = {"id": "msg_1", "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        ev.append(e("response.output_item.added", output_index=0, item=item))
        ev.append(e("response.output_text.delta", item_id="msg_1", output_index=0, content_index=0, delta=text))
        item = {**item, "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
    ev.append(e("response.output_item.done", output_index=0, item=item))
    usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
    ev.append(e("response.completed", response={**resp, "status": "completed", "output": [item], "usage": usage}))
    return ev


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def send_sse(self, events):
        body = "".join(events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_POST(self):
        n = int(self.headers.get("content-length", "0"))
        req = json.loads(self.rfile.read(n) or b"{}")
        LOG.write(json.dumps({"path": self.path, "keys": sorted(req.keys())}) + "\n"); LOG.flush()
        if self.path.startswith("/native/v1/responses"):
            return self.send_sse(native(req))
        if self.path.startswith("/v1/responses"):
            b = b'{"detail":"Not Found"}'
            self.send_response(404); self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(b))); self.end_headers(); self.wfile.write(b); return
        if self.path.startswith("/v1/chat/completions"):
            msgs = req["messages"]
            tool_out = next((m["content"] for m in reversed(msgs) if m["role"] == "tool"), None)
            def ch(delta, finish=None):
                return "data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": req["model"], "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"
            ev = [ch({"role": "assistant", "content": ""})]
            if tool_out is None:
                ev.append(ch({"tool_calls": [{"index": 0, "id": "call_fake_1", "type": "function", "function": {"name": "exec_command", "arguments": ""}}]}))
                ev.append(ch({"tool_calls": [{"index": 0, "function": {"arguments": CMD}}]}))
                ev.append(ch({}, "tool_calls"))
            else:
                ev.append(ch({"content": verdict(tool_out)}))
                ev.append(ch({}, "stop"))
            ev.append("data: " + json.dumps({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": req["model"], "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}}) + "\n\n")
            ev.append("data: [DONE]\n\n")
            return self.send_sse(ev)
        if self.path.startswith("/v1/messages"):
            msgs = req["messages"]
            last = msgs[-1]
            results = [b for b in (last["content"] if isinstance(last["content"], list) else []) if b.get("type") == "tool_result"]
            def e(name, data): return f"event: {name}\ndata: {json.dumps(data)}\n\n"
            ev = [e("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": req["model"], "content": [], "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}})]
            if not results:
                ev.append(e("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_fake_1", "name": "exec_command", "input": {}}}))
                ev.append(e("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": CMD}}))
                ev.append(e("content_block_stop", {"type": "content_block_stop", "index": 0}))
                stop = "tool_use"
            else:
                c = results[0]["content"]
                text = c if isinstance(c, str) else "".join(x.get("text", "") for x in c)
                ev.append(e("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}))
                ev.append(e("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": verdict(text)}}))
                ev.append(e("content_block_stop", {"type": "content_block_stop", "index": 0}))
                stop = "end_turn"
            ev.append(e("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}))
            ev.append(e("message_stop", {"type": "message_stop"}))
            return self.send_sse(ev)
        self.send_response(404); self.send_header("content-length", "0"); self.end_headers()
    def do_GET(self):
        self.send_response(404); self.send_header("content-length", "0"); self.end_headers()

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
