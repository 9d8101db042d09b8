//! Hot reload as operators save files (R2.4): every save style reloads
//! exactly once — a plain write, `cp` over, `sed -i`, an editor's rename-over, a Kubernetes
//! ConfigMap `..data` swap, and a symlinked config edited at its target — and a save that
//! changes nothing reloads nothing. Counts come from the generation and the gateway's own
//! reload counts (`GET /admin/config`).

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::support::*;
use switchyard::app::{start, Running};

/// Longer than the debounce and settle time: a second reload would have happened by then.
const QUIET: Duration = Duration::from_millis(1500);

struct Rig {
    running: Option<Running>,
    path: PathBuf,
    dir: tempfile::TempDir,
    mocks: std::collections::HashMap<String, MockUpstream>,
}

fn yaml(
    dir: &Path,
    mocks: &std::collections::HashMap<String, MockUpstream>,
    model: &str,
) -> String {
    format!(
        "{}{}",
        head(dir),
        fill(
            &format!("channels:\n{}{CLIENTS}", channel("up", "{up}", 0, &[model])),
            mocks
        )
    )
}

impl Rig {
    /// Start on `path`, after `layout` has put the first config (serving `m1`) there.
    async fn start(layout: impl FnOnce(&Path, &str) -> PathBuf) -> Rig {
        let mocks = mocks(&["up"]).await;
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let path = layout(&root, &yaml(&root, &mocks, "m1"));
        let running = start(&path).await.expect("gateway starts");
        Rig {
            running: Some(running),
            path,
            dir,
            mocks,
        }
    }

