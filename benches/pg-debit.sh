#!/usr/bin/env bash
# The shared-quota benchmark (examples/pg_debit_bench.rs) against a private PostgreSQL:
# initdb in a temp dir, started on a free port on 127.0.0.1, stopped and removed on exit.
# BENCH_PROFILE=dev skips the release build (numbers then overstate CPU cost).
set -euo pipefail
cd "$(dirname "$0")/.."

pg_bin() {
  local d
  for d in $(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -rV); do
    [ -x "$d/$1" ] && { echo "$d/$1"; return; }
  done
  command -v "$1" || { echo "$1 not found: install the Debian package postgresql" >&2; exit 1; }
}

as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

dir=$(mktemp -d)
chmod 0777 "$dir"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cleanup() {
  as_pg "$(pg_bin pg_ctl)" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
as_pg "$(pg_bin initdb)" -U switchyard --auth=trust -E UTF8 --no-sync -D "$dir/data" >/dev/null
as_pg "$(pg_bin pg_ctl)" -D "$dir/data" -l "$dir/pg.log" -w \
  -o "-p $port -c listen_addresses=127.0.0.1 -k $dir" start >/dev/null
as_pg "$(pg_bin createdb)" -h 127.0.0.1 -p "$port" -U switchyard switchyard

if [ "${BENCH_PROFILE:-release}" = dev ]; then
  cargo run -q --example pg_debit_bench -- "postgres://switchyard@127.0.0.1:$port/switchyard"
else
  cargo run -q --release --example pg_debit_bench -- "postgres://switchyard@127.0.0.1:$port/switchyard"
fi
