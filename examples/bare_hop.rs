//! A bare hyper reverse proxy — the same server builder and pooled client switchyard uses,
//! with none of its logic — so `make bench` can show what the HTTP stack alone costs per
//! request next to nginx and switchyard, served the way switchyard serves (a runtime per
//! core). Not part of the product.
//!
//! `bare_hop --listen 127.0.0.1:PORT --upstream 127.0.0.1:PORT`

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use tokio::net::TcpListener;

type Upstream = Client<HttpConnector, Full<Bytes>>;

async fn hop(
    client: Upstream,
    upstream: SocketAddr,
    req: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let (mut parts, body) = req.into_parts();
    let Ok(body) = body.collect().await.map(|b| b.to_bytes()) else {
        return Response::builder()
            .status(400)
            .body(Full::default())
            .unwrap_or_default();
    };
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let Ok(uri) = format!("http://{upstream}{pq}").parse() else {
        return Response::builder()
            .status(400)
            .body(Full::default())
            .unwrap_or_default();
    };
    parts.uri = uri;
    parts.headers.remove(http::header::HOST);
    match client
        .request(Request::from_parts(parts, Full::new(body)))
        .await
    {
        Ok(resp) => {
            let (parts, body) = resp.into_parts();
            let body = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            Response::from_parts(parts, Full::new(body))
        }
        Err(_) => Response::builder()
            .status(502)
            .body(Full::default())
            .unwrap_or_default(),
    }
}

fn arg(name: &str) -> Option<SocketAddr> {
    let mut it = std::env::args().skip_while(|a| a != name).skip(1);
    it.next()?.parse().ok()
}

/// One current-thread runtime per core, each accepting from the one listening socket, with
/// a pool of its own: the serving model switchyard uses (`http::cores`), so the floor is
/// the same stack run the same way.
fn main() -> std::io::Result<()> {
    let (Some(listen), Some(upstream)) = (arg("--listen"), arg("--upstream")) else {
        eprintln!("usage: bare_hop --listen ADDR --upstream ADDR");
        std::process::exit(2);
    };
    let listener = std::net::TcpListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut threads = Vec::new();
    for _ in 0..cores {
        let own = listener.try_clone()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        threads.push(std::thread::spawn(move || {
            rt.block_on(serve(own, upstream))
        }));
    }
    for t in threads {
        let _ = t.join();
    }
    Ok(())
}

async fn serve(listener: std::net::TcpListener, upstream: SocketAddr) -> std::io::Result<()> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(http);
    let listener = TcpListener::from_std(listener)?;
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let client = client.clone();
        let svc = service_fn(move |req| {
            let client = client.clone();
            async move { Ok::<_, Infallible>(hop(client, upstream, req).await) }
        });
        tokio::spawn(async move {
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}
