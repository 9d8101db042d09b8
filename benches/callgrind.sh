#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: a figure that does not move
# with the machine's load (wall-clock benchmarks on a shared machine do).
#
# Builds in release, starts the mock upstream (natively) and the gateway under callgrind
# with a minimal config on 127.0.0.1, sends 50 warm-up requests, zeroes the counters
# (`callgrind_control -z`), sends CG_REQUESTS sequential requests of one kind over one
# kept-alive connection, waits 3 s for the store writer's last batch and dumps the counters
# (`callgrind_control -d`). Three gateway runs: non-stream chat requests, streaming chat
# requests (the mock sends CG_CHUNKS content chunks each), and an idle run as long as the
# longer of the two (timers). Prints, per kind, (dump - idle dump) / CG_REQUESTS.
#
# Then allocations per request: the same loads natively through the bench build
# (`--features count-allocs`, copied to switchyard-count-allocs), reading
# `switchyard_allocations_total` from /metrics before and after (warm-up excluded).
#
# Knobs (env): CG_REQUESTS (2000), CG_CHUNKS (20), CG_SKIP_BUILD (unset), CG_KEEP (unset:
# keep the callgrind.out files and logs in the printed directory), CG_BIN and CG_ALLOC_BIN
# (other gateway binaries to measure, e.g. an older build for a before/after), CG_ALLOCS
# (1; 0: instructions only, no allocation runs), CG_LONG (unset; 1: the non-stream requests
# carry make bench's 60-turn ~62 KB conversation instead of one short message), CG_COALESCE
# (unset; 1: the mock writes each stream in one write, make bench's `_sse` row, instead of
# one write per event).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${CG_REQUESTS:-2000}
CHUNKS=${CG_CHUNKS:-20}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
REL=$TARGET_DIR/release

die() { printf 'callgrind: %s\n' "$*" >&2; exit 1; }
command -v valgrind >/dev/null || die "valgrind is missing (apt-get install valgrind)"
command -v curl >/dev/null || die "curl is missing"

if [ -z "${CG_SKIP_BUILD:-}" ]; then
    cargo build --release --features count-allocs --bin switchyard >&2
    cp "$REL/switchyard" "$REL/switchyard-count-allocs"
    # Not in one cargo run with the examples: the gateway would link their tokio (the
    # dev-dependencies' `test-util`), which is not the binary a user builds.
    cargo build --release --bin switchyard >&2
    cargo build --release --example mock_upstream --example loadgen >&2
fi
SY=${CG_BIN:-$REL/switchyard}
ALLOC_SY=${CG_ALLOC_BIN:-$REL/switchyard-count-allocs}
MOCK=$REL/examples/mock_upstream
LG=$REL/examples/loadgen
for b in "$SY" "$MOCK" "$LG"; do [ -x "$b" ] || die "missing $b"; done

