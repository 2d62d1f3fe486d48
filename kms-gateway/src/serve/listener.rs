//! One face's server: an accept loop on hyper (HTTP/1.1) with the limits a
//! server on a network needs, which `axum::serve` does not set (it builds
//! hyper without a timer, so hyper's header-read timeout is off, and it
//! accepts without bound).
//!
//! * **At most [`Limits::max_connections`] connections** at once per face:
//!   a slot is taken before `accept`, so further clients wait in the
//!   kernel's backlog instead of costing a file descriptor each.
//! * **Header timeout** ([`Limits::header_timeout`]): a connection's first
//!   request must have arrived whole within it from `accept` (so it will
//!   cover a TLS handshake too); a later request within it from its first
//!   byte read while no request is in flight (a next request pipelined
//!   behind one in flight has the idle timeout instead). Otherwise the
//!   connection is closed: a client that sends one header byte every few
//!   seconds (slowloris) is cut off.
//! * **Idle timeout** ([`Limits::idle_timeout`]): a keep-alive connection
//!   with no request in flight and no byte of a next one is closed after
//!   it; so is one whose answer the client has not read for as long (a
//!   write that would block and has not progressed since).
//! * **Buffers:** a connection buffers at most 64 KiB of request head.
//! * **Stop:** when `stop` turns true the loop stops accepting, every
//!   connection finishes the request in flight (hyper's graceful
//!   shutdown) and closes; [`serve`] returns when all are closed.
//!
//! The request timeout (until the response headers) is a layer on the
//! routes ([`guarded`]), not a connection limit.
//!
//! Invariant (`Activity`): a connection's IO, its service and its
//! watchdog are polled by one task, in one future, so the watchdog reads a
//! state that only its own task writes, and every write happens while the
//! connection is polled (its reads and writes, the service's start, the
//! end of an answer's body). The watchdog re-reads the state after each
//! such poll and moves its one timer to the deadline: no wake-up, no
//! new timer per request.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use crate::config::Limits;

/// The most a connection buffers of a request's head, and of the bytes
/// read ahead (bytes): heads with an 8 KiB token fit; hyper's default (about
/// 400 KiB) times `--max-connections` would be gigabytes held by clients
/// that send a head slowly.
const MAX_BUF: usize = 64 * 1024;

/// How long to wait before accepting again after `accept` failed (out of
/// file descriptors, say), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` within `limits` until `stop` turns true
/// and every connection has closed (module docs).
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    loop {
        let slot = tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
        let (stream, peer) = tokio::select! {
            biased;
            () = stopped(&mut stop) => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed; retrying");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        // Small answers go out at once (as axum::serve does).
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(
            stream,
            peer,
            router.clone(),
            limits,
            tls.clone(),
            stop.clone(),
            slot,
        ));
    }
    drop(listener);
    // Every connection holds a slot until it closes.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// Serves one connection until it closes, a timeout ends it, or a stop
