#!/usr/bin/env bash
# End to end with the real clients (R16.3, R16.5; `make clients`, not part of `make test`):
# installs Claude Code, Codex and OpenCode from npm and aider from PyPI into .cache/clients,
# starts two mock upstreams (a native one playing OpenAI and Anthropic, a chat-only one
# playing vLLM/DeepSeek) and the gateway with a temporary config, then runs each scenario
# under a timeout and prints one PASS/FAIL line per scenario with the client's version.
#
# Everything listens on 127.0.0.1 and the clients are pointed there, with their telemetry,
# update checks and other non-essential traffic turned off.
#
#   CLIENTS=claude,codex     run only these clients (claude codex opencode aider)
#   CLIENT_TIMEOUT=180       seconds per scenario
#   CLAUDE_CODE_VERSION, CODEX_VERSION, OPENCODE_VERSION, AIDER_VERSION   versions to install
#   KEEP=1                   keep the temp folder (configs, logs) and print its path
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1

cache="$root/.cache/clients"
target_dir="${CARGO_TARGET_DIR:-target}"
gateway_bin="$target_dir/debug/switchyard"
mock_bin="$target_dir/debug/examples/mock_upstream"
timeout_s="${CLIENT_TIMEOUT:-180}"
only="${CLIENTS:-claude codex opencode aider}"
claude_v="${CLAUDE_CODE_VERSION:-2.1.197}"
codex_v="${CODEX_VERSION:-0.171.0}"
opencode_v="${OPENCODE_VERSION:-1.18.33}"
aider_v="${AIDER_VERSION:-0.86.2}"
key="sk-clients-test"

work="$(mktemp -d -t switchyard-clients.XXXXXX)"
pids=()
passed=0
failed=0

cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ "${KEEP:-0}" == 1 ]]; then
        echo "kept $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wants() { [[ " ${only//,/ } " == *" $1 "* ]]; }

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

## Install -----------------------------------------------------------------

install_npm() {
    local dir="$cache/npm" missing=() pkg
    mkdir -p "$dir"
    for pkg in "@anthropic-ai/claude-code@$claude_v" "@openai/codex@$codex_v" "opencode-ai@$opencode_v"; do
        local name="${pkg%@*}" version="${pkg##*@}"
        local have
        have="$(node -p "try{require('$dir/node_modules/$name/package.json').version}catch(e){''}" 2>/dev/null)"
        [[ "$have" == "$version" ]] || missing+=("$pkg")
    done
    if ((${#missing[@]})); then
        echo "+ npm install ${missing[*]}"
        npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${missing[@]}" >"$work/npm.log" 2>&1 ||
            { echo "npm install failed:"; tail -20 "$work/npm.log"; }
    fi
}

install_aider() {
    local venv="$cache/aider-venv"
    if [[ ! -x "$venv/bin/aider" ]] || [[ "$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null)" != "$aider_v" ]]; then
        echo "+ pip install aider-chat==$aider_v (own venv)"
        if ! { python3 -m venv "$venv" && "$venv/bin/pip" install -q "aider-chat==$aider_v"; } >"$work/pip.log" 2>&1; then
            echo "pip install failed:"
            tail -20 "$work/pip.log"
        fi
    fi
}

if wants claude || wants codex || wants opencode; then install_npm; fi
if wants aider; then install_aider; fi

npm_bin="$cache/npm/node_modules/.bin"
version_of() { node -p "require('$cache/npm/node_modules/$1/package.json').version" 2>/dev/null || echo "?"; }

## Start the mocks and the gateway -----------------------------------------

echo "+ cargo build --bin switchyard --example mock_upstream"
cargo build -q --bin switchyard --example mock_upstream || exit 1

native_port="$(free_port)"
chat_port="$(free_port)"
gw_port="$(free_port)"
admin_port="$(free_port)"

start_mock() { # port flavour log
    "$mock_bin" --listen "127.0.0.1:$1" --flavour "$2" --log-refusals --name "$2" >"$3" 2>&1 &
    pids+=($!)
}
start_mock "$native_port" native "$work/mock-native.log"
start_mock "$chat_port" chat-only "$work/mock-chat.log"

# Claude Code's own model names go to an OpenAI channel serving gpt-5.4 (the common relay);
# Codex, OpenCode and aider each get model names of their own.
write_config() { # with the channel options the gateway may not know yet, or without
    local extra_chat="$1"
    cat >"$work/switchyard.yaml" <<EOF
listen: 127.0.0.1:$gw_port
admin:
  listen: 127.0.0.1:$admin_port
  token: clients-admin
storage:
  path: $work/switchyard.db
debug_headers: true
channels:
  oa:
    kind: openai
    base_url: http://127.0.0.1:$native_port/v1
    keys: ["sk-up-oa"]
    models: [claude-opus-4-8, claude-sonnet-4-6, claude-haiku-4-5-20251001, codex-native, opencode-gpt]
    model_mapping: {claude-opus-4-8: gpt-5.4, claude-sonnet-4-6: gpt-5.4, claude-haiku-4-5-20251001: gpt-5.4-mini, codex-native: gpt-5.4}
  chat:
    kind: openai
    base_url: http://127.0.0.1:$chat_port/v1
    keys: ["sk-up-chat"]
    models: [codex-chat]
$extra_chat
  an:
    kind: anthropic
    base_url: http://127.0.0.1:$native_port/v1
    keys: ["sk-up-an"]
    models: [claude-native, codex-anthropic, opencode-claude, aider-claude]
clients:
  tester:
    key: $key
EOF
}
write_config "    responses: chat"
if ! "$gateway_bin" check --config "$work/switchyard.yaml" >"$work/check.log" 2>&1; then
    echo "note: the gateway refused 'responses: chat' ($(tail -1 "$work/check.log")); running without it"
    write_config ""
fi
SWITCHYARD_LOG="${SWITCHYARD_LOG:-info}" "$gateway_bin" serve --config "$work/switchyard.yaml" >"$work/gateway.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$admin_port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
if ! curl -fsS "http://127.0.0.1:$admin_port/readyz" >/dev/null 2>&1; then
    echo "error: the gateway did not start:"
    tail -20 "$work/gateway.log"
    exit 1
fi
base="http://127.0.0.1:$gw_port"

## Scenarios ---------------------------------------------------------------

export NO_PROXY="127.0.0.1,localhost" no_proxy="127.0.0.1,localhost"
unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy ALL_PROXY all_proxy OPENAI_BASE_URL ANTHROPIC_AUTH_TOKEN

# Whether file $1 holds the pieces of $2 (separated by "|"), in this order.
holds() {
    awk -v want="$2" 'BEGIN { n = split(want, p, "|"); i = 1 }
        { while (i <= n && index(substr($0, at + 1), p[i])) { at += index(substr($0, at + 1), p[i]) + length(p[i]) - 1; i++ } at = 0 }
        END { exit !(i > n) }' "$1"
}

# One scenario: name, version, the text its output must contain (pieces in order, "|"
# between them), then the command.
scenario() {
    local name="$1" version="$2" want="$3"
    shift 3
    local log="$work/$name.log" mark_native mark_chat
    mark_native="$(wc -l <"$work/mock-native.log")"
    mark_chat="$(wc -l <"$work/mock-chat.log")"
    (cd "$work/project" && timeout -k 5 "$timeout_s" "$@") </dev/null >"$log" 2>&1
    local rc=$?
    sleep 0.5 # the mocks log what they served every 200 ms
    if holds "$log" "$want"; then
        echo "PASS $name ($version)"
        passed=$((passed + 1))
    else
        echo "FAIL $name ($version): exit $rc, no \"$want\" in the output"
        tail -n 8 "$log" | cut -c1-300 | sed 's/^/    client: /'
        tail -n "+$((mark_native + 1))" "$work/mock-native.log" | grep refused | tail -n 3 | cut -c1-300 | sed 's/^/    mock: /'
        tail -n "+$((mark_chat + 1))" "$work/mock-chat.log" | grep refused | tail -n 3 | cut -c1-300 | sed 's/^/    mock chat-only: /'
        failed=$((failed + 1))
    fi
}

mkdir -p "$work/project" "$work/home/.codex"
export HOME="$work/home"
export XDG_CONFIG_HOME="$work/home/.config" XDG_DATA_HOME="$work/home/.local/share" XDG_CACHE_HOME="$work/home/.cache"
export DISABLE_TELEMETRY=1 DO_NOT_TRACK=1
# A 64×48 PNG for Claude Code's Read.
python3 - "$work/project/shot.png" <<'EOF'
import struct, sys, zlib
w, h = 64, 48
raw = b"".join(b"\x00" + b"\x30\x80\xc0" * w for _ in range(h))
def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
EOF

tool_ok="MOCK-ANSWER: the tool said: |tool-ok-42"

if wants claude; then
    v="claude-code $(version_of @anthropic-ai/claude-code)"
    claude_env=(env ANTHROPIC_BASE_URL="$base" ANTHROPIC_API_KEY="$key"
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1
        DISABLE_BUG_COMMAND=1 CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY=1 IS_SANDBOX=1)
    scenario claude-code-bash-loop-openai-channel "$v" "$tool_ok" \
        "${claude_env[@]}" "$npm_bin/claude" -p \
        "TOOLTEST: run a shell command with the Bash tool and tell me what it printed" --allowedTools Bash
    # The baseline: the same loop on a native Anthropic channel (another model name).
    scenario claude-code-bash-loop-anthropic-channel "$v" "$tool_ok" \
        "${claude_env[@]}" ANTHROPIC_MODEL=claude-native ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-native \
        "$npm_bin/claude" -p \
        "TOOLTEST: run a shell command with the Bash tool and tell me what it printed" --allowedTools Bash
    scenario claude-code-read-png-openai-channel "$v" "MOCK-ANSWER: the tool said:|[an image]" \
        "${claude_env[@]}" "$npm_bin/claude" -p \
        "READTEST: look at the screenshot $work/project/shot.png and describe it" --allowedTools Read
    scenario claude-code-read-png-anthropic-channel "$v" "MOCK-ANSWER: the tool said:|[an image]" \
        "${claude_env[@]}" ANTHROPIC_MODEL=claude-native ANTHROPIC_DEFAULT_HAIKU_MODEL=claude-native \
        "$npm_bin/claude" -p \
        "READTEST: look at the screenshot $work/project/shot.png and describe it" --allowedTools Read
fi

if wants codex; then
    v="codex $(version_of @openai/codex)"
    for target in native chat anthropic; do
        scenario "codex-exec-$target" "$v" "$tool_ok" \
            env CODEX_HOME="$work/home/.codex" SY_KEY="$key" "$npm_bin/codex" exec \
            --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox \
            -c model_provider=sy \
            -c "model_providers.sy={name=\"switchyard\", base_url=\"$base/v1\", env_key=\"SY_KEY\", wire_api=\"responses\"}" \
            -c check_for_update_on_startup=false -c analytics.enabled=false \
            -m "codex-$target" "TOOLTEST: run a shell command and tell me what it printed"
    done
fi

if wants opencode; then
    v="opencode $(version_of opencode-ai)"
    cat >"$work/project/opencode.json" <<EOF
{
  "\$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "permission": {"bash": "allow", "edit": "allow"},
  "provider": {
    "sy": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "switchyard",
      "options": {"baseURL": "$base/v1", "apiKey": "$key"},
      "models": {"opencode-claude": {"name": "opencode-claude"}, "opencode-gpt": {"name": "opencode-gpt"}}
    }
  }
}
EOF
    opencode_env=(env OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_MODELS_FETCH=1
        OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1)
    # A model id with "claude" in it: OpenCode adds OpenAI-format cache_control.
    scenario opencode-bash-loop-anthropic-channel "$v" "$tool_ok" \
        "${opencode_env[@]}" "$npm_bin/opencode" run -m sy/opencode-claude \
        "TOOLTEST: run a shell command with the bash tool and tell me what it printed"
    scenario opencode-bash-loop-openai-channel "$v" "$tool_ok" \
        "${opencode_env[@]}" "$npm_bin/opencode" run -m sy/opencode-gpt \
        "TOOLTEST: run a shell command with the bash tool and tell me what it printed"
fi

if wants aider; then
    venv="$cache/aider-venv"
    v="aider $("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("aider-chat"))' 2>/dev/null || echo "?")"
    aider_args=(--no-git --yes-always --no-check-update --no-analytics --no-show-model-warnings
        --no-show-release-notes --no-pretty --no-fancy-input --map-tokens 0 --message "Say pong")
    scenario aider-openai-anthropic-channel "$v" "chunk 0" \
        env LITELLM_LOCAL_MODEL_COST_MAP=True "$venv/bin/aider" --model openai/aider-claude \
        --openai-api-base "$base/v1" --openai-api-key "$key" "${aider_args[@]}"
    scenario aider-anthropic-native "$v" "chunk 0" \
        env LITELLM_LOCAL_MODEL_COST_MAP=True ANTHROPIC_API_BASE="$base" "$venv/bin/aider" \
        --model anthropic/aider-claude --anthropic-api-key "$key" --cache-prompts "${aider_args[@]}"
fi

echo "$passed passed, $failed failed"
((failed == 0))
