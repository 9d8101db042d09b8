//! The Redis store's background task: settles, cancels and drops of grants (queued, since
//! none of them can await), and the renewal of live concurrency leases every third of
//! [`super::LEASE`]. A failed call is not retried: an unreleased lease expires by itself,
//! an unsettled reservation stays counted as the charge (as a dropped local grant's does).

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc;

use super::grant::Taken;
use super::lua::{RELEASE_SCRIPT, RENEW_SCRIPT};
use super::{keys, LEASE};
use crate::shared::conn::Conn;

/// One queued operation.
#[derive(Debug)]
pub(crate) enum Op {
    /// A lease was taken: renew it until released.
    Hold(Arc<str>, Arc<str>),
    Settle(Taken, u64),
    Cancel(Taken),
    Drop(Taken),
}

pub(crate) async fn run(conn: Conn, mut rx: mpsc::UnboundedReceiver<Op>) {
    // Live leases: subject prefix → admission ids.
    let mut live: HashMap<Arc<str>, Vec<Arc<str>>> = HashMap::new();
    let mut renew = tokio::time::interval(LEASE / 3);
    renew.tick().await;
    loop {
        tokio::select! {
            op = rx.recv() => match op {
                Some(Op::Hold(p, id)) => live.entry(p).or_default().push(id),
                Some(op) => release(&conn, &mut live, op).await,
                None => return,
            },
            _ = renew.tick() => renew_all(&conn, &live).await,
        }
    }
}

async fn release(conn: &Conn, live: &mut HashMap<Arc<str>, Vec<Arc<str>>>, op: Op) {
    let (name, t, actual) = match op {
        Op::Settle(t, a) => ("settle", t, a),
        Op::Cancel(t) => ("cancel", t, 0),
        Op::Drop(t) => ("drop", t, 0),
        Op::Hold(..) => return,
    };
    if t.lease {
        if let Some(ids) = live.get_mut(&t.prefix) {
            ids.retain(|i| *i != t.id);
            if ids.is_empty() {
                live.remove(&t.prefix);
            }
        }
    }
    let [rpm, rpd, tpm, cc] = keys(&t.prefix);
    let r = conn
        .call(|mut c| async move {
            RELEASE_SCRIPT
                .key(rpm)
                .key(rpd)
                .key(tpm)
                .key(cc)
                .arg(name)
                .arg(&*t.id)
                .arg(t.granules[0])
                .arg(t.granules[1])
                .arg(t.granules[2])
                .arg(t.tokens)
                .arg(actual)
                .arg(t.now_ms.unwrap_or(0))
                .invoke_async::<i64>(&mut c)
                .await
        })
        .await;
    if let Err(e) = r {
        conn.health.mark_down(&e);
    }
}

async fn renew_all(conn: &Conn, live: &HashMap<Arc<str>, Vec<Arc<str>>>) {
    for (prefix, ids) in live {
        let cc = keys(prefix)[3].clone();
        let ids: Vec<String> = ids.iter().map(|i| i.to_string()).collect();
        let r = conn
            .call(|mut c| async move {
                let mut inv = RENEW_SCRIPT.key(cc);
                inv.arg(LEASE.as_millis() as u64).arg(0);
                for i in &ids {
                    inv.arg(i);
                }
                inv.invoke_async::<i64>(&mut c).await
            })
            .await;
        if let Err(e) = r {
            conn.health.mark_down(&e);
            return;
        }
    }
}
