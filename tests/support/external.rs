//! Throwaway PostgreSQL and Redis servers for tests, and real switchyard processes (replicas).
//!
//! Every server here is the test's own: a fresh `redis-server` or `initdb` cluster on a free
//! port under a temp dir, stopped when dropped. The machine's shared instances on the default
//! ports are never touched. When run as root, PostgreSQL runs as the `postgres` user (or
//! `nobody`), since it refuses to run as root. A missing server binary is a test failure with a
//! message saying which Debian package provides it (`.ci/run` installs them).
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free TCP port on 127.0.0.1 (bound and released; good enough for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn wait_until(what: &str, limit: Duration, mut ready: impl FnMut() -> bool) {
    let started = Instant::now();
    while started.elapsed() < limit {
        if ready() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("{what} did not become ready within {limit:?}");
}

fn which(bin: &str, package: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(bin))
            .find(|c| c.is_file())
    });
    found.unwrap_or_else(|| panic!("`{bin}` not found: install the Debian package `{package}`"))
}

/// A private `redis-server` on a free port, nothing kept on disk.
pub struct Redis {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    started_once: bool,
}

impl Redis {
    pub fn start() -> Redis {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut redis = Redis {
            port: free_port(),
            child: None,
            dir,
            started_once: false,
        };
        redis.spawn();
        redis
    }

    /// Start `redis-server`; a port taken meanwhile by another test (`free_port` races) moves
    /// a first start to a new port, and is retried on the same port for a restart.
    fn spawn(&mut self) {
        let first = self.child.is_none() && !self.started_once;
        for attempt in 0..5 {
            let bin = which("redis-server", "redis-server");
            let mut child = Command::new(bin)
                .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
                .arg("--dir")
                .arg(self.dir.path())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-server starts");
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(10) {
                if redis_ping(self.port) {
                    self.child = Some(child);
                    self.started_once = true;
                    return;
                }
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
            assert!(
                attempt < 4,
                "redis-server did not start on port {}",
                self.port
            );
            if first {
                self.port = free_port();
            } else {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kill the server (SIGKILL): the fault "Redis unreachable".
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// PING over a raw socket (no client crate needed).
fn redis_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

/// A private PostgreSQL cluster (`initdb` in a temp dir, `pg_ctl` on a free port), trust auth,
/// superuser `switchyard`, database `switchyard`.
pub struct Postgres {
    pub port: u16,
    dir: tempfile::TempDir,
    data: PathBuf,
    running: bool,
    started_once: bool,
}

fn pg_bin(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|rd| rd.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    dirs.sort();
    dirs.reverse();
    dirs.into_iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| which(name, "postgresql"))
}

/// Run a command as the unprivileged user PostgreSQL needs when we are root.
fn as_pg_user(bin: &Path) -> Command {
    // SAFETY-free check: geteuid via the `id` command keeps this file dependency-free.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        return Command::new(bin);
    }
    let user = if Command::new("id")
        .arg("postgres")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        "postgres"
    } else {
        "nobody"
    };
    let mut command = Command::new("runuser");
    command.args(["-u", user, "--"]).arg(bin);
    command
}

impl Postgres {
    pub fn start() -> Postgres {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = dir.path().join("data");
        // The cluster belongs to the unprivileged user: give it the temp dir.
        let _ = Command::new("chmod").arg("0777").arg(dir.path()).status();
        let out = as_pg_user(&pg_bin("initdb"))
            .args([
                "-U",
                "switchyard",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("initdb runs");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut pg = Postgres {
            port: free_port(),
            dir,
            data,
            running: false,
            started_once: false,
        };
        pg.start_server();
        let st = as_pg_user(&pg_bin("createdb"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &pg.port.to_string(),
                "-U",
                "switchyard",
            ])
            .arg("switchyard")
            .status()
            .expect("createdb runs");
        assert!(st.success(), "createdb failed");
        pg
    }

    /// Start (or restart) the server on its port. `free_port` can race with another test
    /// that binds the same port in between: a first start then moves to a new port, a restart
    /// (which must keep its URL) tries the same port again.
    pub fn start_server(&mut self) {
        let first = !self.started_once;
        for attempt in 0..5 {
            if self.try_start() {
                self.started_once = true;
                self.running = true;
                let port = self.port;
                wait_until("postgres", Duration::from_secs(30), || {
                    std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
                });
                return;
            }
            let log = std::fs::read_to_string(self.dir.path().join("pg.log")).unwrap_or_default();
            if attempt == 4 {
                panic!("pg_ctl start failed on port {}:\n{log}", self.port);
            }
            if first {
                self.port = free_port();
            } else {
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }

    fn try_start(&self) -> bool {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        as_pg_user(&pg_bin("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-o", &opts, "-l"])
            .arg(self.dir.path().join("pg.log"))
            .args(["-w", "-t", "30", "start"])
            .stdout(Stdio::null())
            .status()
            .expect("pg_ctl runs")
            .success()
    }

    /// Stop the server at once (`-m immediate`): the fault "PostgreSQL unreachable".
    pub fn stop(&mut self) {
        if !self.running {
            return;
        }
        let _ = as_pg_user(&pg_bin("pg_ctl"))
            .arg("-D")
            .arg(&self.data)
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        self.running = false;
    }

    pub fn url(&self) -> String {
        format!("postgres://switchyard@127.0.0.1:{}/switchyard", self.port)
    }

    /// Run one SQL statement with `psql` and return its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(pg_bin("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "switchyard", "-d", "switchyard", "-At", "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            out.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A real switchyard process started from a config file; killed when dropped.
pub struct Replica {
    pub child: Child,
    /// `http://127.0.0.1:PORT` of the client listener and the admin listener.
    pub base: String,
    pub admin: String,
    pub log: PathBuf,
}

impl Replica {
    /// Start the binary with `config`, whose `listen` and `admin.listen` must be fixed ports
    /// (use [`free_port`]); wait until `/readyz` answers 200.
    pub fn spawn(config: &Path, listen: u16, admin: u16) -> Replica {
        let log = config.with_extension(format!("{listen}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("--config")
            .arg(config)
            .arg("serve")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("switchyard starts");
        let replica = Replica {
            child,
            base: format!("http://127.0.0.1:{listen}"),
            admin: format!("http://127.0.0.1:{admin}"),
            log,
        };
        wait_until("switchyard replica", Duration::from_secs(30), || {
            http_status(admin, "/readyz") == Some(200)
        });
        replica
    }

    /// `kill -9`: no drain, no flush.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Status of a plain `GET path` on 127.0.0.1:port (blocking, for readiness checks).
fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        socket,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = [0u8; 32];
    let read = socket.read(&mut buf).ok()?;
    std::str::from_utf8(&buf[..read])
        .ok()?
        .get(9..12)?
        .parse()
        .ok()
}
