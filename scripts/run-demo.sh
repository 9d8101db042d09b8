#!/usr/bin/env bash
# Start the mock upstream in the background and switchyard in the foreground
# with the example configuration; the mock is stopped when the gateway exits.
# Used by `make run`; expects both binaries to be built already.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

target_dir="${CARGO_TARGET_DIR:-target}"
gateway="${SWITCHYARD_BIN:-$target_dir/debug/switchyard}"
mock="${MOCK_UPSTREAM_BIN:-$target_dir/debug/examples/mock_upstream}"
config="${CONFIG:-config.example.yaml}"
mock_listen="${MOCK_LISTEN:-127.0.0.1:8081}"

for bin in "$gateway" "$mock"; do
    if [[ ! -x "$bin" ]]; then
        echo "error: $bin not found; build it first (make build)" >&2
        exit 1
    fi
done

mock_log="$(mktemp -t switchyard-mock.XXXXXX.log)"
mock_pid=""

cleanup() {
    if [[ -n "$mock_pid" ]] && kill -0 "$mock_pid" 2>/dev/null; then
        kill "$mock_pid" 2>/dev/null || true
        wait "$mock_pid" 2>/dev/null || true
    fi
    rm -f "$mock_log"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$mock" --listen "$mock_listen" --name demo >"$mock_log" 2>&1 &
mock_pid=$!

# Wait (at most 10 s) for the mock to report its address.
for _ in $(seq 1 100); do
    if grep -q "listening on" "$mock_log"; then
        break
    fi
    if ! kill -0 "$mock_pid" 2>/dev/null; then
        echo "error: mock upstream exited during start-up:" >&2
        cat "$mock_log" >&2
        exit 1
    fi
    sleep 0.1
done
if ! grep -q "listening on" "$mock_log"; then
    echo "error: mock upstream did not start within 10 s:" >&2
    cat "$mock_log" >&2
    exit 1
fi
echo "mock upstream: $(grep -m1 "listening on" "$mock_log")"
echo "switchyard:    serving with $config (client key sk-demo-alice, Ctrl-C to stop)"

# Foreground, but not exec: the EXIT trap must still stop the mock.
"$gateway" serve --config "$config"
