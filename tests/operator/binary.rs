//! The real `switchyard` binary for tests that read its log lines (JSON) or talk to it as
//! systemd does: spawned with `--log-format json`, killed on drop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_switchyard");

pub struct Proc {
    pub child: Child,
    /// `http://` base of the client listener.
    pub base: String,
    /// `http://` base of the admin listener.
    pub admin: String,
    /// Every stderr line so far, one JSON object each.
    pub lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    /// `serve` on `config`, with extra environment; returns once it logged "switchyard ready".
    pub fn spawn(config: &Path, env: &[(&str, &Path)]) -> Proc {
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--log-format", "json", "--config"])
            .arg(config)
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let l2 = lines.clone();
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                // Kept before the ready signal goes out: a caller that reads the lines
                // as soon as `spawn` returns must find the ready line among them.
                l2.lock().unwrap().push(line.clone());
                if line.contains("switchyard ready") {
                    let body: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                    let addr = |k: &str| body[k].as_str().unwrap_or_default().to_string();
                    let _ = tx.send((addr("listen"), addr("admin")));
                }
            }
        });
        let (listen, admin) = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("ready line");
        Proc {
            child,
            base: format!("http://{listen}"),
            admin: format!("http://{admin}"),
            lines,
        }
    }

    /// The log lines so far, parsed.
    pub fn logs(&self) -> Vec<serde_json::Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Wait (up to 10 s) for a log line for which `f` holds.
    pub async fn wait_log(
        &self,
        what: &str,
        f: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        for _ in 0..200 {
            if let Some(l) = self.logs().into_iter().find(|l| f(l)) {
                return l;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "no log line for {what}:\n{}",
            self.lines.lock().unwrap().join("\n")
        );
    }
}
