//! The shared-state runtime's loop (R17.1, R17.2): drains the outbox into pipelined script
//! calls, applies the other replicas' changes from the subscriber, exchanges retry-budget
//! counts every second, and — every [`super::TICK`] while Redis is down or the subscription
//! was lost — checks Redis and converges when it is back.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::conn::Conn;
use super::wire::{self, Msg};
use super::{count, TaskBindings, Versions, Wiring, TICK};
use crate::limits::KeyCooldowns;
use crate::routing::budget::SHARE_EVERY;
use crate::state::sync::Change;

/// Bindings made while Redis was down, kept to announce when it returns (at most).
const UNSENT_BINDINGS: usize = 10_000;
/// Changes written in one pipeline at most.
const BATCH: usize = 256;

/// What the subscriber task reports.
pub(crate) enum Sub {
    Subscribed,
    Message(Vec<u8>),
    Lost,
}

/// The runtime's own state (owned by its task).
pub struct Runtime {
    pub(crate) conn: Conn,
    pub(crate) origin: Arc<str>,
    pub(crate) wiring: Wiring,
    pub(crate) key_cooldowns: Arc<OnceLock<Arc<KeyCooldowns>>>,
    /// Where other replicas' task bindings go ([`super::Shared::attach_tasks`]).
    pub(crate) tasks: Arc<OnceLock<Arc<dyn TaskBindings>>>,
    pub(crate) versions: Versions,
    /// `sy:epoch` as last seen: a different one means Redis lost its data.
    pub(crate) epoch: Option<String>,
    pub(crate) unsent: HashMap<u128, (&'static str, Arc<str>, Instant)>,
    /// Converge at the next tick (start, a lost subscription, an outage's end).
    pub(crate) need_converge: bool,
    /// Tells the subscriber to reconnect: after an outage its connection may be dead
    /// without having noticed (a silent network partition never ends the stream).
    resubscribe: Arc<tokio::sync::Notify>,
    /// `Health::downs` when last converged.
    seen_downs: u64,
}

impl Runtime {
    pub(crate) fn new(
        conn: Conn,
        origin: Arc<str>,
        wiring: Wiring,
        key_cooldowns: Arc<OnceLock<Arc<KeyCooldowns>>>,
        tasks: Arc<OnceLock<Arc<dyn TaskBindings>>>,
    ) -> Runtime {
        Runtime {
            conn,
            origin,
            wiring,
            key_cooldowns,
            tasks,
            versions: Versions::new(),
            epoch: None,
            unsent: HashMap::new(),
            need_converge: true,
            resubscribe: Arc::default(),
            seen_downs: 0,
        }
    }

    /// Run until `shutdown` turns true.
    pub async fn run(
        mut self,
        mut outbox: mpsc::Receiver<Change>,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let (sub_tx, mut sub_rx) = mpsc::channel(4096);
        let subscriber = tokio::spawn(subscribe(
            self.conn.client.clone(),
            sub_tx,
            self.resubscribe.clone(),
            shutdown.clone(),
        ));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_budget = Instant::now();
        let mut last_resync = Instant::now();
        loop {
            tokio::select! {
                Some(first) = outbox.recv() => {
                    let mut batch = vec![first];
                    while batch.len() < BATCH {
                        match outbox.try_recv() {
                            Ok(c) => batch.push(c),
                            Err(_) => break,
                        }
                    }
                    self.write(batch).await;
                }
                Some(sub) = sub_rx.recv() => match sub {
                    Sub::Message(p) => {
                        if let Some(m) = Msg::parse(&p) {
                            // A failure count is applied even when it is this replica's
                            // own: the counts then follow Redis's order, so a count
                            // published before a reset cannot outlive it here.
                            let tally = matches!(wire::field(&m.f), wire::Field::Failures(_));
                            if *m.o != *self.origin || tally {
                                self.apply_msg(&m);
                                count("applied", 1);
                            }
                        }
                    }
                    // Messages published before the subscription took hold are read back now.
                    Sub::Subscribed => {
                        self.need_converge = true;
                        self.recover(&mut outbox).await;
                    }
                    Sub::Lost => self.need_converge = true,
                },
                _ = tick.tick() => {
                    if self.conn.health.downs() != self.seen_downs {
                        self.need_converge = true;
                    }
                    if self.conn.health.is_up() {
                        self.renew_leases().await;
                    }
                    if self.need_converge || !self.conn.health.is_up() {
                        self.recover(&mut outbox).await;
                    } else if last_resync.elapsed() >= self.wiring.resync {
                        last_resync = Instant::now();
                        if let Err(e) = self.resync().await {
                            self.conn.health.mark_down(&e);
                            self.need_converge = true;
                        }
                    } else if last_budget.elapsed() >= SHARE_EVERY {
                        last_budget = Instant::now();
                        self.exchange_budget().await;
                    }
                }
                r = shutdown.changed() => {
                    // A dropped sender ends the runtime too (no busy loop on the error).
                    if r.is_err() || *shutdown.borrow() {
                        break;
                    }
                }
            }
        }
        subscriber.abort();
    }

