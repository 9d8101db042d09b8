//! The Redis store's background task: settles, cancels and drops of grants (queued, since
//! none of them can await), and the renewal of live concurrency leases every third of
//! [`super::LEASE`]. A failed call is not retried: an unreleased lease expires by itself,
//! an unsettled reservation stays counted as the charge (as a dropped local grant's does).
//!
//! B-shared-pipeline: everything queued since the last round trip goes out as ONE pipeline
//! (at most [`MAX_BATCH`] releases), sent without waiting for the previous one's reply, so
//! releases keep up with admissions instead of being capped at one per round trip; all live leases are renewed in one pipeline; the queue is
//! bounded ([`QUEUE`]): an op that finds it full is dropped and counted (its lease expires,
//! its reservation stays counted — the outcome of a dropped grant).

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::grant::Taken;
use super::lua::{RELEASE_SCRIPT, RENEW_SCRIPT};
use super::{keys, LEASE};
use crate::shared::conn::{CallError, Conn};

/// Ops queued for the release task at most.
pub const QUEUE: usize = 65_536;
/// Releases sent in one pipeline at most.
pub const MAX_BATCH: usize = 1024;

/// One queued operation.
#[derive(Debug)]
pub(crate) enum Op {
    /// A lease was taken: renew it until released.
    Hold(Arc<str>, Arc<str>),
    Settle(Taken, u64),
    Cancel(Taken),
    Drop(Taken),
}

/// The sending side of the release queue.
pub(crate) type Ops = mpsc::Sender<Op>;

/// Queue `op` without waiting; a full queue drops it (counted).
pub(crate) fn queue(ops: &Ops, op: Op) {
    if let Err(mpsc::error::TrySendError::Full(_)) = ops.try_send(op) {
        metrics::counter!(crate::telemetry::SHARED_LIMIT_RELEASES_DROPPED).increment(1);
    }
}

/// The release queue and its receiving end.
pub(crate) fn channel() -> (Ops, mpsc::Receiver<Op>) {
    mpsc::channel(QUEUE)
}

/// Live leases: subject prefix → admission ids.
type Live = HashMap<Arc<str>, Vec<Arc<str>>>;

pub(crate) async fn run(conn: Conn, mut rx: mpsc::Receiver<Op>) {
    let mut live = Live::new();
    let mut renew = tokio::time::interval(LEASE / 3);
    renew.tick().await;
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        tokio::select! {
            n = rx.recv_many(&mut batch, MAX_BATCH) => {
                if n == 0 {
                    return;
                }
                release_all(&conn, &mut live, batch.drain(..)).await;
            }
            _ = renew.tick() => renew_all(&conn, &live).await,
        }
    }
}

/// One pipeline for every release in `ops` (holds only update the live set).
async fn release_all(conn: &Conn, live: &mut Live, ops: impl Iterator<Item = Op>) {
    let mut pipe = redis::pipe();
    let mut n = 0;
    for op in ops {
        let (name, t, actual) = match op {
            Op::Hold(p, id) => {
                live.entry(p).or_default().push(id);
                continue;
            }
            Op::Settle(t, a) => ("settle", t, a),
            Op::Cancel(t) => ("cancel", t, 0),
            Op::Drop(t) => ("drop", t, 0),
        };
        if t.lease {
            forget(live, &t);
        }
        let [rpm, rpd, tpm, cc] = keys(&t.prefix);
        pipe.cmd("EVALSHA")
            .arg(RELEASE_SCRIPT.get_hash())
            .arg(4)
            .arg(rpm)
            .arg(rpd)
            .arg(tpm)
            .arg(cc)
            .arg(name)
            .arg(&*t.id)
            .arg(t.granules[0])
            .arg(t.granules[1])
            .arg(t.granules[2])
            .arg(t.tokens)
            .arg(actual)
            .arg(t.now_ms.unwrap_or(0))
            .ignore();
        n += 1;
    }
    if n > 0 {
        // Sent at once, not after the previous batch's reply: releases never wait a round
        // trip behind each other (each id is released once, so order does not matter).
        let conn = conn.clone();
        tokio::spawn(async move {
            if let Err(e) = exec(&conn, &pipe).await {
                conn.health.mark_down(&e);
            }
        });
    }
}

fn forget(live: &mut Live, taken: &Taken) {
    if let Some(ids) = live.get_mut(&taken.prefix) {
        ids.retain(|i| *i != taken.id);
        if ids.is_empty() {
            live.remove(&taken.prefix);
        }
    }
}

/// Every live lease renewed in one pipeline.
async fn renew_all(conn: &Conn, live: &Live) {
    if live.is_empty() {
        return;
    }
    let mut pipe = redis::pipe();
    for (prefix, ids) in live {
        let cc = keys(prefix)[3].clone();
        pipe.cmd("EVALSHA")
            .arg(RENEW_SCRIPT.get_hash())
            .arg(1)
            .arg(cc)
            .arg(LEASE.as_millis() as u64)
            .arg(0);
        for i in ids {
            pipe.arg(&**i);
        }
        pipe.ignore();
    }
    if let Err(e) = exec(conn, &pipe).await {
        conn.health.mark_down(&e);
    }
}

/// Run `pipe`; after NOSCRIPT (Redis restarted) load the scripts and try once more.
async fn exec(conn: &Conn, pipe: &redis::Pipeline) -> Result<(), CallError> {
    let pipeline = pipe.clone();
    match conn
        .call(|mut conn| async move { pipeline.exec_async(&mut conn).await })
        .await
    {
        Err(e) if e.is_noscript() => {
            let pipeline = pipe.clone();
            conn.call(|mut conn| async move {
                RELEASE_SCRIPT.load_async(&mut conn).await?;
                RENEW_SCRIPT.load_async(&mut conn).await?;
                pipeline.exec_async(&mut conn).await
            })
            .await
        }
        r => r,
    }
}
