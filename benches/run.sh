#!/usr/bin/env bash
# `make bench`: what switchyard adds to one hop, measured against its floors in one run.
#
# Builds in release, then on 127.0.0.1 only:
#   closed loop (wrk, 64 conns): direct to the mock upstream, a fixed-body nginx, nginx as a
#     plain reverse proxy to the mock, a bare hyper hop (examples/bare_hop: the same HTTP
#     stack with none of the logic), and switchyard to the mock; proxy CPU per request;
#     then nginx, the bare hop and switchyard again with a 60-turn (~62 KB) conversation;
#   open loop (loadgen, fixed rates, latency from the scheduled start);
#   SSE time to first / last byte; cold start and idle RSS; many held streams;
#   reloads under load; failover cost; the TCP_NODELAY stall check; shared mode (private
#   PostgreSQL + Redis, benches/shared-services.sh; BENCH_SHARED=0 skips it).
# Prints a table and writes target/bench/<timestamp>.json and target/bench/latest.json.
# Every process it starts is stopped on exit. Knobs (env): BENCH_DURATION (s, default 10),
# BENCH_WARMUP (2), BENCH_CONNS (64), BENCH_THREADS (2), BENCH_OPEN_DURATION (10),
# BENCH_RATES ("1000 5000"), BENCH_STREAMS (10000), BENCH_SSE_COUNT (200), BENCH_RELOADS (10),
# BENCH_RELOAD_RATE (500), BENCH_FAILOVER_RATE (500), BENCH_SKIP_BUILD (unset),
# BENCH_LIMITED_RATE (2000: the shared-mode limited client's open-loop rate), BENCH_ONLY
# (unset: everything; "shared": only the shared-mode rows), PEERS ("litellm": the closed loop also through LiteLLM's proxy, installed into a venv).
set -euo pipefail
cd "$(dirname "$0")/.."

DUR=${BENCH_DURATION:-10}
WARM=${BENCH_WARMUP:-2}
CONNS=${BENCH_CONNS:-64}
THREADS=${BENCH_THREADS:-2}
OPEN_DUR=${BENCH_OPEN_DURATION:-10}
RATES=${BENCH_RATES:-1000 5000}
STREAMS=${BENCH_STREAMS:-10000}
SSE_COUNT=${BENCH_SSE_COUNT:-200}
RELOADS=${BENCH_RELOADS:-10}
RELOAD_RATE=${BENCH_RELOAD_RATE:-500}
FAILOVER_RATE=${BENCH_FAILOVER_RATE:-500}
PEERS=${PEERS:-}
LIMITED_RATE=${BENCH_LIMITED_RATE:-2000}
ONLY=${BENCH_ONLY:-}
# want SECTION: run it (everything runs unless BENCH_ONLY names one section).
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }
TARGET_DIR=${CARGO_TARGET_DIR:-target}
REL=$TARGET_DIR/release
OUT=$TARGET_DIR/bench
HZ=$(getconf CLK_TCK)

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'bench: %s\n' "$*" >&2; exit 1; }