    /// Redis was down or the subscription was lost: if it answers, flush what waits in the
    /// outbox and converge.
    async fn recover(&mut self, outbox: &mut mpsc::Receiver<Change>) {
        // An outage (not the start): the subscription may be dead without knowing it.
        let was_down = !self.conn.health.is_up() && !self.conn.health.is_unknown();
        if let Err(e) = self
            .conn
            .call(
                |mut conn| async move { redis::cmd("PING").query_async::<String>(&mut conn).await },
            )
            .await
        {
            self.conn.health.mark_down(&e);
            return;
        }
        if was_down {
            // Only a subscriber that is connected is waiting here; it reconnects.
            self.resubscribe.notify_waiters();
        }
        let mut pending = Vec::new();
        while let Ok(c) = outbox.try_recv() {
            // A failure counted while Redis was away stays local (the local breaker
            // counted it): sent now it would count again, late.
            if !c.is_count() {
                pending.push(c);
            }
        }
        for c in &pending {
            self.note(c);
        }
        let downs = self.conn.health.downs();
        match self.converge().await {
            Ok(()) => {
                self.need_converge = false;
                self.seen_downs = downs;
                self.conn.health.mark_up();
                if !pending.is_empty() {
                    self.write(pending).await;
                }
            }
            Err(e) => self.conn.health.mark_down(&e),
        }
    }

    /// Remember what a change means for convergence: disabled-state times, and bindings
    /// to announce again if Redis does not take them now.
    pub(crate) fn note(&mut self, change: &Change) {
        match change {
            Change::Disabled {
                channel,
                key,
                at_ms,
                ..
            } => {
                let version = self.versions.entry((channel.clone(), *key)).or_default();
                *version = (*version).max(*at_ms);
            }
            Change::Bound {
                hash,
                kind,
                channel,
                ttl,
            } if self.unsent.len() < UNSENT_BINDINGS || self.unsent.contains_key(hash) => {
                self.unsent
                    .insert(*hash, (kind, channel.clone(), Instant::now() + *ttl));
            }
            _ => {}
        }
    }
}

/// How often the subscription is pinged; an answer missing for as long ends it, so a
/// half-open subscription (a silent partition, a frozen proxy) is re-made within ~1 s.
pub const SUB_PING: Duration = Duration::from_millis(500);

/// Keep a subscription to `sy:ev` open, reconnecting after a loss, until shutdown.
async fn subscribe(
    client: redis::Client,
    tx: mpsc::Sender<Sub>,
    resubscribe: Arc<tokio::sync::Notify>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let connect = async {
            let mut ps = client.get_async_pubsub().await?;
            ps.subscribe(wire::EVENTS).await?;
            Ok::<_, redis::RedisError>(ps)
        };
        if let Ok(Ok(ps)) = tokio::time::timeout(super::conn::CALL_TIMEOUT * 2, connect).await {
            backoff = Duration::from_millis(100);
            if tx.send(Sub::Subscribed).await.is_err() {
                return;
            }
            let (mut sink, mut stream) = ps.split();
            let mut ping = tokio::time::interval(SUB_PING);
            ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    m = stream.next() => match m {
                        Some(m) => {
                            if tx.send(Sub::Message(m.get_payload_bytes().to_vec())).await.is_err() {
                                return;
                            }
                        }
                        None => break,
                    },
                    _ = ping.tick() => {
                        // Messages keep queueing in the stream while the ping waits.
                        let pong = tokio::time::timeout(SUB_PING, sink.ping::<redis::Value>());
                        if !matches!(pong.await, Ok(Ok(_))) {
                            tracing::debug!("shared state: the subscription stopped answering; subscribing again");
                            break;
                        }
                    }
                    _ = resubscribe.notified() => break,
                    _ = shutdown.changed() => return,
                }
            }
            if tx.send(Sub::Lost).await.is_err() {
                return;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.changed() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(1));
    }
}
