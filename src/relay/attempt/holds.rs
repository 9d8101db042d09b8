//! A request's holds on rate limits (R15.1, R15.3): taken at admission (`relay::admit`), kept
//! in the request's `Finish` until its answer's last byte, settled to actual usage or given
//! back; dropped unsettled, each releases its concurrency (B-cancel-guards).

use crate::limits::Admission;
use crate::shared::limits::LimitGrant;
use crate::wire::usage::Usage;

/// A request's holds on rate limits: the client's, for the whole request, and the key of
/// the attempt that committed, to the end of its answer (stream included). Dropped
/// unsettled (a client disconnect, a cancelled task), each releases its concurrency and
/// keeps its reservation as the charge.
#[derive(Default)]
pub struct LimitHolds {
    pub(in crate::relay) client: Option<Admission<LimitGrant>>,
    pub key: crate::relay::attempt::keys::KeyHold,
    /// The client's in-flight gauge, decremented when the holds end.
    pub(in crate::relay) in_flight: Option<metrics::Gauge>,
}

impl Drop for LimitHolds {
    fn drop(&mut self) {
        if let Some(g) = self.in_flight.take() {
            g.decrement(1.0);
        }
    }
}

impl LimitHolds {
    /// The request is over: settle to the tokens it used (input + output); a request that
    /// never reached an upstream gives its count and reservation back.
    pub fn settle(&mut self, usage: &Usage, reached_upstream: bool) {
        let now = crate::clock::instant();
        let used = usage.prompt_tokens + usage.completion_tokens;
        if let Some(a) = self.client.take() {
            if reached_upstream {
                a.settle(used, now);
            } else {
                a.cancel(now);
            }
        }
        if let Some(a) = self.key.take() {
            a.settle(used, now);
        }
    }
}
