//! Shaping a scripted answer's bytes for the wire ([`Wire`]): gzip encoding, joining or
//! re-cutting writes, `Content-Length` framing.
use std::io::Write;

use bytes::{Bytes, BytesMut};
use flate2::write::GzEncoder;
use flate2::Compression;

use super::behavior::Wire;
use super::body::Step;

/// Gzip the data of `steps` as one stream; each write is flushed so a stream stays a stream.
pub(crate) fn gzip(steps: Vec<Step>) -> Vec<Step> {
    let mut enc = GzEncoder::new(Vec::new(), Compression::fast());
    let mut out = Vec::with_capacity(steps.len() + 1);
    let take = |enc: &mut GzEncoder<Vec<u8>>| Bytes::from(std::mem::take(enc.get_mut()));
    for s in steps {
        match s {
            Step::Data(b) => {
                // Writing to a Vec cannot fail.
                let _ = enc.write_all(&b);
                let _ = enc.flush();
                out.push(Step::Data(take(&mut enc)));
            }
            Step::Cut => {
                out.push(Step::Cut);
                return out;
            }
            other => out.push(other),
        }
    }
    if let Ok(rest) = enc.finish() {
        out.push(Step::Data(Bytes::from(rest)));
    }
    out
}

/// Join each run of writes between pauses into one (`coalesce`), or re-cut it into writes of
/// the sizes of `split`, cycling, with `gap` between them.
pub(crate) fn rechunk(steps: Vec<Step>, w: &Wire) -> Vec<Step> {
    if !w.coalesce && w.split.is_empty() {
        return steps;
    }
    let mut out = Vec::with_capacity(steps.len());
    let mut run = BytesMut::new();
    let mut cycle = 0usize;
    let mut flush = |run: &mut BytesMut, out: &mut Vec<Step>| {
        if run.is_empty() {
            return;
        }
        let mut all = run.split().freeze();
        if w.split.is_empty() {
            out.push(Step::Data(all));
            return;
        }
        while !all.is_empty() {
            let n = w.split[cycle % w.split.len()].min(all.len());
            cycle += 1;
            out.push(Step::Data(all.split_to(n)));
            if !w.gap.is_zero() && !all.is_empty() {
                out.push(Step::Sleep(w.gap));
            }
        }
    };
    for s in steps {
        match s {
            Step::Data(b) => run.extend_from_slice(&b),
            other => {
                flush(&mut run, &mut out);
                out.push(other);
            }
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Every `\n` of the data written as `\r\n`.
pub(crate) fn crlf(steps: Vec<Step>) -> Vec<Step> {
    steps
        .into_iter()
        .map(|s| match s {
            Step::Data(b) => {
                let mut out = BytesMut::with_capacity(b.len() + 16);
                for line in b.split_inclusive(|&c| c == b'\n') {
                    match line.strip_suffix(b"\n") {
                        Some(l) => {
                            out.extend_from_slice(l);
                            out.extend_from_slice(b"\r\n");
                        }
                        None => out.extend_from_slice(line),
                    }
                }
                Step::Data(out.freeze())
            }
            other => other,
        })
        .collect()
}

/// Total bytes of the data steps (the `Content-Length` of a `cl` answer).
pub(crate) fn length(steps: &[Step]) -> u64 {
    steps
        .iter()
        .map(|s| match s {
            Step::Data(b) => b.len() as u64,
            _ => 0,
        })
        .sum()
}
