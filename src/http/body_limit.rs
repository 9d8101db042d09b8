//! Body limits (R14.2): the client's body is read whole, and refused with 413 as soon as it
//! passes `limits.max_body_bytes` — by its declared length before a byte is read, else at the
//! first byte past the limit — and with 408 when it arrives too slowly (B-bounded-resources): a
//! pause of [`BODY_IDLE`] between two reads, an average below [`BODY_MIN_RATE`] once
//! [`BODY_GRACE`] has passed, or [`BODY_DEADLINE`] in all. A body that arrives in one piece
//! is kept as that piece; pieces are gathered in a buffer that grows as they arrive (a
//! declared length reserves at most [`BODY_RESERVE`] up front), so a slow or lying client
//! holds neither a connection slot nor its declared memory for long.

use std::time::Duration;

use bytes::Bytes;
use http::StatusCode;
use http_body::Body;
use http_body_util::BodyExt;

use crate::error::GatewayError;
use crate::http::pieces::Pieces;

/// Longest pause between two pieces of a request body.
pub const BODY_IDLE: Duration = Duration::from_secs(10);
/// From then on the body must have averaged at least [`BODY_MIN_RATE`].
pub const BODY_GRACE: Duration = Duration::from_secs(10);
/// Bytes per second a body must average after [`BODY_GRACE`] (a trickle is cut).
pub const BODY_MIN_RATE: u64 = 1024;
/// Longest time a whole request body may take.
pub const BODY_DEADLINE: Duration = Duration::from_secs(300);
/// Most bytes reserved before they arrive.
pub const BODY_RESERVE: usize = 64 * 1024;

/// Read the whole body, refusing (413) as soon as it passes `limit` bytes — without reading
/// further — or (408) when it arrives too slowly (see the module doc).
pub async fn read_limited<B>(
    body: B,
    declared_len: Option<u64>,
    limit: u64,
) -> Result<Bytes, GatewayError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    if declared_len.is_some_and(|n| n > limit) {
        return Err(GatewayError::payload_too_large(limit));
    }
    let mut body = body;
    let reserve = (declared_len.unwrap_or(1024).min(limit) as usize).min(BODY_RESERVE);
    // A body that arrives in one piece (nearly every one: hyper hands over what one read
    // brought) is that piece, shared with the connection's read buffer as the request's
    // header values already are; a body in pieces is gathered into one buffer.
    let mut body_bytes = Pieces::default();
    let start = crate::clock::instant();
    loop {
        let until = (crate::clock::instant() + BODY_IDLE).min(start + BODY_DEADLINE);
        let frame = match tokio::time::timeout_at(until, body.frame()).await {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(_) => return Err(too_slow(body_bytes.len())),
        };
        let frame = frame.map_err(|e| {
            GatewayError::bad_request(
                "unreadable_body",
                format!("could not read the request body: {e}"),
            )
        })?;
        if let Ok(data) = frame.into_data() {
            if body_bytes.len() as u64 + data.len() as u64 > limit {
                return Err(GatewayError::payload_too_large(limit));
            }
            body_bytes.push(data, reserve);
        }
        if trickling(body_bytes.len() as u64, crate::clock::elapsed(start)) {
            return Err(too_slow(body_bytes.len()));
        }
    }
    Ok(body_bytes.take().unwrap_or_default())
}

/// Past the grace period, has the body averaged less than the minimum rate?
fn trickling(received: u64, elapsed: Duration) -> bool {
    elapsed >= BODY_GRACE && (received as f64) < BODY_MIN_RATE as f64 * elapsed.as_secs_f64()
}

fn too_slow(received: usize) -> GatewayError {
    GatewayError::new(
        StatusCode::REQUEST_TIMEOUT,
        "request_body_timeout",
        "invalid_request_error",
        format!(
            "the request body arrived too slowly ({received} bytes received): send it within {}s, without pauses over {}s, at {} bytes/s or more",
            BODY_DEADLINE.as_secs(),
            BODY_IDLE.as_secs(),
            BODY_MIN_RATE
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::StreamBody;
    use tokio::time::Instant;

    type Frame = Result<http_body::Frame<Bytes>, std::io::Error>;
    type Frames = tokio::sync::mpsc::Sender<Frame>;

    /// A request body fed frame by frame by the test.
    fn channel_body() -> (
        Frames,
        impl Body<Data = Bytes, Error = std::io::Error> + Unpin,
    ) {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Frame>(4);
        let stream = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
        (tx, StreamBody::new(stream))
    }

    async fn send(tx: &Frames, b: &'static [u8]) {
        tx.send(Ok(http_body::Frame::data(Bytes::from_static(b))))
            .await
            .unwrap();
    }

    /// One byte every 5 s never pauses for BODY_IDLE, but averages far below the minimum
    /// rate: cut with 408 once the grace period has passed, not held for ever.
    #[tokio::test(start_paused = true)]
    async fn a_trickled_body_is_cut() {
        let (tx, body) = channel_body();
        let feeder = tokio::spawn(async move {
            for _ in 0..100 {
                send(&tx, b"x").await;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
        let started = Instant::now();
        let error = read_limited(body, Some(100), 1000).await.unwrap_err();
        assert_eq!(error.status, StatusCode::REQUEST_TIMEOUT);
        assert!(
            started.elapsed() <= BODY_GRACE + Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        feeder.abort();
    }

    /// A body that stops arriving is cut after BODY_IDLE; one that keeps a good pace is read.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_is_cut_and_a_steady_one_is_read() {
        let (tx, body) = channel_body();
        send(&tx, b"{\"a\":").await;
        let started = Instant::now();
        let error = read_limited(body, None, 1000).await.unwrap_err();
        assert_eq!(error.status, StatusCode::REQUEST_TIMEOUT);
        assert_eq!(started.elapsed(), BODY_IDLE);
        drop(tx);

        let (tx, body) = channel_body();
        let feeder = tokio::spawn(async move {
            for _ in 0..20 {
                tx.send(Ok(http_body::Frame::data(Bytes::from(vec![b' '; 4096]))))
                    .await
                    .unwrap();
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        });
        let got = read_limited(body, None, 1 << 20).await.unwrap();
        assert_eq!(got.len(), 20 * 4096);
        feeder.await.unwrap();
    }

    /// A body in one piece is that piece (no copy); pieces, empty ones among them, are
    /// gathered in order; the limit counts every piece, the first one too.
    #[tokio::test]
    async fn one_piece_is_kept_and_pieces_are_gathered() {
        let (tx, body) = channel_body();
        let piece = Bytes::from_static(b"{\"model\":\"m\"}");
        tx.send(Ok(http_body::Frame::data(piece.clone())))
            .await
            .unwrap();
        drop(tx);
        let got = read_limited(body, Some(15), 1000).await.unwrap();
        assert_eq!(got, piece);
        assert_eq!(got.as_ptr(), piece.as_ptr(), "the piece itself");

        let (tx, body) = channel_body();
        tokio::spawn(async move {
            for b in [&b"{\"a\":"[..], b"", b"1", b"}"] {
                send(&tx, b).await;
            }
        });
        assert_eq!(
            read_limited(body, None, 1000).await.unwrap(),
            &b"{\"a\":1}"[..]
        );

        let (tx, body) = channel_body();
        tokio::spawn(async move {
            send(&tx, b"0123456789").await;
            send(&tx, b"x").await;
        });
        let error = read_limited(body, None, 10).await.unwrap_err();
        assert_eq!(error.status, StatusCode::PAYLOAD_TOO_LARGE);
    }
}