/// lets its request in flight finish; with `tls`, after a handshake that
/// must end within the header timeout from accept.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
    _slot: OwnedSemaphorePermit,
) {
    let activity = Arc::new(Activity::new());
    let watched = Watched {
        inner: stream,
        activity: Arc::clone(&activity),
    };
    let Some(acceptor) = tls else {
        return drive(watched, peer, router, limits, stop, activity).await;
    };
    let deadline = activity.at(0, limits.header_timeout);
    let handshake = tokio::select! {
        biased;
        () = stopped(&mut stop) => return,
        handshake = tokio::time::timeout_at(deadline, acceptor.accept(watched)) => handshake,
    };
    match handshake {
        Ok(Ok(stream)) => drive(stream, peer, router, limits, stop, activity).await,
        // A client's failure (no certificate, a wrong one, a scan): told
        // at debug level only, as a refused token is.
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// Serves HTTP/1.1 on `io` (module docs).
async fn drive<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    activity: Arc<Activity>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let io = TokioIo::new(io);
    let service = {
        let activity = Arc::clone(&activity);
        hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            let in_flight = InFlight::begin(&activity);
            // The client's address, as `axum::serve` gives it to
            // `ConnectInfo` (the admin face's mint audit event reads it).
            request.extensions_mut().insert(ConnectInfo(peer));
            let call = router.clone().oneshot(request.map(Body::new));
            async move {
                let response = call.await?;
                // Until the body is sent (or dropped), the request counts
                // as in flight: the guard goes with it.
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _in_flight = &in_flight;
                        frame
                    }))
                }))
            }
        })
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // Our watchdog times the heads: hyper's own timer would also cut idle
    // keep-alive connections at the header timeout.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .max_buf_size(MAX_BUF);
    let conn = builder.serve_connection(io, service);
    let mut conn = std::pin::pin!(conn);
    let mut stop_signal = std::pin::pin!(stopped(&mut stop));
    let mut stopping = false;
    // One timer for the connection's life, moved as its deadline moves.
    let mut timer = std::pin::pin!(tokio::time::sleep_until(
        activity.at(0, limits.header_timeout)
    ));
    std::future::poll_fn(|cx| {
        if conn.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if !stopping && stop_signal.as_mut().poll(cx).is_ready() {
            stopping = true;
            conn.as_mut().graceful_shutdown();
            if conn.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        // The watchdog, after the connection was polled: every change of
        // the activity happens inside that poll (module docs, invariant).
        loop {
            let Some(deadline) = activity.deadline(&limits) else {
                return Poll::Pending;
            };
            if timer.deadline() != deadline {
                timer.as_mut().reset(deadline);
            }
            match timer.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                // Past the deadline with no request in flight (or an
                // answer the client has not read for the idle timeout):
                // dropping the connection loses nothing that was accepted.
                Poll::Ready(()) if deadline <= Instant::now() => return Poll::Ready(()),
                // Moved later meanwhile: armed again above.
                Poll::Ready(()) => {}
            }
        }
    })
    .await;
}

/// Resolves once `stop` is true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`: dropped here.
    let _ = stop.wait_for(|stop| *stop).await;
}

/// What the watchdog of one connection reads (module docs, invariant):
/// times in µs since `born`. Every access is made by the connection's own
/// task, so `Relaxed` orderings suffice (the atomics are there because
/// the service must be `Send`).
struct Activity {
    born: Instant,
    /// Requests whose response has not been sent whole.
    in_flight: AtomicU64,
    /// Requests served to the end.
    served: AtomicU64,
    /// When the connection last became idle (no request in flight).
    idle_since: AtomicU64,
    /// The first byte read since it became idle; [`NONE`] when none.
    first_byte: AtomicU64,
    /// Since when the socket has taken no byte of an answer (a write that
    /// would block and has not progressed since); [`NONE`] while writes
    /// progress.
    write_stalled: AtomicU64,
}

/// No time recorded.
const NONE: u64 = u64::MAX;

impl Activity {
    fn new() -> Self {
        Activity {
            born: Instant::now(),
            in_flight: AtomicU64::new(0),
            served: AtomicU64::new(0),
            idle_since: AtomicU64::new(0),
            first_byte: AtomicU64::new(NONE),
            write_stalled: AtomicU64::new(NONE),
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.born.elapsed().as_micros()).unwrap_or(NONE - 1)
    }

    fn at(&self, micros: u64, plus: Duration) -> Instant {
        self.born + Duration::from_micros(micros) + plus
    }

    /// When the connection is to be closed, if nothing happens first:
    /// with a request in flight, only while its answer cannot be written
    /// (the client reads nothing: an idle timeout from the stall; a
    /// handler that takes long is the request timeout's, not this);
    /// without one, the header or idle timeout.
    fn deadline(&self, limits: &Limits) -> Option<Instant> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            let stalled = self.write_stalled.load(Ordering::Relaxed);
            return (stalled != NONE).then(|| self.at(stalled, limits.idle_timeout));
        }
        let first_byte = self.first_byte.load(Ordering::Relaxed);
        Some(if self.served.load(Ordering::Relaxed) == 0 {
            // From accept, whatever arrived meanwhile.
            self.at(0, limits.header_timeout)
        } else if first_byte != NONE {
            self.at(first_byte, limits.header_timeout)
        } else {
            self.at(self.idle_since.load(Ordering::Relaxed), limits.idle_timeout)
        })
    }

    /// A write took bytes (`progressed`) or would block: a stall starts at
    /// the first write that would block and ends at the next progress.
    fn wrote(&self, progressed: bool) {
        let stalled = self.write_stalled.load(Ordering::Relaxed);
        if progressed && stalled != NONE {
            self.write_stalled.store(NONE, Ordering::Relaxed);
        } else if !progressed && stalled == NONE {
            self.write_stalled.store(self.now(), Ordering::Relaxed);
        }
    }

    /// Bytes arrived: the first since the connection became idle starts
    /// the next request's header timeout.
    fn read(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.first_byte.load(Ordering::Relaxed) == NONE
        {
            self.first_byte.store(self.now(), Ordering::Relaxed);
        }
    }
}

