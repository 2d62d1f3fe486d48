//! [`RetryPolicy`] (feature `tower`): a `tower::retry::Policy` for services
//! whose error is [`KmsError`], or tower's `BoxError` holding one (or a
//! load-shed refusal): it retries exactly what [`KmsError::is_retryable`]
//! says may succeed later (`Overloaded`, `Dropped`, an unavailable random
//! source), at most `max_retries` times. The n-th retry waits a random
//! time between half and all of `first_backoff · 2ⁿ⁻¹` ("equal jitter",
//! AWS Architecture Blog, "Exponential Backoff And Jitter", 2015), so
//! callers refused together do not retry together.
//!
//! Tower's `Retry` service clones the policy for each request, so the
//! counts are per request.

use std::time::Duration;

use kms_core::KmsError;

/// Retries retryable [`KmsError`]s with exponential backoff (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    retries_left: u32,
    backoff: Duration,
}

impl RetryPolicy {
    /// At most `max_retries` retries (count) per request; the n-th waits
    /// between half and all of `first_backoff · 2ⁿ⁻¹` (saturating at
    /// `Duration::MAX`).
    pub fn new(max_retries: u32, first_backoff: Duration) -> Self {
        RetryPolicy {
            retries_left: max_retries,
            backoff: first_backoff,
        }
    }

    /// The wait before the next retry, if `retryable` and one is left.
    fn next(&mut self, retryable: bool) -> Option<tokio::time::Sleep> {
        if !retryable || self.retries_left == 0 {
            return None;
        }
        self.retries_left -= 1;
        let ceiling = self.backoff;
        self.backoff = self.backoff.saturating_mul(2);
        let half = ceiling / 2;
        let spread = u64::try_from((ceiling - half).as_nanos()).unwrap_or(u64::MAX);
        let jitter = Duration::from_nanos(rand::RngExt::random_range(&mut rand::rng(), 0..=spread));
        Some(tokio::time::sleep(half + jitter))
    }
}

impl<Req: Clone, Res> tower::retry::Policy<Req, Res, KmsError> for RetryPolicy {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, _: &mut Req, result: &mut Result<Res, KmsError>) -> Option<Self::Future> {
        self.next(result.as_ref().err().is_some_and(KmsError::is_retryable))
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}

impl<Req: Clone, Res> tower::retry::Policy<Req, Res, tower::BoxError> for RetryPolicy {
    type Future = tokio::time::Sleep;

    /// Retries a boxed [`KmsError`] that is retryable, and a load-shed
    /// refusal (`tower::load_shed::error::Overloaded`).
    fn retry(
        &mut self,
        _: &mut Req,
        result: &mut Result<Res, tower::BoxError>,
    ) -> Option<Self::Future> {
        let retryable = result.as_ref().err().is_some_and(|e| {
            e.downcast_ref::<KmsError>()
                .is_some_and(KmsError::is_retryable)
                || e.is::<tower::load_shed::error::Overloaded>()
        });
        self.next(retryable)
    }

    fn clone_request(&mut self, req: &Req) -> Option<Req> {
        Some(req.clone())
    }
}
