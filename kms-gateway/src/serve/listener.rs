//! One face's server: an accept loop on hyper (HTTP/1.1) with the limits a
//! server on a network needs, which `axum::serve` does not set (it builds
//! hyper without a timer, so hyper's header-read timeout is off, and it
//! accepts without bound).
//!
//! * **At most [`Limits::max_connections`] connections** at once per face:
//!   the loop accepts one connection, then waits for its slot before it
//!   accepts another, so further clients wait in the kernel's backlog
//!   instead of costing a file descriptor each. At the cap, the connection
//!   idle the longest between two requests (a keep-alive one with nothing
//!   in flight and no byte of a next request) is closed to make room, so
//!   idle connections cannot hold every slot while a client waits.
//! * **At most [`Limits::max_connections_per_ip`] per client address**
//!   (a `--trusted-proxy` peer excepted): one over it is closed right
//!   after `accept`, before a byte is read, and counted in
//!   `kms_connections_refused_total{face,reason="per_ip"}`.
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
//!   shutdown) and closes; [`serve`] returns when all are closed. Its
//!   task owns every connection's task: aborting it (the drain deadline)
//!   closes them all.
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
//! new timer per request. The accept loop reads other connections'
//! activity only as a hint to choose whom to close at the cap; the
//! connection itself decides, in its own task, whether it is still idle
//! when told.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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
use kms::http::ClientAddress;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

use super::access_log::AccessLog;
use crate::config::Limits;
use crate::telemetry::CONNECTIONS_REFUSED_TOTAL;

/// The most a connection buffers of a request's head, and of the bytes
/// read ahead (bytes): heads with an 8 KiB token fit; hyper's default (about
/// 400 KiB) times `--max-connections` would be gigabytes held by clients
/// that send a head slowly.
const MAX_BUF: usize = 64 * 1024;

/// How long to wait before accepting again after `accept` failed (out of
/// file descriptors, say), so the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` (the face `face`) within `limits` until
/// `stop` turns true and every connection has closed (module docs);
/// `trusted` peers have no per-address limit.
pub(crate) async fn serve(
    face: &'static str,
    listener: TcpListener,
    handler: Handler,
    limits: Limits,
    trusted: ClientAddress,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(Open::default());
    // Owned here, so that aborting this task closes every connection.
    let mut connections = tokio::task::JoinSet::new();
    let refused_per_ip =
        metrics::counter!(CONNECTIONS_REFUSED_TOTAL, "face" => face, "reason" => "per_ip");
    loop {
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
        let ip = peer.ip().to_canonical();
        let per_ip = if trusted.is_trusted(ip) {
            None
        } else {
            match open.admit(ip, limits.max_connections_per_ip) {
                Some(admitted) => Some(admitted),
                None => {
                    // Closed before a byte is read (dropped here).
                    refused_per_ip.increment(1);
                    tracing::debug!(%peer, "connection refused: per-address limit");
                    continue;
                }
            }
        };
        let Some(slot) = make_room(&slots, &open, &mut stop).await else {
            break;
        };
        // Small answers go out at once (as axum::serve does).
        let _ = stream.set_nodelay(true);
        let (activity, evict) = open.register();
        // The finished ones first: the set holds the live connections.
        while connections.try_join_next().is_some() {}
        connections.spawn(connection(
            stream,
            peer,
            Handler {
                face,
                ..handler.clone()
            },
            limits,
            tls.clone(),
            stop.clone(),
            Held {
                _slot: slot,
                _per_ip: per_ip,
                registered: Registered {
                    open: Arc::clone(&open),
                    activity,
                    evict,
                },
            },
        ));
    }
    drop(listener);
    // Until every connection has closed. Dropped before (the drain
    // deadline aborts this task), the set aborts every connection left.
    while connections.join_next().await.is_some() {}
}

/// A slot for a connection just accepted: at the cap, the connection idle
/// the longest is told to close, again every [`ROOM_CHECK`] while none
/// frees (connections become idle as their answers end); `None` once
/// `stop` turns true. Further clients wait in the kernel's backlog
/// meanwhile: the loop accepts no other.
async fn make_room(
    slots: &Arc<Semaphore>,
    open: &Open,
    stop: &mut watch::Receiver<bool>,
) -> Option<OwnedSemaphorePermit> {
    loop {
        if let Ok(slot) = Arc::clone(slots).try_acquire_owned() {
            return Some(slot);
        }
        open.evict_longest_idle();
        tokio::select! {
            biased;
            () = stopped(stop) => return None,
            slot = Arc::clone(slots).acquire_owned() => return slot.ok(),
            () = tokio::time::sleep(ROOM_CHECK) => {}
        }
    }
}

/// How often a connection waiting for a slot at the cap looks again for
/// an idle one to close.
const ROOM_CHECK: Duration = Duration::from_millis(100);

/// What serves a face's requests: its routes, and the access log, if
/// any (`access_log.rs`).
#[derive(Clone)]
pub(crate) struct Handler {
    /// The face's name, in the access log (set by [`serve`]).
    pub(crate) face: &'static str,
    pub(crate) router: Router,
    pub(crate) access_log: Option<AccessLog>,
}

impl Handler {
    /// The face's routes, not logged.
    pub(crate) fn new(router: Router) -> Self {
        Handler {
            face: "",
            router,
            access_log: None,
        }
    }
}

/// What a connection holds while it lives: its slot, its place in its
/// address's count, its entry among the open connections.
struct Held {
    _slot: OwnedSemaphorePermit,
    _per_ip: Option<PerIp>,
    registered: Registered,
}

/// One open connection: its activity and its eviction notice.
type Entry = (Arc<Activity>, Arc<Notify>);

