//! One request's bookkeeping of target visits (R6.1, R6.2): admission per visit, recording
//! per attempt, and one breaker/cooldown result per visit, settled when the loop moves off
//! the target (or when the request ends or is cancelled).
//!
//! A target is (channel, upstream model): two targets of a virtual model on one channel are
//! two visits, each with its own model breaker (R6.1). A half-open probe whose visit
//! recorded nothing — the request was dropped mid-attempt — frees the probe slot when the
//! visit is settled, so a cancelled probe never holds it until the breaker timeout.

use std::sync::Arc;
use std::time::Duration;

use super::autodisable::Applied;
use super::breaker::Admission;
use super::outcome::{admit, record_attempt, record_visit, release_probe, Target};
use crate::routing::outcome::OutcomeFacts;
use crate::store::Store;

struct Pending {
    facts: OutcomeFacts,
    elapsed: Duration,
}

struct Current {
    channel: usize,
    model: Arc<str>,
    admission: Admission,
    /// The visit's last recorded attempt, counted when the visit ends.
    pending: Option<Pending>,
}

/// See the module doc.
pub struct Visits<'a> {
    snap: &'a super::Snapshot,
    store: &'a Store,
    current: Option<Current>,
    /// The request streams: its latencies are scored as times to first byte (R19.1).
    stream: bool,
}

impl<'a> Visits<'a> {
    pub fn new(snap: &'a super::Snapshot, store: &'a Store) -> Self {
        Visits {
            snap,
            store,
            current: None,
            stream: false,
        }
    }

    /// The visits of a streamed request (`true`) or a non-stream one: which score its
    /// latencies feed (R19.1).
    pub fn streaming(mut self, stream: bool) -> Self {
        self.stream = stream;
        self
    }

    /// Admission for an attempt on (`channel`, upstream `model`); a same-target retry keeps
    /// its visit's admission.
    pub fn admit(&mut self, channel: usize, model: &Arc<str>, same_target_retry: u32) -> Admission {
        if same_target_retry > 0 {
            if let Some(c) = &self.current {
                if c.channel == channel && c.model == *model {
                    return c.admission;
                }
            }
        }
        self.settle();
        let (Some(ch), Some(st)) = (
            self.snap.table.channels.get(channel),
            self.snap.states.get(channel),
        ) else {
            return Admission::Admitted;
        };
        // A disabled channel is never called, even when the plan fell back to every candidate.
        let admission = if st.is_disabled() {
            Admission::Refused
        } else {
            admit(ch, st, model)
        };
        self.current = Some(Current {
            channel,
            model: model.clone(),
            admission,
            pending: None,
        });
        admission
    }

    /// Record the facts of one attempt's outcome on the current target with key `key` (not for refused
    /// attempts). Returns what auto-disable did.
    pub fn attempt(
        &mut self,
        channel: usize,
        key: usize,
        facts: &OutcomeFacts,
        elapsed: Duration,
    ) -> Applied {
        let snap = self.snap;
        let (Some(ch), Some(st), Some(fps)) = (
            snap.table.channels.get(channel),
            snap.states.get(channel),
            snap.key_fps.get(channel),
        ) else {
            return Applied::Nothing;
        };
        let Some(c) = self.current.as_mut() else {
            return Applied::Nothing;
        };
        if c.channel != channel || c.admission == Admission::Refused {
            return Applied::Nothing;
        }
        st.scores.record(&c.model, self.stream, facts, elapsed);
        if let Some(error) = super::health::is_error(facts) {
            st.recent
                .attempt(error, facts.class, facts.upstream_status, elapsed);
        }
        c.pending = Some(Pending {
            facts: facts.clone(),
            elapsed,
        });
        let target = Target {
            ch,
            st,
            fps,
            key,
            model: &c.model,
        };
        record_attempt(self.store, &snap.table.config.auto_disable, &target, facts)
    }

    /// The loop moves off the current target: its visit counts now.
    pub fn settle(&mut self) {
        let Some(c) = self.current.take() else {
            return;
        };
        let (Some(ch), Some(st)) = (
            self.snap.table.channels.get(c.channel),
            self.snap.states.get(c.channel),
        ) else {
            return;
        };
        match c.pending {
            Some(p) => record_visit(
                ch,
                st,
                &c.model,
                &p.facts,
                p.elapsed,
                c.admission == Admission::Probe,
            ),
            None if c.admission == Admission::Probe => release_probe(ch, st, &c.model),
            None => {}
        }
    }
}

impl Drop for Visits<'_> {
    fn drop(&mut self) {
        self.settle();
    }
}

#[cfg(test)]
#[path = "visits_tests.rs"]
mod tests;
