#!/usr/bin/env bash
# Same-minute A/B of two gateway binaries : both run the `make bench` config in
# front of one mock upstream; `wrk` alternates between them for AB_ROUNDS rounds and each
# round prints RPS and the gateway's CPU per request (utime+stime from /proc/PID/stat over
# the round / requests), in ABBA order; the last lines are the means. On a shared machine
# only an interleaved comparison like this one says whether a change made the request path
# cheaper.
#
# Usage: bash benches/ab.sh BASE_BINARY NEW_BINARY
# Knobs (env): AB_ROUNDS (3), AB_SECS (4), AB_CONNS (64), AB_BODY (a wrk lua script;
# benches/post.lua), PERF_NEW (a file: `perf record -g` of the new binary during its
# last round is written there), PERF_ARGS (perf record's options; `-g`; e.g.
# `--call-graph dwarf -F 999` for whole stacks of a build without frame pointers).
# Needs: wrk, curl, python3 and target/release/examples/mock_upstream (`make bench` builds
# and installs these). 127.0.0.1 only; every process it starts is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BASE_BINARY NEW_BINARY" >&2; exit 2; }
BIN=("$1" "$2")
ROUNDS=${AB_ROUNDS:-3}
SECS=${AB_SECS:-4}
CONNS=${AB_CONNS:-64}
LUA=${AB_BODY:-benches/post.lua}
MOCK=${CARGO_TARGET_DIR:-target}/release/examples/mock_upstream
for b in "${BIN[@]}" "$MOCK"; do [ -x "$b" ] || { echo "ab: missing $b" >&2; exit 1; }; done
command -v wrk >/dev/null || { echo "ab: wrk is missing (apt-get install wrk)" >&2; exit 1; }

TMP=$(mktemp -d /tmp/switchyard-ab.XXXXXX)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_port() {
    local i
    for ((i = 0; i < 200; i++)); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "ab: nothing listens on $1" >&2
    exit 1
}

MOCK_PORT=$(free_port)
"$MOCK" --listen "127.0.0.1:$MOCK_PORT" >"$TMP/mock.log" 2>&1 &
PIDS+=($!)
wait_port "$MOCK_PORT"

GW_PID=()
GW_PORT=()
for i in 0 1; do
    port=$(free_port)
    admin=$(free_port)
    mkdir -p "$TMP/gw$i/data"
    sed -e "s|@TMP@|$TMP/gw$i|g" -e "s|@MOCK_PORT@|$MOCK_PORT|g" -e "s|@SY_PORT@|$port|g" \
        -e "s|@SY_ADMIN_PORT@|$admin|g" -e "s|@WEIGHT@|1|g" benches/switchyard.yaml.tmpl \
        >"$TMP/gw$i/switchyard.yaml"
    "${BIN[$i]}" --config "$TMP/gw$i/switchyard.yaml" serve >"$TMP/gw$i/log" 2>&1 &
    GW_PID+=($!)
    PIDS+=($!)
    GW_PORT+=("$port")
    wait_port "$port"
done

cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
round() {
    local i=$1 perf=${2:-} t0 t1 out reqs ppid=
    wrk -t2 -c"$CONNS" -d1s -s "$LUA" "http://127.0.0.1:${GW_PORT[$i]}/v1/chat/completions" >/dev/null
    if [ -n "$perf" ]; then
        # shellcheck disable=SC2086 # PERF_ARGS is a list of options
        perf record ${PERF_ARGS:--g} -o "$perf" -p "${GW_PID[$i]}" >/dev/null 2>&1 &
        ppid=$!
    fi
    t0=$(cpu_ticks "${GW_PID[$i]}")
    out=$(wrk -t2 -c"$CONNS" -d"${SECS}s" -s "$LUA" "http://127.0.0.1:${GW_PORT[$i]}/v1/chat/completions")
    t1=$(cpu_ticks "${GW_PID[$i]}")
    if [ -n "$ppid" ]; then kill -INT "$ppid"; wait "$ppid" || true; fi
    reqs=$(sed -n 's/^BENCHJSON .*"requests":\([0-9]*\).*/\1/p' <<<"$out")
    python3 -c "
import os, sys
hz = os.sysconf('SC_CLK_TCK'); reqs = int('$reqs'); secs = float('$SECS')
cpu = ($t1 - $t0) / hz * 1e6 / max(reqs, 1)
print(f'{sys.argv[1]:<5} {reqs / secs:>9,.0f} rps  {cpu:6.1f} us CPU/req')" "$([ "$i" = 0 ] && echo base || echo new)"
}
# ABBA order: the second binary of a round measured slower in both positions (by up to
# ~10 %), so the order alternates and the summary averages over both.
for ((r = 1; r <= ROUNDS; r++)); do
    perf_arg=
    [ "$r" = "$ROUNDS" ] && perf_arg=${PERF_NEW:-}
    if ((r % 2)); then
        round 0
        round 1 "$perf_arg"
    else
        round 1 "$perf_arg"
        round 0
    fi
done | tee "$TMP/rounds.txt"
python3 - "$TMP/rounds.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
for who in ("base", "new"):
    cpu = [float(r[3]) for r in rows if r[0] == who]
    print(f"{who:<5} mean {sum(cpu) / len(cpu):6.1f} us CPU/req over {len(cpu)} rounds")
PY
