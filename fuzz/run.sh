#!/usr/bin/env bash
# Fuzz every target for a bounded time (FUZZ_SECONDS each, default 60).
# With cargo-fuzz (libFuzzer needs nightly features; on a stable toolchain RUSTC_BOOTSTRAP=1
# unlocks them) each target runs under libFuzzer. If cargo-fuzz cannot be installed or built,
# the same harnesses run as a bounded proptest (`cargo test --release`, FUZZ_CASES inputs each).
set -euo pipefail
cd "$(dirname "$0")"
secs="${FUZZ_SECONDS:-60}"
targets=(sse_framer status_set usage hidden_error request_peek config_load)

fallback() {
  echo "fuzz: running the stable fallback (proptest, FUZZ_CASES=${FUZZ_CASES:-200000})"
  FUZZ_CASES="${FUZZ_CASES:-200000}" cargo test --release --tests
}

if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked || { fallback; exit; }
fi
export RUSTC_BOOTSTRAP=1
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  if ! cargo fuzz run --features libfuzzer "$t" "corpus/$t" -- -max_total_time="$secs"; then
    status=$?
    if [ -d "artifacts/$t" ] && [ -n "$(ls -A "artifacts/$t" 2>/dev/null)" ]; then
      echo "fuzz: $t found a crash: see fuzz/artifacts/$t" >&2
      exit "$status"
    fi
    echo "fuzz: cargo-fuzz could not run $t; using the fallback" >&2
    fallback
    exit
  fi
done