TMP=$(mktemp -d /tmp/switchyard-callgrind.XXXXXX)
SSE_FAULT="stream=$CHUNKS:0ms"
[ "${CG_COALESCE:-}" = 1 ] && SSE_FAULT="$SSE_FAULT,coalesce"
JSON_BODY='{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}'
if [ "${CG_LONG:-}" = 1 ]; then
    # The same body as make bench's `_long` rows (benches/run.sh).
    JSON_BODY=$(python3 -c '
import json
msgs = [{"role": ("user", "assistant")[i % 2], "content": "word " * 200} for i in range(60)]
print(json.dumps({"model": "gpt-4o-mini", "messages": msgs, "max_tokens": 100}))')
fi
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    if [ -z "${CG_KEEP:-}" ]; then rm -rf "$TMP"; else echo "kept $TMP" >&2; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
MOCK_PORT=$(free_port)
"$MOCK" --listen "127.0.0.1:$MOCK_PORT" >"$TMP/mock.log" 2>&1 &
PIDS+=($!)

# write_config NAME PORT ADMIN_PORT: the minimal gateway config of every run.
write_config() {
    local name=$1 port=$2 admin=$3
    mkdir -p "$TMP/$name/data"
    cat >"$TMP/$name/switchyard.yaml" <<EOF
listen: 127.0.0.1:$port
admin:
  listen: 127.0.0.1:$admin
  token: callgrind-admin-token
storage:
  path: $TMP/$name/data/switchyard.db
timeouts:
  drain: 2s
channels:
  mock:
    kind: openai
    base_url: http://127.0.0.1:$MOCK_PORT/v1
    keys: ["sk-mock-upstream"]
    models: [gpt-4o-mini]
    groups: [default]
clients:
  bench:
    key: sk-bench-client
    group: default
    # A limited client (every default feature on): the limiter admits and
    # settles every request; the limits are far above what the run sends.
    limits: {rpm: 100000000, tpm: 1000000000000, concurrency: 100000}
pricing:
  gpt-4o-mini: {input: 0.15, output: 0.60}
EOF
}

# gateway_run NAME [loadgen args...]: the gateway under callgrind for one kind of load (no
# args: idle for IDLE_SECONDS); prints the instruction total; the run's seconds land in
# $TMP/NAME.secs.
gateway_run() {
    local name=$1
    shift
    local port admin
    port=$(free_port)
    admin=$(free_port)
    write_config "$name" "$port" "$admin"
    valgrind --tool=callgrind --callgrind-out-file="$TMP/$name/callgrind.out" \
        "$SY" --config "$TMP/$name/switchyard.yaml" serve >"$TMP/$name/gateway.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    local i
    for ((i = 0; i < 1500; i++)); do
        curl -fs -o /dev/null "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
        kill -0 "$pid" 2>/dev/null || die "$name: the gateway exited: $(tail -5 "$TMP/$name/gateway.log")"
        sleep 0.1
    done
    local url="http://127.0.0.1:$port/v1/chat/completions"
    if [ $# -gt 0 ]; then
        # Warm-up (pools, caches, the first SQLite pages): not counted.
        "$LG" sse --url "$url" --header 'Authorization: Bearer sk-bench-client' --count 50 \
            --warmup 0 --timeout 60s "$@" >/dev/null
    fi
    # Count from here only: start-up and warm-up are zeroed away, so the figure does not
    # move with how long start-up took (it did by ~4k instructions per request).
    callgrind_control -z "$pid" >/dev/null 2>&1
    local t0 t1
    t0=$(date +%s.%N)
    if [ $# -gt 0 ]; then
        "$LG" sse --url "$url" \
            --header 'Authorization: Bearer sk-bench-client' --count "$N" --warmup 0 \
            --timeout 60s "$@" >"$TMP/$name/loadgen.json"
        python3 - "$TMP/$name/loadgen.json" "$N" "$name" <<'PY' || die "$name: requests failed"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["failed"] == 0 and r["ttlb"]["n"] == int(sys.argv[2]), r
# Only a stream ends with [DONE]; every stream must have.
assert sys.argv[3] != "sse" or r["incomplete"] == 0, r
PY
    else
        sleep "$IDLE_SECONDS"
    fi
    t1=$(date +%s.%N)
    python3 -c "print($t1 - $t0)" >"$TMP/$name.secs"
    # The store writer commits the last rows after its batch window: let it, then dump.
    sleep 3
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill -TERM "$pid"
    wait "$pid" || true
    local total dump
    # The dump lands beside the output file, suffixed with its number (.1).
    dump="$TMP/$name/callgrind.out.1"
    [ -f "$dump" ] || dump="$TMP/$name/callgrind.out.$pid.1"
    [ -f "$dump" ] || die "$name: no callgrind dump in $TMP/$name"
    total=$(sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' \
        "$dump" | head -1)
    [ -n "$total" ] || die "$name: no instruction total in $dump"
    echo "$total"
}

for ((i = 0; i < 100; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$MOCK_PORT") 2>/dev/null && break
    sleep 0.05
done

printf 'callgrind: %s non-stream requests\n' "$N" >&2
JSON_IR=$(gateway_run json \
    --body "$JSON_BODY")
printf 'callgrind: %s streaming requests (%s chunks each)\n' "$N" "$CHUNKS" >&2
SSE_IR=$(gateway_run sse \
    --body '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello."}]}' \
    --header "x-mock-fault: $SSE_FAULT")
IDLE_SECONDS=$(python3 -c "print(max(float(open('$TMP/json.secs').read()), float(open('$TMP/sse.secs').read())))")
printf 'callgrind: idle run (%.0f s)\n' "$IDLE_SECONDS" >&2
IDLE_IR=$(gateway_run idle)

# alloc_run NAME LOADGEN-ARGS...: allocations per request through the counting build.
alloc_run() {
    local name=alloc-$1
    shift
    local port admin
    port=$(free_port)
    admin=$(free_port)
    write_config "$name" "$port" "$admin"
    "$ALLOC_SY" --config "$TMP/$name/switchyard.yaml" serve >"$TMP/$name/gateway.log" 2>&1 &
    local pid=$!
    PIDS+=("$pid")
    local i
    for ((i = 0; i < 300; i++)); do
        curl -fs -o /dev/null "http://127.0.0.1:$admin/readyz" 2>/dev/null && break
        sleep 0.05
    done
    count() { curl -fs "http://127.0.0.1:$admin/metrics" | sed -n 's/^switchyard_allocations_total \([0-9]*\).*/\1/p'; }
    local url="http://127.0.0.1:$port/v1/chat/completions"
    "$LG" sse --url "$url" --header 'Authorization: Bearer sk-bench-client' --count 200 \
        --warmup 0 --timeout 60s "$@" >/dev/null
    # A scrape reads the counter first, then renders (and allocates): its own allocations
    # land after its reading. The first two publishes of the metric descriptions (a scrape
    # or the upkeep makes one; evmap applies its log to each copy in turn) allocate
    # thousands, once. So: two scrapes to get those done, two more back to back for what
    # a scrape itself allocates, subtracted from the window below.
    local a0 a1 s0
    count >/dev/null
    count >/dev/null
    s0=$(count)
    a0=$(count)
    [ -n "$a0" ] || die "$name: no switchyard_allocations_total (built without count-allocs?)"
    "$LG" sse --url "$url" --header 'Authorization: Bearer sk-bench-client' --count "$N" \
        --warmup 0 --timeout 60s "$@" >"$TMP/$name/loadgen.json"
    a1=$(count)
    kill -TERM "$pid"
    wait "$pid" || true
    python3 -c "print(round(($a1 - $a0 - ($a0 - $s0)) / $N, 1))"
}
JSON_ALLOCS=- SSE_ALLOCS=-
if [ "${CG_ALLOCS:-1}" != 0 ]; then
    printf 'allocations: %s requests of each kind through the count-allocs build\n' "$N" >&2
    JSON_ALLOCS=$(alloc_run json \
        --body "$JSON_BODY")
    SSE_ALLOCS=$(alloc_run sse \
        --body '{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"Say hello."}]}' \
        --header "x-mock-fault: $SSE_FAULT")
fi

python3 - "$N" "$JSON_IR" "$SSE_IR" "$IDLE_IR" "$CHUNKS" "$(git rev-parse --short HEAD)" \
    "$JSON_ALLOCS" "$SSE_ALLOCS" "${CG_LONG:-}" <<'PY'
import sys
n, js, sse, idle, chunks, commit = int(sys.argv[1]), *map(int, sys.argv[2:5]), sys.argv[5], sys.argv[6]
ja, sa = sys.argv[7], sys.argv[8]
print(f"commit {commit}: per request ({n} requests each; callgrind idle {idle:,} subtracted)")
label = "non-stream chat, 62 KB:" if sys.argv[9] == "1" else "non-stream chat:"
print(f"  {label:<24}{(js - idle) / n:>12,.0f} instructions  {ja:>5} allocations")
print(f"  streaming chat ({chunks} chunks): {(sse - idle) / n:>12,.0f} instructions  {sa:>5} allocations")
PY
