//! The settles of clients without a quota, folded per batch: each such settle is its
//! session's only ledger entry (nothing was precharged), so the writer adds the batch's
//! settles to their client's compacted totals (`ledger_compacted`, one upsert per client)
//! in the batch's transaction instead of writing a ledger row each — what retention does
//! to closed sessions later, done at once. R11.2 holds: the fold commits with the batch or
//! not at all, no open precharge is ever folded, and every balance is the same.

use std::sync::Arc;

use super::super::fold::Totals;
use super::super::records::{LedgerEntry, LedgerKind, WriteOp};

/// What one batch folds.
#[derive(Debug, Default)]
pub(crate) struct BatchFold {
    /// Per op of the batch: folded, so not written as a row. Empty when nothing folds.
    skip: Vec<bool>,
    /// Per client, what its folded settles add to `ledger_compacted`, by client name.
    pub totals: Vec<(Arc<str>, Totals)>,
}

impl BatchFold {
    /// Op `i` of the batch is folded into its client's totals.
    pub(crate) fn skips(&self, i: usize) -> bool {
        self.skip.get(i).copied().unwrap_or(false)
    }
}

/// The entry `op` carries, if it is a settle to fold.
fn folded(op: &WriteOp) -> Option<&LedgerEntry> {
    match op {
        WriteOp::Ledger(e) if e.foldable && e.kind == LedgerKind::Settle => Some(e),
        _ => None,
    }
}

/// The batch's foldable settles, summed per client.
pub(crate) fn plan(ops: &[WriteOp]) -> BatchFold {
    // A gateway whose clients all have quotas never sends one: no allocation then.
    if !ops.iter().any(|op| folded(op).is_some()) {
        return BatchFold::default();
    }
    let mut skip = vec![false; ops.len()];
    // Few clients per batch: a short list beats hashing every entry's name.
    let mut totals: Vec<(Arc<str>, Totals)> = Vec::new();
    for (i, e) in ops
        .iter()
        .enumerate()
        .filter_map(|(i, op)| Some((i, folded(op)?)))
    {
        skip[i] = true;
        let at = match totals.iter().position(|(c, _)| *c == e.client) {
            Some(at) => at,
            None => {
                totals.push((e.client.clone(), Totals::default()));
                totals.len() - 1
            }
        };
        let sum = &mut totals[at].1;
        sum.charged = sum.charged.saturating_add(e.amount);
        sum.entries += 1;
        sum.through_ms = sum.through_ms.max(e.ts_ms);
    }
    BatchFold { skip, totals }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: &str, client: &str, kind: LedgerKind, amount: i64, foldable: bool) -> WriteOp {
        WriteOp::Ledger(LedgerEntry {
            request_id: id.into(),
            client: client.into(),
            kind,
            amount,
            ts_ms: 1_000 + amount,
            foldable,
        })
    }

    /// Per client, the folded totals as a map.
    fn by_client(fold: &BatchFold) -> std::collections::HashMap<String, Totals> {
        fold.totals
            .iter()
            .map(|(c, t)| (c.to_string(), *t))
            .collect()
    }

    fn skipped(fold: &BatchFold, n: usize) -> Vec<usize> {
        (0..n).filter(|&i| fold.skips(i)).collect()
    }

    /// R11.2: the foldable settles of a batch sum per client; every other entry (a
    /// precharge, a settle that closes a precharge, a refund) and every other op stays a
    /// row, in place.
    #[test]
    fn foldable_settles_sum_per_client_and_nothing_else_folds() {
        use LedgerKind::*;
        let (tx, _rx) = tokio::sync::oneshot::channel();
        let ops = [
            op("a", "alice", Settle, 50, true),
            op("q", "quota", Precharge, 40, false),
            WriteOp::Flush(tx),
            op("b", "bob", Settle, 7, true),
            op("q", "quota", Settle, -20, false),
            op("c", "alice", Settle, 30, true),
            op("r", "quota", Refund, 9, false),
            op("odd", "alice", Refund, 9, true),
        ];
        let fold = plan(&ops);
        assert_eq!(skipped(&fold, ops.len()), [0, 3, 5]);
        assert!(!fold.skips(99));
        let got = by_client(&fold);
        assert_eq!(got.len(), 2);
        let alice = got["alice"];
        let alice = (
            alice.charged,
            alice.refunded,
            alice.entries,
            alice.through_ms,
        );
        assert_eq!(alice, (80, 0, 2, 1_050));
        assert_eq!((got["bob"].charged, got["bob"].entries), (7, 1));
    }

    /// A batch without a foldable settle folds nothing and allocates nothing.
    #[test]
    fn a_batch_of_quota_clients_folds_nothing() {
        use LedgerKind::*;
        let ops = [
            op("q", "quota", Precharge, 40, false),
            op("q", "quota", Settle, -20, false),
        ];
        let fold = plan(&ops);
        assert!(fold.skip.is_empty() && fold.totals.is_empty());
        assert!(!fold.skips(0) && !fold.skips(1));
    }
}
