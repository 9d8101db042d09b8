//! The ledger fold both backends share (B-retention): old ledger rows of closed sessions
//! folded into their client's compacted totals (`ledger_compacted`), so a client's totals —
//! and so its balance — never change. Each backend reads one window of rows in write order
//! and writes the result in its own SQL; the arithmetic and the stopping rule live here.

use std::collections::HashMap;

/// A client's folded ledger rows: added to its `ledger_compacted` row.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Precharges + settles − refunds.
    pub charged: i64,
    /// Refunds.
    pub refunded: i64,
    /// Ledger rows folded in.
    pub entries: i64,
    /// The newest `ts_ms` folded in.
    pub through_ms: i64,
}

/// One window of the fold: rows are offered in write order until one is not old enough.
#[derive(Debug)]
pub(crate) struct Fold {
    before_ms: i64,
    /// The last row visited: where the next window starts.
    pub next: i64,
    /// A row not old enough was reached: nothing older is left after this window.
    pub reached: bool,
    /// Per client, what the window folded.
    pub totals: HashMap<String, Totals>,
    /// The rows folded, to delete.
    pub gone: Vec<i64>,
}

/// One ledger row as the fold sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row<'a> {
    pub id: i64,
    pub client: &'a str,
    pub kind: &'a str,
    pub amount: i64,
    pub ts_ms: i64,
    /// Its session is closed (settled or refunded); an open precharge stays for recovery.
    pub closed: bool,
}

impl Fold {
    /// A window of rows after `cursor`, folding those older than `before_ms`.
    pub fn new(before_ms: i64, cursor: i64) -> Fold {
        Fold {
            before_ms,
            next: cursor,
            reached: false,
            totals: HashMap::new(),
            gone: Vec::new(),
        }
    }

    /// Whether a row written at `ts_ms` is old enough to fold.
    pub fn is_old(&self, ts_ms: i64) -> bool {
        ts_ms < self.before_ms
    }

    /// Offer the next row; false once a row is not old enough (the window ends there).
    pub fn offer(&mut self, row: Row<'_>) -> bool {
        if !self.is_old(row.ts_ms) {
            self.reached = true;
            return false;
        }
        self.next = row.id;
        if !row.closed {
            return true;
        }
        let totals = self.totals.entry(row.client.to_string()).or_default();
        if row.kind == "refund" {
            totals.charged = totals.charged.saturating_sub(row.amount);
            totals.refunded = totals.refunded.saturating_add(row.amount);
        } else {
            totals.charged = totals.charged.saturating_add(row.amount);
        }
        totals.entries += 1;
        totals.through_ms = totals.through_ms.max(row.ts_ms);
        self.gone.push(row.id);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row<'a>(id: i64, client: &'a str, kind: &'a str, amount: i64, ts_ms: i64) -> Row<'a> {
        Row {
            id,
            client,
            kind,
            amount,
            ts_ms,
            closed: true,
        }
    }

    /// A closed session folds to its net charge; an open precharge is kept; the window
    /// stops at the first row not old enough and resumes after the last one visited.
    #[test]
    fn a_closed_session_folds_to_its_net_charge_and_an_open_one_stays() {
        let mut fold = Fold::new(100, 0);
        assert!(fold.offer(row(1, "alice", "precharge", 50, 10)));
        assert!(fold.offer(row(2, "alice", "settle", -20, 11)));
        assert!(fold.offer(row(3, "bob", "precharge", 40, 12)));
        assert!(fold.offer(row(4, "bob", "refund", 40, 13)));
        let open = Row {
            closed: false,
            ..row(5, "carol", "precharge", 9, 14)
        };
        assert!(fold.offer(open));
        assert!(!fold.offer(row(6, "alice", "settle", 1, 100)));
        assert_eq!(fold.gone, [1, 2, 3, 4]);
        assert_eq!((fold.next, fold.reached), (5, true));
        let alice = fold.totals["alice"];
        assert_eq!(
            (
                alice.charged,
                alice.refunded,
                alice.entries,
                alice.through_ms
            ),
            (30, 0, 2, 11)
        );
        let bob = fold.totals["bob"];
        assert_eq!((bob.charged, bob.refunded, bob.entries), (0, 40, 2));
        assert!(!fold.totals.contains_key("carol"));
    }
}
