//! Writing to Redis (R17.1): a batch of changes as one pipeline of store-and-publish
//! scripts (reloading the scripts after a Redis restart; failures counted by the
//! deployment, task bindings published), probe-lease asks answered one by one, and the
//! retry-budget exchange.

use std::time::Duration;

use tokio::time::Instant;

use super::conn::CallError;
use super::count;
use super::run::Runtime;
use super::scripts::{BUDGET_SCRIPT, LEASE_SCRIPT, PUT_SCRIPT};
use super::wire::{self, Msg};
use crate::state::breaker::set::PROBE_LEASE;
use crate::state::sync::Change;

impl Runtime {
    /// Write a batch of changes (pipelined); probe-lease asks are answered one by one. A
    /// new disabled state is stamped with a version by Redis, which this replica then
    /// knows as the state's version (B-shared-versions: never its own clock); a failure
    /// counted comes back with the deployment's count (B-shared-failure-counts).
    pub(crate) async fn write(&mut self, batch: Vec<Change>) {
        let mut pipe = redis::pipe();
        let mut published = 0u64;
        let mut asks = Vec::new();
        let mut answers = Vec::new();
        for c in &batch {
            self.note(c);
            match c {
                Change::ProbeWanted { .. } => {
                    asks.push(c.clone());
                    continue;
                }
                Change::Disabled { channel, key, .. } => {
                    self.add_answered(&mut pipe, c);
                    answers.push(Answer::Version(channel.clone(), *key));
                }
                Change::BreakerFailed { channel, scope, .. } => {
                    self.add_answered(&mut pipe, c);
                    answers.push(Answer::Count(channel.clone(), scope.clone()));
                }
                _ => self.add(&mut pipe, c),
            }
            published += 1;
        }
        if published > 0 && self.conn.health.is_up() {
            match self.exec_returning::<Vec<i64>>(&pipe).await {
                Ok(values) => {
                    for (a, v) in answers.into_iter().zip(values) {
                        self.answered(a, v);
                    }
                    count("published", published);
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

    /// What Redis answered to a call of [`Runtime::add_answered`].
    fn answered(&mut self, answer: Answer, v: i64) {
        match answer {
            Answer::Version(channel, key) => {
                self.versions.insert((channel, key), v);
            }
            Answer::Count(channel, scope) => {
                let Ok(n) = u32::try_from(v) else {
                    return;
                };
                if n == 0 {
                    return;
                }
                let snap = (self.wiring.snapshot)();
                let Some(id) = snap.table.channels.iter().position(|c| c.name == channel) else {
                    return;
                };
                let (ch, st) = (&snap.table.channels[id], &snap.states[id]);
                let lim = crate::state::breaker::Limits::of(&ch.resilience.circuit_breaker);
                if st
                    .breakers
                    .apply_failures(&lim, scope.as_deref(), n, Instant::now())
                {
                    st.metrics.breaker_state.set(2.0);
                }
            }
        }
    }

    /// Run a pipeline; on NOSCRIPT (Redis restarted) load the scripts, try once more, and
    /// converge at the next tick (Redis may have lost its data).
    pub(crate) async fn exec(&mut self, pipe: &redis::Pipeline) -> Result<(), CallError> {
        self.exec_returning::<()>(pipe).await
    }

    /// [`Runtime::exec`], returning the replies of the calls not ignored.
    pub(crate) async fn exec_returning<T>(&mut self, pipe: &redis::Pipeline) -> Result<T, CallError>
    where
        T: redis::FromRedisValue + Send + 'static,
    {
        let pipeline = pipe.clone();
        let result = self
            .conn
            .call(|mut conn| async move { pipeline.query_async::<T>(&mut conn).await })
            .await;
        match result {
            Err(e) if e.is_noscript() => {
                self.need_converge = true;
                self.load_scripts().await?;
                let pipeline = pipe.clone();
                self.conn
                    .call(|mut conn| async move { pipeline.query_async::<T>(&mut conn).await })
                    .await
            }
            result => result,
        }
    }

    pub(crate) async fn load_scripts(&self) -> Result<(), CallError> {
        self.conn
            .call(|mut conn| async move {
                for s in [&*PUT_SCRIPT, &*LEASE_SCRIPT, &*BUDGET_SCRIPT] {
                    s.load_async(&mut conn).await?;
                }
                Ok(())
            })
            .await
    }

    /// Add a call whose reply is read: a new disabled state's `stamp` (the version Redis
    /// gave it) or a failure's `fail` (the deployment's count).
    fn add_answered(&self, pipe: &mut redis::Pipeline, change: &Change) {
        let Some(p) = put_args(change) else {
            return;
        };
        let op = if p.op == "lww" { "stamp" } else { p.op };
        self.put_call(pipe, &PutArgs { op, ..p });
    }

    fn put_call(&self, pipe: &mut redis::Pipeline, args: &PutArgs<'_>) {
        pipe.cmd("EVALSHA")
            .arg(PUT_SCRIPT.get_hash())
            .arg(1)
            .arg(wire::channel_key(args.channel))
            .arg(&*self.origin)
            .arg(args.channel)
            .arg(args.op)
            .arg(&args.field)
            .arg(&args.value)
            .arg(args.ms);
    }

    /// Add one change's script call to `pipe`.
    pub(crate) fn add(&self, pipe: &mut redis::Pipeline, change: &Change) {
        if let Change::Bound {
            hash,
            kind,
            channel,
            ttl,
        } = change
        {
            add_binding(pipe, &self.origin, *hash, kind, channel, *ttl);
            return;
        }
        if let Change::TaskBound {
            client,
            id,
            channel,
        } = change
        {
            add_task(pipe, &self.origin, client, id, channel);
            return;
        }
        let Some(p) = put_args(change) else {
            return;
        };
        self.put_call(pipe, &p);
        pipe.ignore();
    }

    /// Renew every probe lease this replica holds with its probe out, and ask ahead for
    /// the leases of breakers whose timeout ends before the next tick (one ask each; there
    /// are few).
    pub(crate) async fn renew_leases(&mut self) {
        let snap = (self.wiring.snapshot)();
        let now = Instant::now();
        let mut held = Vec::new();
        let ahead = super::TICK + Duration::from_millis(100);
        for (ch, st) in snap.table.channels.iter().zip(snap.states.iter()) {
            let lim = crate::state::breaker::Limits::of(&ch.resilience.circuit_breaker);
            let ask = st.breakers.leases_to_ask(&lim, now, ahead);
            for scope in st.breakers.leases_held(&lim, now).into_iter().chain(ask) {
                held.push(Change::ProbeWanted {
                    channel: ch.name.clone(),
                    scope,
                    ttl: PROBE_LEASE,
                });
            }
        }
        for c in held {
            self.ask_lease(&c).await;
        }
    }

    /// Ask for (or renew) a probe lease and tell the breaker the answer.
    async fn ask_lease(&mut self, change: &Change) {
        let Change::ProbeWanted {
            channel,
            scope,
            ttl,
        } = change
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
        let result = self
            .conn
            .call(|mut change| async move {
                LEASE_SCRIPT
                    .key(key)
                    .arg(owner)
                    .arg(sc)
                    .arg(ttl_ms)
                    .invoke_async::<(i64, i64)>(&mut change)
                    .await
            })
            .await;
        let snap = (self.wiring.snapshot)();
        let Some(id) = snap
            .table
            .channels
            .iter()
            .position(|change| change.name == *channel)
        else {
            return;
        };
        let st = &snap.states[id];
        let now = Instant::now();
        let ms = |v: i64| Duration::from_millis(v.clamp(0, wire::MAX_MS as i64) as u64);
        match result {
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
    pub(crate) async fn exchange_budget(&mut self) {
        let budget = (self.wiring.budget)();
        budget.share(self.wiring.replicas);
        let (firsts, retries) = budget.take_pending();
        let window_secs = budget.window_secs();
        let res = self
            .conn
            .call(|mut conn| async move {
                BUDGET_SCRIPT
                    .key(wire::BUDGET)
                    .arg(firsts)
                    .arg(retries)
                    .arg(window_secs)
                    .invoke_async::<(u64, u64)>(&mut conn)
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
    let encoded = wire::encode_binding(kind, channel);
    pipe.cmd("SET")
        .arg(wire::binding_key(hash))
        .arg(&encoded)
        .arg("PX")
        .arg(ms)
        .ignore();
    let msg = Msg {
        o: origin.to_string(),
        c: String::new(),
        f: wire::binding_field(hash),
        v: encoded,
        ms: ms as f64,
    };
    if let Ok(payload) = serde_json::to_string(&msg) {
        pipe.cmd("PUBLISH").arg(wire::EVENTS).arg(payload).ignore();
    }
}

/// Publish a task binding (not stored: the store holds it durably, and a replica that
/// misses the message reads it there).
fn add_task(pipe: &mut redis::Pipeline, origin: &str, client: &str, id: &str, channel: &str) {
    let msg = Msg {
        o: origin.to_string(),
        c: String::new(),
        f: wire::TASK_FIELD.to_string(),
        v: wire::encode_task(client, id, channel),
        ms: 0.0,
    };
    if let Ok(payload) = serde_json::to_string(&msg) {
        pipe.cmd("PUBLISH").arg(wire::EVENTS).arg(payload).ignore();
    }
}

/// What a reply read from a pipeline is for.
enum Answer {
    /// The version Redis gave a disabled state.
    Version(String, Option<crate::state::KeyFp>),
    /// The deployment's failure count of a breaker (0: not counted, the breaker is open).
    Count(String, Option<String>),
}

/// The arguments of one store-and-publish script call.
struct PutArgs<'a> {
    channel: &'a str,
    op: &'static str,
    field: String,
    value: String,
    ms: u64,
}

fn put<'a>(
    channel: &'a str,
    op: &'static str,
    field: String,
    value: String,
    ms: u64,
) -> PutArgs<'a> {
    PutArgs {
        channel,
        op,
        field,
        value,
        ms,
    }
}

fn ms(duration: &Duration) -> u64 {
    duration.as_millis() as u64
}

/// How a channel-state change is stored (`None` for bindings and lease asks).
fn put_args(change: &Change) -> Option<PutArgs<'_>> {
    Some(match change {
        Change::BreakerOpened { .. }
        | Change::BreakerClosed { .. }
        | Change::BreakerFailed { .. }
        | Change::BreakerSucceeded { .. } => return breaker_args(change),
        Change::CooledDown { channel, duration } => put(
            channel,
            "until",
            wire::COOLDOWN_FIELD.into(),
            String::new(),
            ms(duration),
        ),
        Change::ModelMissing {
            channel,
            model,
            duration,
        } => put(
            channel,
            "until",
            wire::missing_field(model),
            String::new(),
            ms(duration),
        ),
        Change::KeyCooled { channel, key, wait } => put(
            channel,
            "until",
            wire::key_cooldown_field(key),
            String::new(),
            ms(wait),
        ),
        Change::Disabled {
            channel,
            key,
            state,
            at_ms,
        } => put(
            channel,
            "lww",
            wire::disabled_field(key.as_ref()),
            wire::encode_disabled(state.as_ref(), *at_ms),
            0,
        ),
        Change::Reset { channel, at_ms } => {
            put(channel, "reset", "*reset".into(), at_ms.to_string(), 0)
        }
        Change::Bound { .. } | Change::TaskBound { .. } | Change::ProbeWanted { .. } => {
            return None
        }
    })
}

/// How a breaker's change is stored: opened, closed, a failure counted, the count cleared.
fn breaker_args(change: &Change) -> Option<PutArgs<'_>> {
    Some(match change {
        Change::BreakerOpened {
            channel,
            scope,
            timeout,
        } => put(
            channel,
            "open",
            wire::breaker_field(scope.as_deref()),
            "open".into(),
            ms(timeout),
        ),
        Change::BreakerClosed { channel, scope } => put(
            channel,
            "close",
            wire::breaker_field(scope.as_deref()),
            String::new(),
            0,
        ),
        Change::BreakerFailed {
            channel,
            scope,
            threshold,
            timeout,
        } => put(
            channel,
            "fail",
            wire::failures_field(scope.as_deref()),
            threshold.to_string(),
            ms(timeout),
        ),
        Change::BreakerSucceeded { channel, scope } => put(
            channel,
            "zero",
            wire::failures_field(scope.as_deref()),
            String::new(),
            0,
        ),
        _ => return None,
    })
}
