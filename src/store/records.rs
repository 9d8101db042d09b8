//! Row types written to and read from the SQLite store, and the `WriteOp` queue message.
//!
//! None of these types carries a secret: client keys appear only as their configured
//! key id (`client`), never as the key itself, and affinity keys must be derived
//! (hashed) values. Keep it that way when adding fields.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

/// One upstream attempt inside a request (R12.1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// The channel's name, shared with its state (no copy per attempt).
    pub channel: Arc<str>,
    pub key_index: u32,
    pub upstream_status: Option<u16>,
    /// The classifier's name for the outcome (`ok`, `http_5xx`, ...): a name the gateway
    /// knows at build time when it writes the record (no copy), a string when read back.
    pub error_class: std::borrow::Cow<'static, str>,
    pub latency_ms: u64,
    pub possibly_charged: bool,
    /// `openai->anthropic` when the attempt was translated (R16.2); absent otherwise (kept
    /// inside the JSON `attempts` column: no schema change).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<String>,
}

/// One finished request as shown by the admin API (R12.1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
///
/// The names in it are shared with the config, the routing table and the request's parse
/// (`Arc<str>`): a record is built on a serving thread and freed on the store writer's, and a
/// copy per name would be an allocation per name per request.
pub struct RequestRecord {
    pub id: String,
    pub ts_ms: i64,
    /// Client key id (never the key itself).
    pub client: Arc<str>,
    pub group: Arc<str>,
    pub public_model: Arc<str>,
    pub upstream_model: Arc<str>,
    pub path: Arc<str>,
    pub stream: bool,
    pub attempts: Vec<AttemptRecord>,
    /// Channel chain, e.g. `"a->b->c"` (one attempt: its channel's name, shared).
    pub chain: Arc<str>,
    pub final_status: u16,
    pub error_code: Option<String>,
    pub sticky_kind: Option<String>,
    pub sticky_hit: Option<bool>,
    /// Sticky routing only: a binding existed and another channel answered (the binding
    /// moved). Not a failover flag: see `failed_over`.
    pub fallback: bool,
    /// Served by a later channel than the first attempt's (a failover answered). Derived
    /// from `attempts` when read (B-log-truth; no column of its own).
    #[serde(default)]
    pub failed_over: bool,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    pub usage_estimated: bool,
    /// How a stream ended (`complete`, `client_cancelled`, ...): a name the gateway knows
    /// at build time when it writes the record, a string when read back.
    pub stream_outcome: Option<std::borrow::Cow<'static, str>>,
    pub latency_ms: u64,
    /// The request's OpenTelemetry trace id (32 hex digits) when it was traced (R20.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
}

impl RequestRecord {
    /// Whether a later channel than the first attempt's served this request.
    pub fn served_by_later_channel(&self) -> bool {
        let (Some(first), Some(last)) = (self.attempts.first(), self.attempts.last()) else {
            return false;
        };
        (200..300).contains(&self.final_status) && first.channel != last.channel
    }

    /// This record with `failed_over` derived from its attempts.
    pub fn with_failed_over(mut self) -> RequestRecord {
        self.failed_over = self.served_by_later_channel();
        self
    }
}

/// Kind of a ledger entry; see the sign convention in the `store` module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerKind {
    Precharge,
    Settle,
    Refund,
}

impl LedgerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerKind::Precharge => "precharge",
            LedgerKind::Settle => "settle",
            LedgerKind::Refund => "refund",
        }
    }

    pub fn parse(name: &str) -> Option<LedgerKind> {
        match name {
            "precharge" => Some(LedgerKind::Precharge),
            "settle" => Some(LedgerKind::Settle),
            "refund" => Some(LedgerKind::Refund),
            _ => None,
        }
    }
}

/// One billing event in credits micro-units (R11.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub request_id: String,
    /// Client key id (shared with the config).
    pub client: Arc<str>,
    pub kind: LedgerKind,
    /// Signed amount, see the module doc for its meaning per kind.
    pub amount: i64,
    pub ts_ms: i64,
    /// The settle of a client without a quota, its session's only entry (no precharge was
    /// written): the SQLite writer adds it to the client's compacted totals instead of
    /// writing a row (`store::sqlite::batch_fold`). Not stored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub foldable: bool,
}

/// Per-client ledger sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerTotals {
    /// Net charge: sum(precharge) + sum(settle) − sum(refund).
    pub charged: i64,
    /// Sum of refund amounts.
    pub refunded: i64,
}

/// Which part of a channel a [`StateRow`] is about.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateKey {
    /// The whole channel.
    Channel,
    /// One key, by its fingerprint (hex; never the key itself).
    Key(String),
    /// One key by its position in the channel's list, as stored before schema v4; start-up
    /// resolves it against the configured keys and rewrites it as [`StateKey::Key`].
    LegacyIndex(u32),
}

