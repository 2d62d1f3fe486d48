//! The `tower` feature: `RetryPolicy` retries exactly the retryable
//! errors, at most its count, and a load-shed refusal is
//! `KmsError::Overloaded`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kms_actor::RetryPolicy;
use kms_core::KmsError;
use tower::{service_fn, BoxError, Service, ServiceBuilder, ServiceExt};

/// A service that answers `errors[i]` on its i-th call (then `Ok`), and
/// counts its calls.
fn failing(
    errors: Vec<KmsError>,
) -> (
    Arc<AtomicUsize>,
    impl Service<u32, Response = u32, Error = KmsError> + Clone,
) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let errors = Arc::new(errors);
    let service = service_fn(move |req: u32| {
        let i = counted.fetch_add(1, Ordering::SeqCst);
        let answer = errors.get(i).cloned().map_or(Ok(req), Err);
        async move { answer }
    });
    (calls, service)
}

#[tokio::test(start_paused = true)]
async fn retryable_errors_are_retried_with_backoff_up_to_the_count() {
    let (calls, inner) = failing(vec![KmsError::Overloaded, KmsError::Dropped]);
    let mut svc = ServiceBuilder::new()
        .retry(RetryPolicy::new(3, Duration::from_millis(10)))
        .service(inner);
    let start = tokio::time::Instant::now();
    assert_eq!(svc.ready().await.expect("ready").call(7).await, Ok(7));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Between half and all of 10 ms, then of 20 ms (the clock is paused,
    // so only the waits count).
    let waited = start.elapsed();
    assert!(
        (Duration::from_millis(15)..=Duration::from_millis(30)).contains(&waited),
        "{waited:?}"
    );

    let (calls, inner) = failing(vec![KmsError::Overloaded; 10]);
    let mut svc = ServiceBuilder::new()
        .retry(RetryPolicy::new(2, Duration::from_millis(1)))
        .service(inner);
    assert_eq!(
        svc.ready().await.expect("ready").call(7).await,
        Err(KmsError::Overloaded)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the call and two retries");
}

#[tokio::test(start_paused = true)]
async fn an_error_that_is_not_retryable_is_answered_at_once() {
    let invalid = KmsError::InvalidArgument {
        what: "message",
        reason: "test".to_owned(),
    };
    let (calls, inner) = failing(vec![invalid.clone()]);
    let mut svc = ServiceBuilder::new()
        .retry(RetryPolicy::new(5, Duration::from_millis(1)))
        .service(inner);
    assert_eq!(
        svc.ready().await.expect("ready").call(1).await,
        Err(invalid)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_load_shed_refusal_is_overloaded_and_retried_as_one() {
    // A service that is never ready: load-shed refuses every call.
    let mut shed = ServiceBuilder::new().load_shed().service(NeverReady);
    let refused = shed
        .ready()
        .await
        .expect("ready")
        .call(1)
        .await
        .expect_err("refused");
    let overloaded = refused
        .downcast::<tower::load_shed::error::Overloaded>()
        .expect("a load-shed refusal");
    assert_eq!(KmsError::from(*overloaded), KmsError::Overloaded);

    // Boxed errors: a retryable KmsError and a refusal are retried, others not.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let inner = service_fn(move |_: u32| {
        let i = counted.fetch_add(1, Ordering::SeqCst);
        async move {
            match i {
                0 => Err(BoxError::from(KmsError::Overloaded)),
                1 => Err(BoxError::from(tower::load_shed::error::Overloaded::new())),
                _ => Err(BoxError::from("not a KMS error")),
            }
        }
    });
    let mut svc = ServiceBuilder::new()
        .retry(RetryPolicy::new(5, Duration::from_millis(1)))
        .service(inner);
    let _: Result<u32, BoxError> = svc.ready().await.expect("ready").call(1).await;
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// A service whose `poll_ready` is always `Pending`.
struct NeverReady;

impl Service<u32> for NeverReady {
    type Response = u32;
    type Error = BoxError;
    type Future = std::future::Ready<Result<u32, BoxError>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Pending
    }

    fn call(&mut self, req: u32) -> Self::Future {
        std::future::ready(Ok(req))
    }
}