/// The face's open connections: each one's activity (to find the one
/// idle the longest) and its eviction notice, and the count per client
/// address.
#[derive(Default)]
struct Open {
    connections: Mutex<HashMap<u64, Entry>>,
    next_id: AtomicU64,
    per_ip: Mutex<HashMap<IpAddr, usize>>,
}

impl Open {
    fn connections(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.connections
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A new connection's activity and eviction notice, registered.
    fn register(self: &Arc<Self>) -> ((u64, Arc<Activity>), Arc<Notify>) {
        // Relaxed: a unique number, synchronising with nothing.
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new());
        let evict = Arc::new(Notify::new());
        self.connections()
            .insert(id, (Arc::clone(&activity), Arc::clone(&evict)));
        ((id, activity), evict)
    }

    /// Tells the connection idle the longest between two requests to
    /// close (module docs); nothing when none is.
    fn evict_longest_idle(&self) {
        let connections = self.connections();
        let idlest = connections
            .values()
            .filter_map(|(activity, evict)| activity.idle_since().map(|since| (since, evict)))
            .min_by_key(|(since, _)| *since);
        if let Some((_, evict)) = idlest {
            // A stored permit if the connection is not waiting now: it
            // reads it at its next poll.
            evict.notify_one();
        }
    }

    /// Counts one more connection from `ip`, unless it has `max` already.
    fn admit(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PerIp> {
        let mut per_ip = self.per_ip.lock().unwrap_or_else(PoisonError::into_inner);
        let count = per_ip.entry(ip).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(PerIp {
            open: Arc::clone(self),
            ip,
        })
    }
}

/// One connection counted against its address; uncounted when dropped.
struct PerIp {
    open: Arc<Open>,
    ip: IpAddr,
}

impl Drop for PerIp {
    fn drop(&mut self) {
        let mut per_ip = self
            .open
            .per_ip
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                per_ip.remove(&self.ip);
            }
        }
    }
}

/// A connection's entry among the open ones; removed when dropped.
struct Registered {
    open: Arc<Open>,
    activity: (u64, Arc<Activity>),
    evict: Arc<Notify>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.open.connections().remove(&self.activity.0);
    }
}

/// Serves one connection until it closes, a timeout ends it, or a stop
/// lets its request in flight finish; with `tls`, after a handshake that
/// must end within the header timeout from accept.
async fn connection(
    stream: TcpStream,
    peer: SocketAddr,
    handler: Handler,
    limits: Limits,
    tls: Option<TlsAcceptor>,
    mut stop: watch::Receiver<bool>,
    held: Held,
) {
    let activity = Arc::clone(&held.registered.activity.1);
    let evict = Arc::clone(&held.registered.evict);
    let watched = Watched {
        inner: stream,
        activity: Arc::clone(&activity),
    };
    let Some(acceptor) = tls else {
        return drive(watched, peer, handler, limits, stop, activity, evict).await;
    };
    let deadline = activity.at(0, limits.header_timeout);
    let handshake = tokio::select! {
        biased;
        () = stopped(&mut stop) => return,
        handshake = tokio::time::timeout_at(deadline, acceptor.accept(watched)) => handshake,
    };
    match handshake {
        Ok(Ok(stream)) => drive(stream, peer, handler, limits, stop, activity, evict).await,
        // A client's failure (no certificate, a wrong one, a scan): told
        // at debug level only, as a refused token is.
        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

/// Serves HTTP/1.1 on `io` (module docs); `evict` asks it to close if
/// it is idle between two requests (else after the request in flight).
async fn drive<I>(
    io: I,
    peer: SocketAddr,
    handler: Handler,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    activity: Arc<Activity>,
    evict: Arc<Notify>,
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
            let mut logged = handler
                .access_log
                .as_ref()
                .map(|log| log.begin(handler.face, &mut request, peer));
            let call = handler.router.clone().oneshot(request.map(Body::new));
            async move {
                let mut response = call.await?;
                if let Some(logged) = logged.as_mut() {
                    logged.answered(&mut response);
                }
                // Until the body is sent (or dropped), the request counts
                // as in flight and its access-log line waits: both go
                // with it.
                Ok::<_, Infallible>(response.map(|body| {
                    Body::new(body.map_frame(move |frame| {
                        let _in_flight = &in_flight;
                        if let (Some(logged), Some(data)) = (logged.as_mut(), frame.data_ref()) {
                            logged.sent(data.len());
                        }
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
    let mut evicted = std::pin::pin!(evict.notified());
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
        if !stopping && evicted.as_mut().poll(cx).is_ready() {
            // Chosen to make room at the cap: closed now if still idle
            // between two requests (nothing accepted is lost), else once
            // the request in flight is answered.
            if activity.idle_since().is_some() {
                return Poll::Ready(());
            }
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
/// times in µs since `born`. Every write is made by the connection's own
/// task, so `Relaxed` orderings suffice (the atomics are there because
/// the service must be `Send`); the accept loop's reads are hints that
/// synchronise with nothing.
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

    /// Since when the connection has been idle between two requests (a
    /// keep-alive one that served at least one, nothing in flight, no
    /// byte of a next request); `None` otherwise. Read by the connection's
    /// own task, or as a hint by the accept loop (module docs).
    fn idle_since(&self) -> Option<Instant> {
        let idle = self.in_flight.load(Ordering::Relaxed) == 0
            && self.served.load(Ordering::Relaxed) > 0
            && self.first_byte.load(Ordering::Relaxed) == NONE;
        idle.then(|| self.at(self.idle_since.load(Ordering::Relaxed), Duration::ZERO))
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
