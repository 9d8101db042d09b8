//! Bytes that arrive in pieces and leave as one: a lone piece is kept as it came (no copy),
//! two or more are copied together into one buffer. The request body (`body_limit`) and the
//! events of one upstream read bound for the client (`relay::answer::stream`) are gathered so.

use bytes::{Bytes, BytesMut};

/// Pieces gathered so far.
#[derive(Debug, Default)]
pub struct Pieces {
    /// The first piece, while it is the only one.
    one: Option<Bytes>,
    /// Every piece, copied together once there are two.
    many: BytesMut,
}

impl Pieces {
    /// Bytes gathered so far.
    pub fn len(&self) -> usize {
        self.one.as_ref().map_or(self.many.len(), Bytes::len)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Add `piece` (an empty one adds nothing). `room`: the bytes the pieces are expected to
    /// take in all, which the buffer is made at once when a second piece arrives instead of
    /// growing piece by piece.
    pub fn push(&mut self, piece: Bytes, room: usize) {
        if piece.is_empty() {
            return;
        }
        match self.one.take() {
            None if self.many.is_empty() => self.one = Some(piece),
            None => self.many.extend_from_slice(&piece),
            Some(first) => {
                self.many.reserve(room.max(first.len() + piece.len()));
                self.many.extend_from_slice(&first);
                self.many.extend_from_slice(&piece);
            }
        }
    }

    /// What was gathered, as one `Bytes` (the lone piece itself), `None` when nothing was;
    /// the pieces are empty again.
    pub fn take(&mut self) -> Option<Bytes> {
        match self.one.take() {
            Some(one) => Some(one),
            None if self.many.is_empty() => None,
            None => Some(self.many.split().freeze()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lone piece is the piece itself; pieces (an empty one among them) are gathered in
    /// order; `take` empties them for the next round.
    #[test]
    fn a_lone_piece_is_kept_and_pieces_are_gathered() {
        let mut p = Pieces::default();
        assert!(p.is_empty());
        let piece = Bytes::from_static(b"data: a\n\n");
        p.push(piece.clone(), 64);
        p.push(Bytes::new(), 64);
        assert_eq!(p.len(), piece.len());
        let got = p.take().unwrap();
        assert_eq!(got.as_ptr(), piece.as_ptr(), "the piece itself");
        assert!(p.is_empty());
        for b in [&b"ab"[..], b"", b"c", b"de"] {
            p.push(Bytes::copy_from_slice(b), 0);
        }
        assert_eq!(p.len(), 5);
        assert_eq!(p.take().unwrap(), &b"abcde"[..]);
        assert!(p.is_empty());
        assert_eq!(p.take(), None);
    }
}
