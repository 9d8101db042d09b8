#!/usr/bin/env bash
# `make fuzz`: fuzz every target for a bounded time (FUZZ_SECONDS each, default 60).
# With cargo-fuzz, each target runs under libFuzzer. The toolchain is stable: RUSTC_BOOTSTRAP=1
# unlocks the unstable flags cargo-fuzz passes, and `-s none` skips the sanitizer runtimes that
# only nightly ships. If cargo-fuzz cannot be installed or a target cannot be built, the same
# harnesses (fuzz/src/lib.rs) run as a bounded proptest: `cargo test --release --tests` with
# FUZZ_CASES random and structured inputs per harness.
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
  status=0
  cargo fuzz run --features libfuzzer -s none "$t" "corpus/$t" -- -max_total_time="$secs" || status=$?
  if [ "$status" -ne 0 ]; then
    if [ -d "artifacts/$t" ] && [ -n "$(ls -A "artifacts/$t" 2>/dev/null)" ]; then
      echo "fuzz: $t found a crash: see fuzz/artifacts/$t" >&2
      exit "$status"
    fi
    echo "fuzz: cargo-fuzz could not run $t; using the fallback" >&2
    fallback
    exit
  fi
done
