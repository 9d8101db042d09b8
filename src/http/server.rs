//! The client listener: accept loop, connection caps (total and per address), TCP_NODELAY,
//! optional TLS, HTTP/1.1 + h2c with keep-alive pings, the first-head and idle watchdog of
//! `conn.rs`, graceful drain on shutdown (R13.2, R13.4, R14.2), and the serving threads
//! that share the listener (`serve_on`, `cores.rs`) and deal what they accept among
//! themselves (`spread.rs`).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use crate::config::model::Config;
use crate::http::body::Resp;
use crate::http::conn::{Activity, Expired, PerIp, Tracked};
use crate::http::cores;
use crate::http::sniff::Sniffed;
use crate::http::spread::{Handed, Serving, Spread};
use crate::http::timer::{HeadClock, HeadTimer};
use crate::telemetry;

/// What the listener serves: an answer to each request, and the configuration in force for
/// each new connection (its limits and the drain time). The request path implements it;
/// this layer never imports it.
pub trait Service: Send + Sync + 'static {
    /// The configuration in force now (read at each accept and at drain).
    fn config(&self) -> Arc<Config>;
    /// Answer one request. Never fails: every failure is a response.
    fn call(self: Arc<Self>, req: Request<Incoming>) -> impl Future<Output = Resp> + Send;
}

const OVERLOADED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: 105\r\nconnection: close\r\n\r\n{\"error\":{\"message\":\"the gateway is at its connection limit; retry shortly\",\"type\":\"overloaded_error\"}}\r\n";
const PER_IP: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\ncontent-type: application/json\r\ncontent-length: 116\r\nconnection: close\r\n\r\n{\"error\":{\"message\":\"too many open connections from your address; reuse connections\",\"type\":\"rate_limit_error\"}}\r\n";

/// HTTP/2 keep-alive pings on a connection silent this long; no answer within
/// `H2_PING_TIMEOUT` closes it (a peer that vanished holds no slot).
const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(20);

/// Serve clients on `listener` until `shutdown` turns true, then drain for up to `drain`,
/// on the caller's runtime (`serve_on` with no serving thread).
pub async fn serve<S: Service>(
    listener: TcpListener,
    gw: Arc<S>,
    tls: Option<TlsAcceptor>,
    shutdown: watch::Receiver<bool>,
) {
    let (_finish, finished) = watch::channel(false);
    serve_on(listener, gw, tls, shutdown, 0, finished).await;
}

/// `serve` on `threads` serving threads (0: on the caller's runtime, as `serve`), each a
/// current-thread runtime of its own that accepts from the same listening socket (`cores`):
/// a connection and everything its requests do stay on the thread that accepted it. The
/// connection caps are shared by all.
/// Threads that cannot start leave their share to the others; when none starts, the
/// caller's runtime serves. Returns after the drain; the threads' runtimes run on (what the
/// requests spawned finishes there) until `finished` turns true or its sender is dropped.
pub async fn serve_on<S: Service>(
    listener: TcpListener,
    gw: Arc<S>,
    tls: Option<TlsAcceptor>,
    shutdown: watch::Receiver<bool>,
    threads: usize,
    finished: watch::Receiver<bool>,
) {
    let gate = Gate::new(gw.config().limits.max_connections);
    let listener = if threads > 0 {
        spawn_serving(listener, threads, &gw, &tls, &shutdown, &gate, &finished)
    } else {
        Some(listener)
    };
    match listener {
        Some(l) => accept(l, gw.clone(), tls, shutdown, gate.clone(), None).await,
        None => cores::wait_true(shutdown).await,
    }
    drain(&gate, gw.config().timeouts.drain).await;
}

/// Start the serving threads on descriptors of `listener`. The listener comes back when
/// none could start.
fn spawn_serving<S: Service>(
    listener: TcpListener,
    threads: usize,
    gw: &Arc<S>,
    tls: &Option<TlsAcceptor>,
    shutdown: &watch::Receiver<bool>,
    gate: &Gate,
    finished: &watch::Receiver<bool>,
) -> Option<TcpListener> {
    let threads = threads.min(cores::MAX);
    let (spread, inboxes) = Spread::new(threads);
    let mut started = 0;
    for (i, inbox) in inboxes.into_iter().enumerate() {
        let own = match share(&listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot share the listener with a serving thread");
                (i..threads).for_each(|t| spread.close(t));
                break;
            }
        };
        let (gw, tls, shutdown, gate) = (gw.clone(), tls.clone(), shutdown.clone(), gate.clone());
        let seat = Seat {
            spread: spread.clone(),
            me: i,
            inbox,
        };
        let serve = async move {
            match TcpListener::from_std(own) {
                Ok(l) => accept(l, gw, tls, shutdown, gate, Some(seat)).await,
                Err(e) => tracing::warn!(error = %e, "a serving thread cannot listen"),
            }
        };
        match cores::spawn(i, serve, finished.clone()) {
            Some(_) => started += 1,
            None => spread.close(i),
        }
    }
    if started == 0 {
        return Some(listener);
    }
    tracing::debug!(threads = started, "serving threads started");
    None
}

/// A second descriptor of the same listening socket (already non-blocking), for a serving
/// thread's runtime to register.
#[cfg(unix)]
fn share(listener: &TcpListener) -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::AsFd;
    Ok(std::net::TcpListener::from(
        listener.as_fd().try_clone_to_owned()?,
    ))
}