# ---- tools ---------------------------------------------------------------------------
apt_install() {
    [ "$(id -u)" = 0 ] || die "$1 is missing and installing it needs root"
    # Packages only: no init script may start a system nginx.
    local rc_made=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
        rc_made=1
    fi
    local ok=0
    for pkg in "$@"; do
        if DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null 2>&1 &&
                DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg" >/dev/null 2>&1; }; then
            ok=1
            break
        fi
    done
    [ -n "$rc_made" ] && rm -f /usr/sbin/policy-rc.d
    [ "$ok" = 1 ] || die "could not install any of: $*"
}
command -v wrk >/dev/null || { log "installing wrk"; apt_install wrk; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { log "installing nginx"; apt_install nginx-light nginx; NGINX=/usr/sbin/nginx; }
command -v python3 >/dev/null || die "python3 is needed for the report"

# ---- build -----------------------------------------------------------------------------
if [ -z "${BENCH_SKIP_BUILD:-}" ]; then
    log "building (release)"
    # The gateway in a build of its own: built with the examples in one cargo run, it would
    # link the tokio the examples get (dev-dependencies: `test-util`, whose clock takes a
    # mutex in the timer driver), which is not the binary a user builds.
    cargo build --release --bin switchyard
    cargo build --release --example mock_upstream --example loadgen \
        --example bare_hop --example limits_bench
fi
SY=$REL/switchyard
MOCK=$REL/examples/mock_upstream
LG=$REL/examples/loadgen
HOP=$REL/examples/bare_hop
for b in "$SY" "$MOCK" "$LG" "$HOP"; do [ -x "$b" ] || die "missing $b"; done

# ---- processes -------------------------------------------------------------------------
# Many streams need two descriptors per stream in the gateway; take the hard limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)

TMP=$(mktemp -d /tmp/switchyard-bench.XXXXXX)
RES=$TMP/results.jsonl
: >"$RES"
PIDS=()
cleanup() {
    local pid i
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for ((i = 0; i < 30; i++)); do
        kill -0 "${PIDS[@]}" 2>/dev/null || break
        sleep 0.1
    done
    for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -n "${SHARED_UP:-}" ]; then bash benches/shared-services.sh stop "$TMP/shared"; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Fifteen distinct free ports below the ephemeral range: the many-streams run uses ~20k
# ephemeral ports, and a later listener must not collide with one of those connections.
read -r MOCK_PORT MOCK503_PORT NGX_PROXY_PORT NGX_STATIC_PORT SY_PORT SY_ADMIN_PORT \
    FO_PORT FO_ADMIN_PORT CS_PORT CS_ADMIN_PORT HOP_PORT SH_PORT SH_ADMIN_PORT REDIS_PORT \
    PG_PORT < <(python3 - <<'PY'
import random, socket
got = []
while len(got) < 15:
    p = random.randint(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        if p not in got:
            got.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(*got)
PY
)
[ -n "$PG_PORT" ] || die "could not pick free ports"

# fill TEMPLATE OUT [WEIGHT] [SY_PORT] [ADMIN_PORT]
fill() {
    sed -e "s|@TMP@|$TMP|g" -e "s|@MOCK_PORT@|$MOCK_PORT|g" -e "s|@MOCK503_PORT@|$MOCK503_PORT|g" \
        -e "s|@NGX_PROXY_PORT@|$NGX_PROXY_PORT|g" -e "s|@NGX_STATIC_PORT@|$NGX_STATIC_PORT|g" \
        -e "s|@WEIGHT@|${3:-100}|g" -e "s|@SY_PORT@|${4:-$SY_PORT}|g" \
        -e "s|@SY_ADMIN_PORT@|${5:-$SY_ADMIN_PORT}|g" -e "s|@REDIS_PORT@|$REDIS_PORT|g" \
        -e "s|@PG_PORT@|$PG_PORT|g" "$1" >"$2"
}

wait_http() { # URL [seconds]
    local i
    for ((i = 0; i < ${2:-10} * 50; i++)); do
        curl -fs -o /dev/null "$1" 2>/dev/null && return 0
        sleep 0.02
    done
    die "not ready: $1"
}
wait_port() { # PORT
    local i
    for ((i = 0; i < 500; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.02
    done
    die "nothing listens on port $1"
}

# ticks FIELDS PID... : the sum over the processes of the awk expression FIELDS of
# /proc/PID/stat after "pid (comm) " (state is field 1, utime 12, stime 13), in clock ticks.
ticks() {
    local fields=$1 pid sum=0 t
    shift
    for pid in "$@"; do
        t=$(awk "{ sub(/^.*\\) /, \"\"); print $fields }" "/proc/$pid/stat" 2>/dev/null) || continue
        sum=$((sum + ${t:-0}))
    done
    echo "$sum"
}
# cpu_ticks PID... : utime+stime; user_ticks PID... : utime alone (the process's own code;
# the rest is the kernel's).
# shellcheck disable=SC2016 # awk's fields, not the shell's
cpu_ticks() { ticks '$12 + $13' "$@"; }
# shellcheck disable=SC2016
user_ticks() { ticks '$12' "$@"; }

record() { printf '{"key":"%s","value":%s}\n' "$1" "${2:-null}" >>"$RES"; }

log "starting mock upstreams, nginx, switchyard (tmp $TMP, nofile $NOFILE)"
"$MOCK" --listen "127.0.0.1:$MOCK_PORT" >"$TMP/mock.log" 2>&1 &
PIDS+=($!)
MOCK_PID=$!
"$MOCK" --listen "127.0.0.1:$MOCK503_PORT" --fault status=503 >"$TMP/mock503.log" 2>&1 &
PIDS+=($!)
fill benches/nginx.conf.tmpl "$TMP/nginx.conf"
mkdir -p "$TMP"/ngx-{body,proxy,fastcgi,uwsgi,scgi} "$TMP/data"
"$NGINX" -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/nginx-error.log" >"$TMP/nginx.out" 2>&1 &
PIDS+=($!)
NGX_PID=$!
"$HOP" --listen "127.0.0.1:$HOP_PORT" --upstream "127.0.0.1:$MOCK_PORT" >"$TMP/hop.log" 2>&1 &
PIDS+=($!)
HOP_PID=$!
fill benches/switchyard.yaml.tmpl "$TMP/switchyard.yaml" 100
"$SY" --config "$TMP/switchyard.yaml" serve >"$TMP/switchyard.log" 2>&1 &
PIDS+=($!)
SY_PID=$!
wait_port "$MOCK_PORT"
wait_port "$MOCK503_PORT"
wait_port "$NGX_PROXY_PORT"
wait_port "$NGX_STATIC_PORT"
wait_port "$HOP_PORT"
wait_http "http://127.0.0.1:$SY_ADMIN_PORT/readyz"
ngx_pids() { echo "$NGX_PID"; pgrep -P "$NGX_PID" || true; }

CHAT=/v1/chat/completions
BODY='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}'
SBODY='{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello."}]}'
AUTH='Authorization: Bearer sk-bench-client'
declare -A URL=(
    [direct]="http://127.0.0.1:$MOCK_PORT$CHAT"
    [static]="http://127.0.0.1:$NGX_STATIC_PORT$CHAT"
    [nginx]="http://127.0.0.1:$NGX_PROXY_PORT$CHAT"
    [hyper]="http://127.0.0.1:$HOP_PORT$CHAT"
    [switchyard]="http://127.0.0.1:$SY_PORT$CHAT"
)
# Sanity: every path answers 200 before anything is measured.
for p in direct static nginx hyper switchyard; do
    code=$(curl -s -o "$TMP/probe.out" -w '%{http_code}' -H "$AUTH" \
        -H 'content-type: application/json' -d "$BODY" "${URL[$p]}")
    [ "$code" = 200 ] || die "$p answered $code: $(head -c 300 "$TMP/probe.out")"
done

record meta "$(python3 - "$DUR" "$WARM" "$CONNS" "$THREADS" "$NOFILE" <<'EOF'
import json, os, platform, subprocess, sys
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
    except Exception: return ""
cpu = next((l.split(":",1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "")
print(json.dumps({"duration_s": int(sys.argv[1]), "warmup_s": int(sys.argv[2]),
  "connections": int(sys.argv[3]), "threads": int(sys.argv[4]), "nofile": int(sys.argv[5]),
  "cpus": os.cpu_count(), "cpu_model": cpu, "kernel": platform.release(),
  "loadavg_start": open("/proc/loadavg").read().split()[:3],
  "commit": sh("git rev-parse --short HEAD"), "nginx": sh("nginx -v 2>&1"),
  "wrk": sh("wrk -v 2>&1 | head -1")}))
EOF
)"

# ---- closed loop -----------------------------------------------------------------------
run_wrk() { # NAME PIDS...
    local name=$1
    shift
    log "closed loop: $name (${CONNS} conns, ${DUR}s)"
    # NAME_long: the same path with a long conversation as the body; NAME_xlate: the same
    # path for a model served by an Anthropic channel (translated).
    local base=${name%_long}
    base=${base%_xlate}
    base=${base%_sse1}
    base=${base%_sse}
    local script=benches/post.lua url=${URL[$base]}
    [ "$name" != "${name%_long}" ] && script=$TMP/post-long.lua
    [ "$name" != "${name%_xlate}" ] && script=$TMP/post-xlate.lua
    [ "$name" != "${name%_sse}" ] && script=$TMP/post-sse.lua
    [ "$name" != "${name%_sse1}" ] && script=$TMP/post-sse1.lua
    [ "$name" != "${name#shared_quota}" ] && script=$TMP/post-quota.lua
    wrk -t"$THREADS" -c"$CONNS" -d"${WARM}s" -s "$script" "$url" >/dev/null
    local t0 t1 u0 u1
    t0=$(cpu_ticks "$@")
    u0=$(user_ticks "$@")
    wrk -t"$THREADS" -c"$CONNS" -d"${DUR}s" -s "$script" "$url" >"$TMP/wrk-$name.txt"
    t1=$(cpu_ticks "$@")
    u1=$(user_ticks "$@")
    local json
    json=$(sed -n 's/^BENCHJSON //p' "$TMP/wrk-$name.txt")
    [ -n "$json" ] || die "wrk printed no summary for $name: $(cat "$TMP/wrk-$name.txt")"
    record "closed.$name" "$json"
    record "cpu.$name" "{\"ticks\":$((t1 - t0)),\"user_ticks\":$((u1 - u0)),\"hz\":$HZ}"
    sed -n 's/^BENCHJSON //p' "$TMP/wrk-$name.txt" >&2
}
if want main; then
run_wrk direct "$MOCK_PID"
# shellcheck disable=SC2046
run_wrk static $(ngx_pids)
# shellcheck disable=SC2046
run_wrk nginx $(ngx_pids)
run_wrk hyper "$HOP_PID"
run_wrk switchyard "$SY_PID"
# An OpenAI client on an Anthropic channel (R16.1): translation both ways per request.
sed 's/"gpt-4o-mini"/"claude-bench"/' benches/post.lua >"$TMP/post-xlate.lua"
run_wrk switchyard_xlate "$SY_PID"
# A long conversation (60 turns, ~62 KB): what chat bodies look like once a session runs.
python3 - benches/post.lua "$TMP/post-long.lua" <<'PY'
import json, sys
src = open(sys.argv[1]).read()
msgs = [{"role": ("user", "assistant")[i % 2], "content": "word " * 200} for i in range(60)]
body = json.dumps({"model": "gpt-4o-mini", "messages": msgs, "max_tokens": 100})
head, done = src.split("\ndone = function", 1)
head = "\n".join(l for l in head.splitlines() if not l.startswith("wrk.body"))
open(sys.argv[2], "w").write(f"{head}\nwrk.body = [==[{body}]==]\n\ndone = function{done}")
PY
# shellcheck disable=SC2046
run_wrk nginx_long $(ngx_pids)
run_wrk hyper_long "$HOP_PID"
run_wrk switchyard_long "$SY_PID"
# A streamed answer (20 content chunks + usage + [DONE]): `_sse` as one upstream write
# (`coalesce`: the whole stream in one read), `_sse1` one event per write 1 ms apart (one
# event per read). The bare hop collects bodies whole, so it has no stream row.
for shape in "sse:stream=20:0ms,coalesce" "sse1:stream=20:1ms"; do
    sed -e 's/"messages"/"stream":true,"messages"/' \
        -e "s/^wrk.headers\[\"Authorization\"\].*/&\nwrk.headers[\"x-mock-fault\"] = \"${shape#*:}\"/" \
        benches/post.lua >"$TMP/post-${shape%%:*}.lua"
done
# shellcheck disable=SC2046
run_wrk nginx_sse $(ngx_pids)
run_wrk switchyard_sse "$SY_PID"
# shellcheck disable=SC2046
run_wrk nginx_sse1 $(ngx_pids)
run_wrk switchyard_sse1 "$SY_PID"
fi

# ---- shared mode (R17, R15 ceilings): PostgreSQL + Redis -----------------------------
# The same closed loop through a gateway whose durable state is in a private PostgreSQL and
# whose live state is shared through a private Redis (both started here on free ports,
# stopped on exit): `shared` is the bench client (needs no shared decision), `shared_quota`
# an open loop of a rate-limited client at LIMITED_RATE (limits in Redis above that rate:
# every 429 is a false one), a client with a quota (one PostgreSQL debit per request,
# batched per client), and last `shared_quota_serial`, the quota client on a gateway restarted
# with `storage.debit_batch: 1` (one statement per debit, the behaviour before batching).
# BENCH_SHARED=0 skips it; it is skipped with a note when redis-server or PostgreSQL is not
# installed.
start_shared_gw() { # CONFIG LOG: starts the shared-mode gateway, sets SH_PID
    "$SY" --config "$1" serve >"$2" 2>&1 &
    PIDS+=($!)
    SH_PID=$!
    wait_http "http://127.0.0.1:$SH_ADMIN_PORT/readyz" 30
}
stop_shared_gw() {
    kill -TERM "$SH_PID" 2>/dev/null || true
    wait "$SH_PID" 2>/dev/null || true
}
debit_stats() { # NAME: the gateway's debit statements and debits (the mean batch size)
    curl -fs "http://127.0.0.1:$SH_ADMIN_PORT/metrics" | python3 -c '
import json, sys
v = {"statements": 0, "debits": 0}
for line in sys.stdin:
    for key, name in (("statements", "switchyard_quota_debit_statements_total"), ("debits", "switchyard_quota_debits_total")):
        if line.startswith(name + " ") or line.startswith(name + "{"):
            v[key] += float(line.split()[-1])
print(json.dumps(v))' >"$TMP/debits-$1.json" || echo '{}' >"$TMP/debits-$1.json"
    record "debits.$1" "$(cat "$TMP/debits-$1.json")"
}
if want shared && [ "${BENCH_SHARED:-1}" != 0 ] && bash benches/shared-services.sh check; then
    log "shared mode: private redis on $REDIS_PORT, PostgreSQL on $PG_PORT"
    bash benches/shared-services.sh start "$TMP/shared" "$REDIS_PORT" "$PG_PORT"
    SHARED_UP=1
    fill benches/switchyard-shared.yaml.tmpl "$TMP/shared.yaml" 100 "$SH_PORT" "$SH_ADMIN_PORT"
    start_shared_gw "$TMP/shared.yaml" "$TMP/shared.log"
    URL[shared]="http://127.0.0.1:$SH_PORT$CHAT"
    URL[shared_quota]=${URL[shared]}
    URL[shared_quota_serial]=${URL[shared]}
    sed 's/sk-bench-client/sk-bench-quota/' benches/post.lua >"$TMP/post-quota.lua"
    for key in sk-bench-client sk-bench-quota sk-bench-limited; do
        code=$(curl -s -o "$TMP/probe.out" -w '%{http_code}' -H "Authorization: Bearer $key" \
            -H 'content-type: application/json' -d "$BODY" "${URL[shared]}")
        [ "$code" = 200 ] || die "shared mode, $key answered $code: $(head -c 300 "$TMP/probe.out")"
    done
    run_wrk shared "$SH_PID"
    # Before the quota rows: their settles keep the writer and PostgreSQL busy for seconds
    # after wrk stops, and the limited row measures the limiter, not that backlog.
    log "shared mode: rate-limited client, open loop at $LIMITED_RATE rps (${OPEN_DUR}s)"
    record "open.$LIMITED_RATE.shared_limited" "$("$LG" open --url "${URL[shared]}" \
        --header "Authorization: Bearer sk-bench-limited" --body "$BODY" \
        --rate "$LIMITED_RATE" --duration "${OPEN_DUR}s" --warmup 1s --timeout 10s)"
    debit_stats before_quota
    run_wrk shared_quota "$SH_PID"
    debit_stats shared_quota
    stop_shared_gw
    sed 's/debit_batch: 256/debit_batch: 1/' "$TMP/shared.yaml" >"$TMP/shared-serial.yaml"
    start_shared_gw "$TMP/shared-serial.yaml" "$TMP/shared-serial.log"
    run_wrk shared_quota_serial "$SH_PID"
    debit_stats shared_quota_serial
    stop_shared_gw
else
    log "shared mode skipped (BENCH_ONLY, BENCH_SHARED=0, or redis-server/PostgreSQL not installed)"
    record shared.skipped true
fi

# ---- peers (optional) ------------------------------------------------------------------
# LiteLLM's proxy in front of the same mock, started offline (local cost map), with the
# bench client key as its master key so the same wrk script authenticates.
if [[ " $PEERS " == *" litellm "* ]]; then
    VENV=${BENCH_LITELLM_VENV:-$OUT/litellm-venv}
    if [ ! -x "$VENV/bin/litellm" ]; then
        log "installing LiteLLM's proxy into $VENV"
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install -q --disable-pip-version-check 'litellm[proxy]'
    fi
    LL_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    printf '%s\n' 'model_list:' '  - model_name: gpt-4o-mini' '    litellm_params:' \
        '      model: openai/gpt-4o-mini' "      api_base: http://127.0.0.1:$MOCK_PORT/v1" \
        '      api_key: sk-mock-upstream' 'general_settings:' '  master_key: sk-bench-client' \
        >"$TMP/litellm.yaml"
    LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/litellm" --config "$TMP/litellm.yaml" \
        --host 127.0.0.1 --port "$LL_PORT" >"$TMP/litellm.log" 2>&1 &
    PIDS+=($!)
    LL_PID=$!
    wait_http "http://127.0.0.1:$LL_PORT/health/liveliness" 180
    URL[litellm]="http://127.0.0.1:$LL_PORT$CHAT"
    code=$(curl -s -o "$TMP/probe.out" -w '%{http_code}' -H "$AUTH" \
        -H 'content-type: application/json' -d "$BODY" "${URL[litellm]}")
    [ "$code" = 200 ] || die "litellm answered $code: $(head -c 300 "$TMP/probe.out")"
    # shellcheck disable=SC2046
    run_wrk litellm "$LL_PID" $(pgrep -P "$LL_PID" || true)
fi

if want main; then
# ---- open loop -------------------------------------------------------------------------
for rate in $RATES; do
    for p in direct nginx switchyard; do
        log "open loop: $p at $rate rps (${OPEN_DUR}s)"
        record "open.$rate.$p" "$("$LG" open --url "${URL[$p]}" --header "$AUTH" --body "$BODY" \
            --rate "$rate" --duration "${OPEN_DUR}s" --warmup 1s --timeout 10s)"
    done
done

# ---- streaming: time to first and last byte --------------------------------------------
for p in direct nginx switchyard; do
    log "SSE 20 chunks: $p ($SSE_COUNT requests)"
    record "sse.$p" "$("$LG" sse --url "${URL[$p]}" --header "$AUTH" --body "$SBODY" \
        --header 'x-mock-fault: stream=20:0ms' --count "$SSE_COUNT" --timeout 10s)"
done

# ---- cold start and idle RSS -----------------------------------------------------------
log "cold start and idle RSS"
fill benches/switchyard.yaml.tmpl "$TMP/coldstart.yaml" 100 "$CS_PORT" "$CS_ADMIN_PORT"
sed -i "s|data/switchyard.db|data/coldstart.db|" "$TMP/coldstart.yaml"
record coldstart "$("$LG" coldstart --ready "http://127.0.0.1:$CS_ADMIN_PORT/readyz" --runs 5 \
    --settle 1s -- "$SY" --config "$TMP/coldstart.yaml" serve)"

# ---- reload under load -----------------------------------------------------------------
log "reload under load: baseline at $RELOAD_RATE rps"
record reload.base "$("$LG" open --url "${URL[switchyard]}" --header "$AUTH" --body "$BODY" \
    --rate "$RELOAD_RATE" --duration "${OPEN_DUR}s" --warmup 1s --timeout 10s)"
log "reload under load: $RELOADS rewrites at $RELOAD_RATE rps"
gen() { curl -fs "http://127.0.0.1:$SY_ADMIN_PORT/readyz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["generation"])'; }
GEN0=$(gen)
"$LG" open --url "${URL[switchyard]}" --header "$AUTH" --body "$BODY" --rate "$RELOAD_RATE" \
    --duration "${OPEN_DUR}s" --warmup 1s --timeout 10s >"$TMP/reload.json" &
LG_PID=$!
PIDS+=("$LG_PID")
sleep 1.2
gap=$(python3 -c "print(max(0.2, ($OPEN_DUR - 1) / $RELOADS))")
for ((i = 1; i <= RELOADS; i++)); do
    fill benches/switchyard.yaml.tmpl "$TMP/switchyard.yaml.new" $((100 + i))
    mv -f "$TMP/switchyard.yaml.new" "$TMP/switchyard.yaml"
    sleep "$gap"
done
wait "$LG_PID"
sleep 0.5
GEN1=$(gen)
record reload.during "$(cat "$TMP/reload.json")"
record reload.generations "{\"before\":$GEN0,\"after\":$GEN1,\"rewrites\":$RELOADS}"

# ---- failover cost ---------------------------------------------------------------------
log "failover cost at $FAILOVER_RATE rps (one of two channels answers 503)"
fill benches/switchyard-failover.yaml.tmpl "$TMP/failover.yaml" 100 "$FO_PORT" "$FO_ADMIN_PORT"
"$SY" --config "$TMP/failover.yaml" serve >"$TMP/failover.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$FO_ADMIN_PORT/readyz"
record failover "$("$LG" open --url "http://127.0.0.1:$FO_PORT$CHAT" --header "$AUTH" \
    --body "$BODY" --rate "$FAILOVER_RATE" --duration "${OPEN_DUR}s" --warmup 1s --timeout 10s \
    --split-header x-switchyard-route --split-contains=-\>)"

# ---- many concurrent streams -----------------------------------------------------------
N=$STREAMS
cap=$(((NOFILE - 256) / 2))
[ "$N" -gt "$cap" ] && N=$cap
log "holding $N concurrent slow streams through switchyard (asked $STREAMS, fd limit $NOFILE)"
record hold "$("$LG" hold --url "${URL[switchyard]}" --header "$AUTH" --body "$SBODY" \
    --header 'x-mock-fault: stream=15:1s' --streams "$N" --pid "$SY_PID" --timeout 60s \
    --deadline 120s)"
record hold.asked "{\"streams\":$STREAMS,\"nofile\":$NOFILE}"

# ---- the rate-limit check alone (target: < 1 us per request single-node) --------------
if [ -x "$REL/examples/limits_bench" ]; then
    log "rate-limit check (examples/limits_bench)"
    record limits "$("$REL/examples/limits_bench" | python3 -c '
import json, re, sys
keys = {"limited client, admit + settle": "admit_settle_ns", "limited client, refused by rpm": "refused_ns",
        "unlimited client": "unlimited_ns", "1000 limited clients, round robin": "many_clients_ns"}
out = {}
for line in sys.stdin:
    name, _, rest = line.partition(":")
    m = re.match(r"\s*([0-9.]+)\s*ns", rest)
    if name.strip() in keys and m:
        out[keys[name.strip()]] = float(m.group(1))
print(json.dumps(out))')"
fi

fi # want main

record meta.end "{\"loadavg_end\":$(python3 -c 'import json; print(json.dumps(open("/proc/loadavg").read().split()[:3]))')}"

# ---- report ----------------------------------------------------------------------------
mkdir -p "$OUT"
cp "$RES" "$OUT/latest-raw.jsonl"
python3 benches/report.py "$RES" "$OUT"
