//! Bytes that arrive in pieces and leave as one: a lone piece is kept as it came (no copy),
//! so are pieces that lie one after the other in one read's memory (joined as a slice of
//! it); any others are copied together into one buffer. The request body (`body_limit`) and the
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

    /// [`Pieces::push`] of a piece that may be a slice of `within` (a read whose pieces
    /// are taken in order): a piece that continues the lone first one in `within`'s memory
    /// joins it as one slice of `within`, copied nowhere, so a read's pieces gathered whole
    /// leave as the read itself.
    pub fn push_within(&mut self, piece: Bytes, within: Option<&Bytes>, room: usize) {
        if let (Some(first), Some(whole)) = (&self.one, within) {
            if let Some(joined) = joined(whole, first, &piece) {
                self.one = Some(joined);
                return;
            }
        }
        self.push(piece, room);
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

/// `a` then `b` as one slice of `whole`, when both lie in `whole`'s memory and `b` starts
/// where `a` ends: the same bytes, read from the memory they are in.
fn joined(whole: &Bytes, a: &Bytes, b: &Bytes) -> Option<Bytes> {
    let base = whole.as_ptr() as usize;
    let start = (a.as_ptr() as usize).checked_sub(base)?;
    let mid = start.checked_add(a.len())?;
    let end = ((b.as_ptr() as usize).checked_sub(base)? == mid)
        .then(|| mid.checked_add(b.len()))
        .flatten()?;
    (end <= whole.len()).then(|| whole.slice(start..end))
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

    /// Pieces of one read, in order, leave as the read's own bytes (no copy); a gap, a
    /// piece out of order or from elsewhere, or no read named, and they are copied together
    /// as `push` does, the bytes in the order pushed.
    #[test]
    fn a_reads_pieces_in_order_leave_as_the_read() {
        let read = Bytes::from_static(b"data: a\n\ndata: b\n\ndata: c\n\n");
        let (a, b, c) = (read.slice(0..9), read.slice(9..18), read.slice(18..27));
        let mut p = Pieces::default();
        for piece in [&a, &b, &c] {
            p.push_within(piece.clone(), Some(&read), 64);
        }
        let got = p.take().unwrap();
        assert_eq!(got, read);
        assert_eq!(got.as_ptr(), read.as_ptr(), "the read itself, not a copy");
        let cases: [(&[&Bytes], Option<&Bytes>); 4] = [
            (&[&a, &c], Some(&read)),
            (&[&b, &a], Some(&read)),
            (&[&a, &b], None),
            (&[&a, &b], Some(&c)),
        ];
        for (pieces, within) in cases {
            for piece in pieces {
                p.push_within((*piece).clone(), within, 64);
            }
            let want: Vec<u8> = pieces.iter().flat_map(|b| b.iter().copied()).collect();
            let got = p.take().unwrap();
            assert_eq!(got, want);
            assert!(!read.as_ptr_range().contains(&got.as_ptr()), "copied");
        }
        // A piece that would run past the read it names is copied too.
        let longer = Bytes::copy_from_slice(b"xxyy");
        let (x, y) = (longer.slice(0..2), longer.slice(2..4));
        p.push_within(x, Some(&longer.slice(0..3)), 0);
        p.push_within(y, Some(&longer.slice(0..3)), 0);
        let got = p.take().unwrap();
        assert_eq!(got, &b"xxyy"[..]);
        assert!(!longer.as_ptr_range().contains(&got.as_ptr()));
    }
}
