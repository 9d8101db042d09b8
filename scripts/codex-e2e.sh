#!/usr/bin/env bash
# Codex end to end through the gateway (R16.4): `codex exec` runs an exec_command tool
# loop, then `codex exec resume --last` continues the session, against (a) a native
# Responses channel, (b) a chat-only OpenAI-compatible channel left at `responses: auto`
# (found out from its 404, then translated to Chat Completions) and (c) an Anthropic
# channel. The upstreams are scripts/codex_upstream.py. Needs `codex` on PATH
# (npm install -g @openai/codex) and the debug gateway (cargo build --bin switchyard).
# Exits non-zero when a run does not end with the tool's output quoted back.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gateway="${SWITCHYARD_BIN:-${CARGO_TARGET_DIR:-$root/target}/debug/switchyard}"
command -v codex >/dev/null || { echo "error: codex not on PATH (npm install -g @openai/codex)" >&2; exit 1; }
[[ -x "$gateway" ]] || { echo "error: $gateway missing (cargo build --bin switchyard)" >&2; exit 1; }

work="$(mktemp -d)"
pids=()
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
up_port="$(port)"; gw_port="$(port)"; admin_port="$(port)"
python3 "$root/scripts/codex_upstream.py" "$up_port" "$work/upstream.log" &
pids+=($!)
cat >"$work/gw.yaml" <<YAML
listen: 127.0.0.1:$gw_port
admin: {listen: "127.0.0.1:$admin_port", token: adm}
storage: {path: $work/sy.db}
channels:
  native:   {kind: openai, base_url: "http://127.0.0.1:$up_port/native/v1", keys: [k], models: [gpt-native]}
  selfhosted: {kind: openai, base_url: "http://127.0.0.1:$up_port/v1", keys: [k], models: [gpt-selfhosted]}
  claude:   {kind: anthropic, base_url: "http://127.0.0.1:$up_port/v1", keys: [k], models: [claude-x]}
clients:
  me: {key: sk-me}
YAML
"$gateway" serve --config "$work/gw.yaml" >"$work/gw.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$admin_port/healthz" >/dev/null && break
    sleep 0.1
done

export CODEX_HOME="$work/codex" GW_KEY=sk-me
mkdir -p "$CODEX_HOME" "$work/cwd"
codex_run() {
    codex exec --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -C "$work/cwd" \
        -c model_provider=gw \
        -c "model_providers.gw={name=\"gw\",base_url=\"http://127.0.0.1:$gw_port/v1\",env_key=\"GW_KEY\",wire_api=\"responses\"}" \
        -m "$@"
}
fail=0
for model in gpt-native gpt-selfhosted claude-x; do
    for step in exec resume; do
        if [[ $step == exec ]]; then
            out="$(codex_run "$model" "TOOLTEST: run a shell command and tell me what it printed" 2>&1)" || true
        else
            out="$(codex_run "$model" resume --last "TOOLTEST: once more" 2>&1)" || true
        fi
        if [[ "$(tail -n 1 <<<"$out")" == "The command printed tool-ok-42" ]]; then
            echo "ok   $model $step"
        else
            echo "FAIL $model $step"; echo "$out" | tail -n 20; fail=1
        fi
    done
done
echo "upstream requests:"; python3 -c '
import json, sys, collections
c = collections.Counter(json.loads(l)["path"] for l in open(sys.argv[1]))
for p, n in sorted(c.items()): print(f"  {n:3} {p}")' "$work/upstream.log"
exit "$fail"