/// One request in flight on its connection, from its head to the end of
/// its response.
struct InFlight(Arc<Activity>);

impl InFlight {
    fn begin(activity: &Arc<Activity>) -> Self {
        activity.in_flight.fetch_add(1, Ordering::Relaxed);
        activity.first_byte.store(NONE, Ordering::Relaxed);
        InFlight(Arc::clone(activity))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity.served.fetch_add(1, Ordering::Relaxed);
        if activity.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            activity.idle_since.store(activity.now(), Ordering::Relaxed);
        }
    }
}

/// The connection's socket, telling its [`Activity`] when bytes arrive.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl Watched {
    /// Tells the activity whether a write progressed or would block.
    fn watch_write(&self, polled: &Poll<io::Result<usize>>) {
        match polled {
            Poll::Ready(Ok(n)) if *n > 0 => self.activity.wrote(true),
            Poll::Pending => self.activity.wrote(false),
            _ => {}
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch_write(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch_write(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// Raises the soft limit on open files (`RLIMIT_NOFILE`) to the hard
/// limit, so that `--max-connections` on each face, the store and etcd
/// fit (many systems start services at a soft limit of 1024). Returns the
/// limit now in force (`None`: unlimited).
///
/// # Errors
/// `setrlimit`'s, as text (the limit then stays as it was).
pub(crate) fn raise_open_files_limit() -> Result<Option<u64>, String> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return Ok(limit.current);
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        },
    )
    .map_err(|e| format!("raising the open-files limit to {:?}: {e}", limit.maximum))?;
    Ok(limit.maximum)
}

/// `response` with `Cache-Control: no-store`: for answers that depend on
/// the request's token or on the moment (a probe), which no cache may
/// keep.
pub(crate) fn no_store(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A face's own routes under the one layer every face has ([`within`]):
/// the request timeout (`--request-timeout`) and
/// `X-Content-Type-Options: nosniff` on every answer.
pub(crate) fn guarded(router: Router, timeout: Duration) -> Router {
    router.layer(axum::middleware::from_fn(move |request, next| {
        within(timeout, request, next)
    }))
}

/// [`guarded`]'s middleware: a request whose response headers are not
/// ready within `timeout` is answered 503 `http.request_timeout` with
/// `Retry-After` (its handler is dropped) and `Cache-Control: no-store`;
/// every answer gets `X-Content-Type-Options: nosniff` (a browser never
/// reads one as another type than it says).
async fn within(timeout: Duration, request: Request, next: Next) -> Response {
    let mut response = match tokio::time::timeout(timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => {
            let mut response = kms::http::error_response(
                StatusCode::SERVICE_UNAVAILABLE,
                "http.request_timeout",
                "the request took longer than the server's request timeout",
            );
            // Outside each face's own layers: no cache keeps it.
            response
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            response
        }
    };
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;

    #[tokio::test]
    async fn a_route_slower_than_the_request_timeout_is_answered_503() {
        let timeout = Duration::from_millis(50);
        let router = guarded(
            Router::new()
                .route("/slow", get(|| tokio::time::sleep(Duration::from_secs(30))))
                .route("/fast", get(|| async {})),
            timeout,
        );
        let get = |path: &str| Request::get(path).body(Body::empty()).unwrap();
        let fast = router.clone().oneshot(get("/fast")).await.unwrap();
        assert_eq!(fast.status(), StatusCode::OK);
        assert_eq!(fast.headers()["x-content-type-options"], "nosniff");
        let started = std::time::Instant::now();
        let slow = router.oneshot(get("/slow")).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(10), "not cut off");
        assert_eq!(slow.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(slow.headers()["retry-after"], "1");
        assert_eq!(slow.headers()["x-content-type-options"], "nosniff");
        let body = axum::body::to_bytes(slow.into_body(), 1024).await.unwrap();
        assert!(String::from_utf8_lossy(&body).contains("http.request_timeout"));
    }
}
