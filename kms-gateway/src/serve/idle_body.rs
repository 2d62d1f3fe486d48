//! [`IdleBody`]: a body whose frames must keep coming, for the proxy
//! mode's streams (a client's upload to the upstream, the upstream's
//! answer to the client). A stream that stalls longer than the idle
//! timeout between two frames ends with an error, so neither a silent
//! upstream nor a silent client holds a connection (and its
//! `--max-connections` slot) forever.
//!
//! It also says when the body has ended ([`IdleBody::new`]'s `ended`), so
//! that the upstream timeout can start once the whole request is sent:
//! an upload may take as long as it keeps moving. And it says when its
//! reader stopped taking frames ([`IdleBody::taken`]): an upstream that
//! reads no more of the request's body leaves hyper unable to write, so
//! the body is not polled at all and its own timer never runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

/// The error types a body may carry (hyper's and axum's both convert).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// When the body's reader was last handed a frame without asking for
/// the next one since ([`IdleBody::taken`]). Written by the task that
/// polls the body (hyper's connection task), read by the request's.
#[derive(Debug, Clone)]
pub(crate) struct Taken(Arc<TakenState>);

#[derive(Debug)]
struct TakenState {
    born: Instant,
    /// µs since `born` at which a frame was handed out, the reader not
    /// having polled since; [`WAITING_NONE`] while it polls.
    waiting: AtomicU64,
}

/// No frame is waiting for the reader to come back.
const WAITING_NONE: u64 = u64::MAX;

impl Taken {
    fn new() -> Self {
        Taken(Arc::new(TakenState {
            born: Instant::now(),
            waiting: AtomicU64::new(WAITING_NONE),
        }))
    }

    fn polled(&self) {
        // Relaxed: one value read on its own, publishing nothing else.
        self.0.waiting.store(WAITING_NONE, Ordering::Relaxed);
    }

    fn handed_out(&self) {
        let micros = u64::try_from(self.0.born.elapsed().as_micros()).unwrap_or(WAITING_NONE - 1);
        // Relaxed: as in `polled`.
        self.0.waiting.store(micros, Ordering::Relaxed);
    }

    /// Resolves once the reader has not come back for the next frame for
    /// `idle` (checked at least every quarter of `idle`); never while it
    /// keeps reading.
    pub(crate) async fn stalled_for(&self, idle: Duration) {
        loop {
            // Relaxed: as in `polled`.
            let waiting = self.0.waiting.load(Ordering::Relaxed);
            if waiting == WAITING_NONE {
                tokio::time::sleep(idle / 4).await;
                continue;
            }
            let at = self.0.born + Duration::from_micros(waiting) + idle;
            if Instant::now() >= at {
                return;
            }
            tokio::time::sleep_until(at).await;
        }
    }
}

/// `inner`, ended with an error when no frame arrives for `idle`.
pub(crate) struct IdleBody<B> {
    inner: B,
    /// When the reader last took a frame.
    taken: Taken,
    idle: Duration,
    /// When the last frame came (or the body was made).
    moved: Instant,
    /// Armed only once the body has had to wait: a body read without a
    /// pause never touches tokio's timer.
    timer: Option<Pin<Box<Sleep>>>,
    /// Fired once the body has ended (or at once for an empty one).
    ended: Option<oneshot::Sender<()>>,
}

impl<B: Body> IdleBody<B> {
    /// Wraps `inner`; `ended` fires when its last frame has been read.
    pub(crate) fn new(inner: B, idle: Duration, ended: Option<oneshot::Sender<()>>) -> Self {
        let mut body = IdleBody {
            inner,
            taken: Taken::new(),
            idle,
            moved: Instant::now(),
            timer: None,
            ended,
        };
        // A body that is empty is never polled: it has ended already.
        if body.inner.is_end_stream() {
            body.end();
        }
        body
    }

    /// Tells when its reader stopped taking frames (type docs).
    pub(crate) fn taken(&self) -> Taken {
        self.taken.clone()
    }

    fn end(&mut self) {
        if let Some(ended) = self.ended.take() {
            let _ = ended.send(());
        }
    }
}

impl<B> Body for IdleBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        this.taken.polled();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.moved = Instant::now();
                // hyper stops at the last frame without asking for the
                // end when the length says so.
                if this.inner.is_end_stream() {
                    this.end();
                } else {
                    this.taken.handed_out();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => {
                this.end();
                Poll::Ready(None)
            }
            Poll::Pending => {
                let deadline = this.moved + this.idle;
                let timer = this
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
                if timer.deadline() != deadline {
                    timer.as_mut().reset(deadline);
                }
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                        "no data for {} s (the idle timeout)",
                        this.idle.as_secs_f64()
                    )
                    .into()))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full, StreamBody};

    #[tokio::test]
    async fn a_stalled_body_ends_with_an_error_and_a_moving_one_passes() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, BoxError>>(1);
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|item| (item, rx))
        });
        let (ended, was_ended) = oneshot::channel();
        let mut body = IdleBody::new(
            StreamBody::new(Box::pin(stream)),
            Duration::from_millis(200),
            Some(ended),
        );
        tx.send(Ok(Frame::data(Bytes::from_static(b"one"))))
            .await
            .unwrap();
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "one");
        // Nothing more: an error after the idle timeout, well before the
        // hang deadline.
        let started = std::time::Instant::now();
        let stalled = tokio::time::timeout(Duration::from_secs(30), body.frame())
            .await
            .expect("not cut off");
        assert!(matches!(stalled, Some(Err(_))), "{stalled:?}");
        assert!(started.elapsed() >= Duration::from_millis(150));
        drop(tx);
        // It never ended: `ended` was dropped unfired.
        drop(body);
        assert!(was_ended.await.is_err());
    }

    #[tokio::test]
    async fn taken_tells_a_reader_that_stopped_reading() {
        let chunks = futures::stream::iter(
            [b"one", b"two"].map(|c| Ok::<_, BoxError>(Frame::data(Bytes::from_static(c)))),
        );
        let mut body = IdleBody::new(StreamBody::new(chunks), Duration::from_secs(5), None);
        let taken = body.taken();
        let idle = Duration::from_millis(100);
        // Nothing handed out yet: not stalled.
        assert!(tokio::time::timeout(idle * 3, taken.stalled_for(idle))
            .await
            .is_err());
        let _ = body.frame().await;
        // A frame taken and the reader gone: stalled after `idle`.
        let started = std::time::Instant::now();
        tokio::time::timeout(Duration::from_secs(30), taken.stalled_for(idle))
            .await
            .expect("stalled");
        assert!(started.elapsed() >= idle * 3 / 4);
    }

    #[tokio::test]
    async fn ended_fires_at_the_last_frame_or_at_once_for_an_empty_body() {
        let (ended, was_ended) = oneshot::channel();
        let mut body = IdleBody::new(
            Full::new(Bytes::from_static(b"all")),
            Duration::from_secs(5),
            Some(ended),
        );
        let _ = body.frame().await;
        was_ended.await.expect("ended after the last frame");
        let (ended, was_ended) = oneshot::channel();
        let _empty = IdleBody::new(Full::new(Bytes::new()), Duration::from_secs(5), Some(ended));
        was_ended.await.expect("ended at once");
    }
}