#[cfg(not(unix))]
fn share(_listener: &TcpListener) -> std::io::Result<std::net::TcpListener> {
    Err(std::io::Error::other("serving threads need unix"))
}

/// The connection caps every accept loop shares: the total and the per-address count.
#[derive(Clone)]
struct Gate {
    permits: Arc<Semaphore>,
    per_ip: PerIp,
    max: usize,
}

impl Gate {
    fn new(max: usize) -> Gate {
        Gate {
            permits: Arc::new(Semaphore::new(max)),
            per_ip: PerIp::default(),
            max,
        }
    }
}

/// A serving thread's place in the spread (`http::spread`): its index and its inbox.
struct Seat {
    spread: Arc<Spread>,
    me: usize,
    inbox: tokio::sync::mpsc::UnboundedReceiver<Handed>,
}

/// A connection to serve on this runtime, with its count on this thread (`None` off the
/// serving threads).
struct Accepted {
    stream: TcpStream,
    peer: std::net::SocketAddr,
    accepted: Instant,
    serving: Option<Serving>,
}

/// Accept on `listener` until `shutdown` turns true; each connection is served on this
/// runtime, or on the serving thread `seat` deals it to (`http::spread`).
async fn accept<S: Service>(
    listener: TcpListener,
    gw: Arc<S>,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
    gate: Gate,
    mut seat: Option<Seat>,
) {
    loop {
        let next = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, peer)) => deal(seat.as_ref(), stream, peer),
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(h) = async { seat.as_mut()?.inbox.recv().await } => received(h),
            _ = shutdown.changed() => break,
        };
        if let Some(next) = next {
            serve_accepted(next, &gw, &tls, &shutdown, &gate);
        }
    }
}

/// A connection this thread accepted: served here, or handed to a less busy thread (then
/// `None`). One that cannot be handed is served here.
fn deal(seat: Option<&Seat>, stream: TcpStream, peer: std::net::SocketAddr) -> Option<Accepted> {
    let accepted = Instant::now();
    let elsewhere = seat.map(|s| (s, s.spread.pick(s.me)));
    let Some((seat, to)) = elsewhere.filter(|(s, to)| *to != s.me) else {
        let serving = seat.map(|s| s.spread.serving(s.me));
        return Some(Accepted {
            stream,
            peer,
            accepted,
            serving,
        });
    };
    let stream = match stream.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "accepted connection lost while handing it over");
            return None;
        }
    };
    let serving = seat.spread.serving(to);
    let back = seat.spread.hand(Handed {
        stream,
        peer,
        accepted,
        serving,
    });
    // The other thread takes no connections: this one serves it, counted here.
    let back = back.err()?;
    received(Handed {
        serving: seat.spread.serving(seat.me),
        ..*back
    })
}

/// A connection handed to this thread (or back to it), registered with this runtime.
fn received(h: Handed) -> Option<Accepted> {
    match TcpStream::from_std(h.stream) {
        Ok(stream) => Some(Accepted {
            stream,
            peer: h.peer,
            accepted: h.accepted,
            serving: Some(h.serving),
        }),
        Err(e) => {
            tracing::warn!(error = %e, "handed connection lost");
            None
        }
    }
}

/// Admit `a` under the connection caps (or refuse it with an answer) and serve it on this
/// runtime.
fn serve_accepted<S: Service>(
    a: Accepted,
    gw: &Arc<S>,
    tls: &Option<TlsAcceptor>,
    shutdown: &watch::Receiver<bool>,
    gate: &Gate,
) {
    let Accepted {
        stream,
        peer,
        accepted,
        serving,
    } = a;
    let _ = stream.set_nodelay(true);
    let limits = gw.config().limits.clone();
    let Some(ip_slot) = gate
        .per_ip
        .acquire(peer.ip(), limits.max_connections_per_ip)
    else {
        metrics::counter!(telemetry::CONNECTIONS_REJECTED).increment(1);
        tokio::spawn(reject(stream, PER_IP));
        return;
    };
    let Ok(permit) = gate.permits.clone().try_acquire_owned() else {
        metrics::counter!(telemetry::CONNECTIONS_REJECTED).increment(1);
        tokio::spawn(reject(stream, OVERLOADED));
        return;
    };
    let conn = Conn {
        gw: gw.clone(),
        tls: tls.clone(),
        shutdown: shutdown.clone(),
        accepted,
        limits,
    };
    metrics::gauge!(telemetry::CONNECTIONS).increment(1.0);
    tokio::spawn(async move {
        conn.run(stream).await;
        metrics::gauge!(telemetry::CONNECTIONS).decrement(1.0);
        drop((permit, ip_slot, serving));
    });
}

