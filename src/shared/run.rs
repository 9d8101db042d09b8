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

use super::conn::{CallError, Conn};
use super::scripts::{BUDGET_SCRIPT, LEASE_SCRIPT, PUT_SCRIPT};
use super::wire::{self, Msg};
use super::{count, Versions, Wiring, TICK};
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
    pub(crate) versions: Versions,
    /// `sy:epoch` as last seen: a different one means Redis lost its data.
    pub(crate) epoch: Option<String>,
    pub(crate) unsent: HashMap<u128, (&'static str, Arc<str>, Instant)>,
    /// Converge at the next tick (start, a lost subscription, an outage's end).
    pub(crate) need_converge: bool,
}

impl Runtime {
    pub(crate) fn new(
        conn: Conn,
        origin: Arc<str>,
        wiring: Wiring,
        key_cooldowns: Arc<OnceLock<Arc<KeyCooldowns>>>,
    ) -> Runtime {
        Runtime {
            conn,
            origin,
            wiring,
            key_cooldowns,
            versions: Versions::new(),
            epoch: None,
            unsent: HashMap::new(),
            need_converge: true,
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
            shutdown.clone(),
        ));
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_budget = Instant::now();
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
                            if *m.o != *self.origin {
                                self.apply_msg(&m);
                                count("applied", 1);
                            }
                        }
                    }
                    Sub::Subscribed | Sub::Lost => self.need_converge = true,
                },
                _ = tick.tick() => {
                    if self.need_converge || !self.conn.health.is_up() {
                        self.recover(&mut outbox).await;
                    } else if last_budget.elapsed() >= SHARE_EVERY {
                        last_budget = Instant::now();
                        self.exchange_budget().await;
                    }
                }
                _ = shutdown.changed() => {
                    if *shutdown.borrow() {
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
        if let Err(e) = self
            .conn
            .call(|mut c| async move { redis::cmd("PING").query_async::<String>(&mut c).await })
            .await
        {
            self.conn.health.mark_down(&e);
            return;
        }
        let mut pending = Vec::new();
        while let Ok(c) = outbox.try_recv() {
            pending.push(c);
        }
        for c in &pending {
            self.note(c);
        }
        match self.converge().await {
            Ok(()) => {
                self.need_converge = false;
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
    fn note(&mut self, c: &Change) {
        match c {
            Change::Disabled {
                channel,
                key,
                at_ms,
                ..
            } => {
                let v = self.versions.entry((channel.clone(), *key)).or_default();
                *v = (*v).max(*at_ms);
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

    /// Write a batch of changes (pipelined); probe-lease asks are answered one by one.
    async fn write(&mut self, batch: Vec<Change>) {
        let mut pipe = redis::pipe();
        let mut n = 0u64;
        let mut asks = Vec::new();
        for c in &batch {
            self.note(c);
            match c {
                Change::ProbeWanted { .. } => asks.push(c.clone()),
                _ => {
                    self.add(&mut pipe, c);
                    n += 1;
                }
            }
        }
        if n > 0 && self.conn.health.is_up() {
            match self.exec(&pipe).await {
                Ok(()) => {
                    count("published", n);
                    for c in &batch {
                        if let Change::Bound { hash, .. } = c {
                            self.unsent.remove(hash);
                        }
                    }
                }
                Err(e) => {
                    self.conn.health.mark_down(&e);
                    self.need_converge = true;
                }
            }
        }
        for a in asks {
            self.ask_lease(&a).await;
        }
    }

    /// Run a pipeline; on NOSCRIPT (Redis restarted) load the scripts, try once more, and
    /// converge at the next tick (Redis may have lost its data).
    pub(crate) async fn exec(&mut self, pipe: &redis::Pipeline) -> Result<(), CallError> {
        let p = pipe.clone();
        let r = self
            .conn
            .call(|mut c| async move { p.exec_async(&mut c).await })
            .await;
        match r {
            Err(e) if e.is_noscript() => {
                self.need_converge = true;
                self.load_scripts().await?;
                let p = pipe.clone();
                self.conn
                    .call(|mut c| async move { p.exec_async(&mut c).await })
                    .await
            }
            r => r,
        }
    }

    pub(crate) async fn load_scripts(&self) -> Result<(), CallError> {
        self.conn
            .call(|mut c| async move {
                for s in [&*PUT_SCRIPT, &*LEASE_SCRIPT, &*BUDGET_SCRIPT] {
                    s.load_async(&mut c).await?;
                }
                Ok(())
            })
            .await
    }

    /// Add one change's script call to `pipe`.
    pub(crate) fn add(&self, pipe: &mut redis::Pipeline, c: &Change) {
        let put =
            |pipe: &mut redis::Pipeline, ch: &str, op: &str, f: String, v: String, ms: u128| {
                pipe.cmd("EVALSHA")
                    .arg(PUT_SCRIPT.get_hash())
                    .arg(1)
                    .arg(wire::channel_key(ch))
                    .arg(&*self.origin)
                    .arg(ch)
                    .arg(op)
                    .arg(f)
                    .arg(v)
                    .arg(ms as u64)
                    .ignore();
            };
        match c {
            Change::BreakerOpened {
                channel,
                scope,
                timeout,
            } => put(
                pipe,
                channel,
                "open",
                wire::breaker_field(scope.as_deref()),
                "open".into(),
                timeout.as_millis(),
            ),
            Change::BreakerClosed { channel, scope } => put(
                pipe,
                channel,
                "close",
                wire::breaker_field(scope.as_deref()),
                String::new(),
                0,
            ),
            Change::CooledDown { channel, duration } => put(
                pipe,
                channel,
                "until",
                wire::COOLDOWN_FIELD.into(),
                String::new(),
                duration.as_millis(),
            ),
            Change::ModelMissing {
                channel,
                model,
                duration,
            } => put(
                pipe,
                channel,
                "until",
                wire::missing_field(model),
                String::new(),
                duration.as_millis(),
            ),
            Change::KeyCooled { channel, key, wait } => put(
                pipe,
                channel,
                "until",
                wire::key_cooldown_field(key),
                String::new(),
                wait.as_millis(),
            ),
            Change::Disabled {
                channel,
                key,
                state,
                at_ms,
            } => put(
                pipe,
                channel,
                "lww",
                wire::disabled_field(key.as_ref()),
                wire::encode_disabled(state.as_ref(), *at_ms),
                0,
            ),
            Change::Reset { channel, at_ms } => put(
                pipe,
                channel,
                "reset",
                "*reset".into(),
                at_ms.to_string(),
                0,
            ),
            Change::Bound {
                hash,
                kind,
                channel,
                ttl,
            } => add_binding(pipe, &self.origin, *hash, kind, channel, *ttl),
            Change::ProbeWanted { .. } => {}
        }
    }

    /// Ask for (or renew) a probe lease and tell the breaker the answer.
    async fn ask_lease(&mut self, c: &Change) {
        let Change::ProbeWanted {
            channel,
            scope,
            ttl,
        } = c
        else {
            return;
        };
        if !self.conn.health.is_up() {
            return;
        }
        let (key, owner, sc, ttl_ms) = (
            wire::channel_key(channel),
            self.origin.to_string(),
            scope.clone().unwrap_or_default(),
            ttl.as_millis() as u64,
        );
        let r = self
            .conn
            .call(|mut c| async move {
                LEASE_SCRIPT
                    .key(key)
                    .arg(owner)
                    .arg(sc)
                    .arg(ttl_ms)
                    .invoke_async::<(i64, i64)>(&mut c)
                    .await
            })
            .await;
        let snap = (self.wiring.snapshot)();
        let Some(id) = snap.table.channels.iter().position(|c| c.name == *channel) else {
            return;
        };
        let st = &snap.states[id];
        let now = Instant::now();
        let ms = |v: i64| Duration::from_millis(v.max(0) as u64);
        match r {
            Ok((1, t)) => st.breakers.grant_lease(scope.as_deref(), now + ms(t)),
            Ok((0, t)) => st.breakers.deny_lease(scope.as_deref(), now + ms(t)),
            Ok(_) => {
                st.breakers.apply_closed(scope.as_deref());
                st.metrics.breaker_state.set(0.0);
            }
            Err(e) => {
                self.conn.health.mark_down(&e);
                self.need_converge = true;
            }
        }
    }

    /// Hand this replica's retry-budget counts to the deployment's window and take the
    /// others' share back.
    async fn exchange_budget(&mut self) {
        let budget = (self.wiring.budget)();
        budget.share(self.wiring.replicas);
        let (f, r) = budget.take_pending();
        let w = budget.window_secs();
        let res = self
            .conn
            .call(|mut c| async move {
                BUDGET_SCRIPT
                    .key(wire::BUDGET)
                    .arg(f)
                    .arg(r)
                    .arg(w)
                    .invoke_async::<(u64, u64)>(&mut c)
                    .await
            })
            .await;
        match res {
            Ok((tf, tr)) => {
                let (lf, lr) = budget.local_window();
                budget.set_others(tf.saturating_sub(lf), tr.saturating_sub(lr));
            }
            Err(e) => {
                self.conn.health.mark_down(&e);
                self.need_converge = true;
            }
        }
    }
}

/// `SET` a binding with its TTL and publish it.
pub(crate) fn add_binding(
    pipe: &mut redis::Pipeline,
    origin: &str,
    hash: u128,
    kind: &str,
    channel: &str,
    ttl: Duration,
) {
    let ms = (ttl.as_millis() as u64).max(1);
    let v = wire::encode_binding(kind, channel);
    pipe.cmd("SET")
        .arg(wire::binding_key(hash))
        .arg(&v)
        .arg("PX")
        .arg(ms)
        .ignore();
    let m = Msg {
        o: origin.to_string(),
        c: String::new(),
        f: wire::binding_field(hash),
        v,
        ms: ms as f64,
    };
    if let Ok(payload) = serde_json::to_string(&m) {
        pipe.cmd("PUBLISH").arg(wire::EVENTS).arg(payload).ignore();
    }
}

/// Keep a subscription to `sy:ev` open, reconnecting after a loss, until shutdown.
async fn subscribe(
    client: redis::Client,
    tx: mpsc::Sender<Sub>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let connect = async {
            let mut ps = client.get_async_pubsub().await?;
            ps.subscribe(wire::EVENTS).await?;
            Ok::<_, redis::RedisError>(ps)
        };
        if let Ok(Ok(mut ps)) = tokio::time::timeout(super::conn::CALL_TIMEOUT * 2, connect).await {
            backoff = Duration::from_millis(100);
            if tx.send(Sub::Subscribed).await.is_err() {
                return;
            }
            let mut stream = ps.on_message();
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