    fn root(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn text(&self, model: &str) -> String {
        yaml(&self.root(), &self.mocks, model)
    }

    fn generation(&self) -> u64 {
        self.running.as_ref().unwrap().gateway.generation()
    }

    /// Reloads of this gateway by result (`GET /admin/config`'s counts).
    async fn reloads(&self, result: &str) -> u64 {
        let view = self.running.as_ref().unwrap().status.view();
        view["reloads"][result].as_u64().unwrap()
    }

    async fn serves(&self, model: &str) -> bool {
        let base = self.running.as_ref().unwrap().bound.listen;
        reqwest::Client::new()
            .post(format!("http://{base}/v1/chat/completions"))
            .bearer_auth(ALICE)
            .json(&serde_json::json!({"model": model, "messages": []}))
            .send()
            .await
            .unwrap()
            .status()
            == 200
    }

    /// After `save`, exactly one reload is applied and `model` is served.
    async fn saved_once(&self, what: &str, model: &str, save: impl FnOnce()) {
        let (gen, ok) = (self.generation(), self.reloads("ok").await);
        save();
        let mut applied = false;
        for _ in 0..200 {
            if self.generation() > gen {
                applied = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            applied,
            "{what}: no reload: {}",
            self.running.as_ref().unwrap().status.view()
        );
        tokio::time::sleep(QUIET).await;
        assert_eq!(self.generation(), gen + 1, "{what}: more than one reload");
        assert_eq!(self.reloads("ok").await, ok + 1, "{what}: reload count");
        assert_eq!(self.reloads("error").await, 0, "{what}: a reload failed");
        assert!(self.serves(model).await, "{what}: {model} not served");
    }

    async fn stop(mut self) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
    }
}

fn plain(root: &Path, text: &str) -> PathBuf {
    let config_path = root.join("switchyard.yaml");
    std::fs::write(&config_path, text).unwrap();
    config_path
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{cmd:?}: {out:?}");
}

#[tokio::test]
async fn a_plain_write_reloads_once() {
    let rig = Rig::start(plain).await;
    let text = rig.text("m2");
    rig.saved_once("plain write", "m2", || {
        std::fs::write(&rig.path, text).unwrap()
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn cp_over_the_file_reloads_once() {
    let rig = Rig::start(plain).await;
    let src = rig.root().join("new.yaml.in");
    std::fs::write(&src, rig.text("m2")).unwrap();
    rig.saved_once("cp", "m2", || {
        run(Command::new("cp").arg(&src).arg(&rig.path))
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn sed_in_place_reloads_once() {
    let rig = Rig::start(plain).await;
    rig.saved_once("sed -i", "m2", || {
        run(Command::new("sed")
            .args(["-i", "s/models: \\[m1\\]/models: [m2]/"])
            .arg(&rig.path))
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn an_editors_rename_over_reloads_once() {
    let rig = Rig::start(plain).await;
    // Write a temporary file and rename it over the config (atomic savers).
    let tmp = rig.root().join(".switchyard.yaml.swp");
    let text = rig.text("m2");
    rig.saved_once("rename over", "m2", || {
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &rig.path).unwrap();
    })
    .await;
    // Move the original away, write a new file, drop the backup (vim's writebackup).
    let backup = rig.root().join("switchyard.yaml~");
    let text = rig.text("m3");
    rig.saved_once("backup and write", "m3", || {
        std::fs::rename(&rig.path, &backup).unwrap();
        std::fs::write(&rig.path, text).unwrap();
        std::fs::remove_file(&backup).unwrap();
    })
    .await;
    rig.stop().await;
}

/// How a Kubernetes ConfigMap volume updates: a new timestamped directory, a new `..data`
/// link renamed over the old one, the old directory removed.
fn configmap_swap(root: &Path, stamp: &str, text: &str) {
    let dir = root.join(format!("..{stamp}"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("switchyard.yaml"), text).unwrap();
    let old = std::fs::read_link(root.join("..data")).ok();
    symlink(format!("..{stamp}"), root.join("..data_tmp")).unwrap();
    std::fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap();
    if let Some(old) = old {
        std::fs::remove_dir_all(root.join(old)).unwrap();
    }
}

#[tokio::test]
async fn a_configmap_data_swap_reloads_once_each_time() {
    let rig = Rig::start(|root, text| {
        std::fs::create_dir(root.join("..2024_01_01")).unwrap();
        std::fs::write(root.join("..2024_01_01/switchyard.yaml"), text).unwrap();
        symlink("..2024_01_01", root.join("..data")).unwrap();
        symlink("..data/switchyard.yaml", root.join("switchyard.yaml")).unwrap();
        root.join("switchyard.yaml")
    })
    .await;
    let (root, t2, t3) = (rig.root(), rig.text("m2"), rig.text("m3"));
    rig.saved_once("first ..data swap", "m2", || {
        configmap_swap(&root, "2024_01_02", &t2)
    })
    .await;
    // The link is followed again after the swap: the next one is seen too.
    rig.saved_once("second ..data swap", "m3", || {
        configmap_swap(&root, "2024_01_03", &t3)
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn a_symlinked_config_edited_at_its_target_reloads_once() {
    let rig = Rig::start(|root, text| {
        std::fs::create_dir(root.join("srv")).unwrap();
        std::fs::create_dir(root.join("etc")).unwrap();
        std::fs::write(root.join("srv/switchyard.yaml"), text).unwrap();
        symlink(
            root.join("srv/switchyard.yaml"),
            root.join("etc/switchyard.yaml"),
        )
        .unwrap();
        root.join("etc/switchyard.yaml")
    })
    .await;
    let target = rig.root().join("srv/switchyard.yaml");
    let text = rig.text("m2");
    rig.saved_once("write at the target", "m2", || {
        std::fs::write(&target, text).unwrap()
    })
    .await;
    rig.saved_once("sed -i at the target", "m3", || {
        run(Command::new("sed")
            .args(["-i", "s/models: \\[m2\\]/models: [m3]/"])
            .arg(&target))
    })
    .await;
    // Re-pointing the link at another file is followed as well.
    let other = rig.root().join("srv/other.yaml");
    std::fs::write(&other, rig.text("m4")).unwrap();
    let link = rig.path.clone();
    rig.saved_once("link re-pointed", "m4", || {
        let tmp = link.with_extension("new");
        symlink(&other, &tmp).unwrap();
        std::fs::rename(&tmp, &link).unwrap();
    })
    .await;
    rig.stop().await;
}

#[tokio::test]
async fn a_save_that_changes_nothing_reloads_nothing() {
    let rig = Rig::start(plain).await;
    let same = std::fs::read_to_string(&rig.path).unwrap();
    let (gen, ok) = (rig.generation(), rig.reloads("ok").await);
    std::fs::write(&rig.path, &same).unwrap();
    run(Command::new("touch").arg(&rig.path));
    run(Command::new("sed")
        .args(["-i", "s/nothing-matches-this//"])
        .arg(&rig.path));
    tokio::time::sleep(QUIET).await;
    assert_eq!(
        rig.generation(),
        gen,
        "unchanged content bumped the generation"
    );
    assert_eq!(rig.reloads("ok").await, ok);
    assert!(rig.serves("m1").await);
    rig.stop().await;
}