/// Persisted disabled state of a channel or one of its keys (R7.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateRow {
    pub channel: String,
    pub key: StateKey,
    /// `false` deletes the stored row (the channel/key is enabled again).
    pub disabled: bool,
    pub reason: String,
    pub ts_ms: i64,
    /// true: set by the auto-disable rules (a probe may lift it); false: by an operator.
    #[serde(default)]
    pub auto: bool,
}

/// Channel that accepted an async task for a client; that client's follow-ups are
/// locked to it (R10.5). A binding is identified by (client, task id, channel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskBinding {
    /// Client name (the key id, never the key).
    pub client: String,
    pub task_id: String,
    pub channel: String,
    pub ts_ms: i64,
}

/// Sticky routing binding (R8). `key` must be a derived value, never a raw secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityBinding {
    pub key: String,
    pub channel: String,
    pub expires_ms: i64,
}

/// One retention round for the writer (see `store::prune`).
#[derive(Debug)]
pub struct Prune {
    /// Request-log rows, and closed ledger sessions, older than this are pruned / folded.
    pub before_ms: Option<i64>,
    /// The newest this many request-log rows are kept.
    pub keep_rows: Option<u64>,
    /// Most rows touched per table in this round's one transaction.
    pub batch: usize,
    /// Ledger rowid to continue after (0 at the start of a pass).
    pub ledger_cursor: i64,
    /// Answered with what was done (dropped on failure).
    pub done: Option<oneshot::Sender<Pruned>>,
}

/// What one retention round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub request_log: u64,
    pub ledger: u64,
    pub ledger_cursor: i64,
    /// The round was full: there is more to do now.
    pub more: bool,
}

/// A message for the writer thread.
#[derive(Debug)]
pub enum WriteOp {
    /// Droppable: may be lost when the queue is full.
    RequestLog(Box<RequestRecord>),
    /// Must not be dropped: send it with `Store::send_durable`.
    Ledger(LedgerEntry),
    StateRow(StateRow),
    TaskBinding(TaskBinding),
    AffinityBinding(AffinityBinding),
    /// Several bindings in one queue slot (a snapshot's batch).
    AffinityBindings(Vec<AffinityBinding>),
    /// Resolved once every op queued before it is committed.
    Flush(oneshot::Sender<()>),
    /// A retention round, in its own transaction after the batch it arrived in.
    Prune(Prune),
}

impl WriteOp {
    /// Bounded metric label / log name for the op kind.
    pub fn kind(&self) -> &'static str {
        match self {
            WriteOp::RequestLog(_) => "request_log",
            WriteOp::Ledger(_) => "ledger",
            WriteOp::StateRow(_) => "channel_state",
            WriteOp::TaskBinding(_) => "task_binding",
            WriteOp::AffinityBinding(_) | WriteOp::AffinityBindings(_) => "affinity_binding",
            WriteOp::Flush(_) => "flush",
            WriteOp::Prune(_) => "prune",
        }
    }
}

impl From<RequestRecord> for WriteOp {
    fn from(record: RequestRecord) -> Self {
        WriteOp::RequestLog(Box::new(record))
    }
}

impl From<LedgerEntry> for WriteOp {
    fn from(entry: LedgerEntry) -> Self {
        WriteOp::Ledger(entry)
    }
}

impl From<StateRow> for WriteOp {
    fn from(row: StateRow) -> Self {
        WriteOp::StateRow(row)
    }
}

impl From<TaskBinding> for WriteOp {
    fn from(task: TaskBinding) -> Self {
        WriteOp::TaskBinding(task)
    }
}

impl From<AffinityBinding> for WriteOp {
    fn from(binding: AffinityBinding) -> Self {
        WriteOp::AffinityBinding(binding)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(channel: &str) -> AttemptRecord {
        AttemptRecord {
            channel: channel.into(),
            key_index: 0,
            upstream_status: None,
            error_class: "".into(),
            latency_ms: 0,
            possibly_charged: false,
            translation: None,
        }
    }

    /// `failed_over`: answered (2xx) by another channel than the first attempt's.
    #[test]
    fn failed_over_means_a_later_channel_served_it() {
        let rec = |chs: &[&str], status| RequestRecord {
            attempts: chs.iter().map(|c| attempt(c)).collect(),
            final_status: status,
            ..RequestRecord::default()
        };
        assert!(rec(&["a", "b"], 200).with_failed_over().failed_over);
        assert!(
            !rec(&["a", "a"], 200).with_failed_over().failed_over,
            "same channel"
        );
        assert!(
            !rec(&["a", "b"], 503).with_failed_over().failed_over,
            "not served"
        );
        assert!(!rec(&["a"], 200).with_failed_over().failed_over);
        assert!(!rec(&[], 401).with_failed_over().failed_over);
    }
}
