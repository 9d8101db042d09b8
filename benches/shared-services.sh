#!/usr/bin/env bash
# Private Redis and PostgreSQL for the shared-mode bench (R17), never the machine's own:
#   shared-services.sh check                       exit 0 when both can be started here
#   shared-services.sh start DIR REDIS_PORT PG_PORT  start both on 127.0.0.1, data in DIR
#   shared-services.sh stop DIR                    stop both, remove DIR
# PostgreSQL refuses to run as root: as root, it runs as the `postgres` user.
set -euo pipefail

pg_bin() {
    local d
    for d in $(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -rV); do
        [ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
    done
    command -v "$1"
}
as_pg() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
check)
    command -v redis-server >/dev/null && pg_bin initdb >/dev/null && pg_bin pg_ctl >/dev/null
    ;;
start)
    dir=$2 redis_port=$3 pg_port=$4
    mkdir -p "$dir/redis"
    # The cluster lives in its own world-traversable temp dir: DIR's parents may be private
    # to root, and the postgres user must reach its data directory and socket.
    pgroot=$(mktemp -d /tmp/switchyard-bench-pg.XXXXXX)
    chmod 0777 "$pgroot"
    echo "$pgroot" >"$dir/pgroot"
    redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$dir/redis" --daemonize yes --pidfile "$dir/redis/redis.pid" \
        --logfile "$dir/redis/redis.log" >/dev/null
    as_pg "$(pg_bin initdb)" -U switchyard --auth=trust -E UTF8 --no-sync -D "$pgroot/data" >/dev/null
    as_pg "$(pg_bin pg_ctl)" -D "$pgroot/data" -l "$pgroot/pg.log" -w \
        -o "-p $pg_port -c listen_addresses=127.0.0.1 -k $pgroot" start >/dev/null
    as_pg "$(pg_bin createdb)" -h 127.0.0.1 -p "$pg_port" -U switchyard switchyard
    ;;
stop)
    dir=$2
    if [ -f "$dir/redis/redis.pid" ]; then kill "$(cat "$dir/redis/redis.pid")" 2>/dev/null || true; fi
    if [ -f "$dir/pgroot" ]; then
        pgroot=$(cat "$dir/pgroot")
        as_pg "$(pg_bin pg_ctl)" -D "$pgroot/data" -m immediate -w stop >/dev/null 2>&1 || true
        rm -rf "$pgroot"
    fi
    rm -rf "$dir"
    ;;
*)
    echo "usage: $0 check | start DIR REDIS_PORT PG_PORT | stop DIR" >&2
    exit 2
    ;;
esac