/// Wait, for at most `drain`, until every connection has ended (each holds a permit).
async fn drain(gate: &Gate, drain: Duration) {
    let all = u32::try_from(gate.max).unwrap_or(u32::MAX);
    if tokio::time::timeout(drain, gate.permits.acquire_many(all))
        .await
        .is_err()
    {
        tracing::warn!(
            ?drain,
            "drain timeout reached; closing remaining connections"
        );
    }
}

/// One accepted connection and what it needs.
struct Conn<S> {
    gw: Arc<S>,
    tls: Option<TlsAcceptor>,
    shutdown: watch::Receiver<bool>,
    accepted: Instant,
    limits: crate::config::model::Limits,
}

impl<S: Service> Conn<S> {
    async fn run(self, stream: TcpStream) {
        let activity = Activity::default();
        let heads = HeadClock::new();
        match self.tls.clone() {
            None => {
                let io = TokioIo::new(Sniffed::new(stream, heads.clone()));
                self.serve(io, &activity, heads).await
            }
            // Boxed: the TLS handshake and stream (rustls' state) are several KB that would
            // otherwise sit in every connection's task, plain ones included, for its life.
            Some(acc) => Box::pin(self.serve_tls(acc, stream, &activity, heads)).await,
        }
    }

    /// The TLS handshake (within the header read timeout of the accept), then serve over it.
    async fn serve_tls(
        self,
        acc: TlsAcceptor,
        stream: TcpStream,
        activity: &Activity,
        heads: Arc<HeadClock>,
    ) {
        let deadline = self.accepted + self.limits.header_read_timeout;
        if let Ok(Ok(s)) = tokio::time::timeout_at(deadline, acc.accept(stream)).await {
            let io = TokioIo::new(Sniffed::new(s, heads.clone()));
            self.serve(io, activity, heads).await;
        }
    }

    /// Serve HTTP/1.1 or HTTP/2 on `io` until the client leaves, the watchdog ends the
    /// connection, or the gateway drains.
    async fn serve<I>(mut self, io: TokioIo<I>, activity: &Activity, heads: Arc<HeadClock>)
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let gw = self.gw.clone();
        let act = activity.clone();
        let svc = service_fn(move |req| {
            let gw = gw.clone();
            let guard = act.begin();
            // Boxed (`boxed::in_box`): the handler's future is ~4.7 KB (its attempt loop
            // boxed apart), and hyper moves the service future into its in-flight slot by
            // value.
            let call = crate::boxed::in_box(|| gw.call(req));
            // One clock reading per poll of the request (`clock::PollClock`).
            let call = crate::clock::PollClock(call);
            async move {
                let resp = call.await;
                Ok::<_, Infallible>(resp.map(|b| Tracked::new(b, guard)))
            }
        });
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            // Timed from each head's first read, not from when the connection went idle
            // (`timer`): in tokio's wheel only while a head is incomplete.
            .timer(HeadTimer::new(heads, self.limits.header_read_timeout))
            .header_read_timeout(self.limits.header_read_timeout)
            .max_buf_size(256 * 1024);
        builder
            .http2()
            .timer(TokioTimer::new())
            .keep_alive_interval(H2_PING_INTERVAL)
            .keep_alive_timeout(H2_PING_TIMEOUT)
            .max_header_list_size(64 * 1024);
        let conn = builder.serve_connection_with_upgrades(io, svc);
        tokio::pin!(conn);
        let (header, idle) = (self.limits.header_read_timeout, self.limits.idle_timeout);
        // After a graceful shutdown starts, the connection gets this long to finish.
        let mut closing: Option<Instant> = None;
        loop {
            let hard = closing.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
            tokio::select! {
                // In order, the connection first: no random start drawn per poll (the
                // connection's end ends the loop, so nothing below it can starve).
                biased;
                _ = conn.as_mut() => return,
                _ = self.shutdown.changed(), if closing.is_none() => {
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + self.gw.config().timeouts.drain);
                }
                why = activity.expired(self.accepted, header, idle), if closing.is_none() => {
                    if why == Expired::FirstHead {
                        return; // dropping the connection closes the socket
                    }
                    conn.as_mut().graceful_shutdown();
                    closing = Some(Instant::now() + header);
                }
                _ = tokio::time::sleep_until(hard), if closing.is_some() => return,
            }
        }
    }
}

async fn reject(mut stream: TcpStream, answer: &'static [u8]) {
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(answer)).await;
    let _ = stream.shutdown().await;
}
