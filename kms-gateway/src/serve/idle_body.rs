//! [`IdleBody`]: a body whose frames must keep coming, for the proxy
//! mode's streams (a client's upload to the upstream, the upstream's
//! answer to the client). A stream that stalls longer than the idle
//! timeout between two frames ends with an error, so neither a silent
//! upstream nor a silent client holds a connection (and its
//! `--max-connections` slot) forever.
//!
//! It also says when the body has ended ([`IdleBody::new`]'s `ended`), so
//! that the upstream timeout can start once the whole request is sent:
//! an upload may take as long as it keeps moving.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::oneshot;
use tokio::time::{Instant, Sleep};

/// The error types a body may carry (hyper's and axum's both convert).
pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// `inner`, ended with an error when no frame arrives for `idle`.
pub(crate) struct IdleBody<B> {
    inner: B,
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
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.moved = Instant::now();
                // hyper stops at the last frame without asking for the
                // end when the length says so.
                if this.inner.is_end_stream() {
                    this.end();
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
