//! The test harness's own PostgreSQL and Redis (R17 tests depend on them): each starts on a
//! free port, answers, and is gone after `stop` — the machine's shared instances untouched.
use crate::support;

use support::external::{Postgres, Redis};

#[test]
fn a_private_redis_answers_and_stops() {
    let mut redis = Redis::start();
    assert_ne!(redis.port, 6379, "never the shared instance");
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "SET", "k", "v"])
        .output()
        .expect("redis-cli runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    redis.restart();
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &redis.port.to_string(), "GET", "k"])
        .output()
        .expect("redis-cli runs");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "",
        "restart is empty"
    );
    redis.stop();
    assert!(std::net::TcpStream::connect(("127.0.0.1", redis.port)).is_err());
}

#[test]
fn a_private_postgres_answers_and_stops() {
    let mut pg = Postgres::start();
    assert_ne!(pg.port, 5432, "never the shared instance");
    pg.psql("CREATE TABLE t (x int)");
    pg.psql("INSERT INTO t VALUES (41), (1)");
    assert_eq!(pg.psql("SELECT sum(x) FROM t"), "42");
    pg.stop();
    assert!(std::net::TcpStream::connect(("127.0.0.1", pg.port)).is_err());
    pg.start_server();
    assert_eq!(
        pg.psql("SELECT count(*) FROM t"),
        "2",
        "data survives a restart"
    );
}
