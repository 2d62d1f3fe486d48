//! [`Authorized`]: the one service behind the layers that let a request
//! through or answer it themselves ([`crate::BearerLayer`],
//! [`crate::AccessLayer`]): the layer's [`Authorize::authorize`] runs
//! first, and the inner service is called only when it lets the request
//! in, with what it learned in the request's extensions. A refusal carries
//! `Cache-Control: no-store` (unless the layer set its own): it depends on
//! the request's token. Every answer carries, in its extensions, what an
//! access log reads: the deciding [`AccessRule`] and, when the request
//! asked with `RecordToken`, the token's `TokenRecord`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::{Request, Response};
use tower::Service;

use crate::record::{AccessRule, TokenRecord};

/// What a layer decides of a request before the inner service sees it.
pub trait Authorize: Clone + Send + Sync + 'static {
    /// `Ok` lets `request` through (what was learned put in its
    /// extensions); `Err` is the answer instead.
    ///
    /// # Errors
    /// The refusal to answer with.
    fn authorize<B: Send, R: From<String>>(
        &self,
        request: &mut Request<B>,
    ) -> impl Future<Output = Result<(), Response<R>>> + Send;
}

/// The service an [`Authorize`] layer makes: `inner` behind `authorizer`.
#[derive(Clone, Debug)]
pub struct Authorized<S, A> {
    inner: S,
    authorizer: A,
}

impl<S, A> Authorized<S, A> {
    pub(crate) fn new(inner: S, authorizer: A) -> Self {
        Authorized { inner, authorizer }
    }
}

impl<S, A, ReqBody, ResBody> Service<Request<ReqBody>> for Authorized<S, A>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
    A: Authorize,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<ReqBody>) -> Self::Future {
        // The instance polled ready serves this request; a fresh clone
        // takes its place (tower's usual pattern).
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let authorizer = self.authorizer.clone();
        Box::pin(async move {
            let decided = authorizer.authorize(&mut request).await;
            // What the answer carries for an access log: the token's record
            // (asked for) and the deciding access rule.
            let record = request.extensions_mut().remove::<TokenRecord>();
            let rule = request.extensions().get::<AccessRule>().copied();
            let mut response = match decided {
                Ok(()) => inner.call(request).await?,
                Err(mut refusal) => {
                    // It depends on the request's token: no cache keeps it.
                    refusal
                        .headers_mut()
                        .entry(http::header::CACHE_CONTROL)
                        .or_insert(http::HeaderValue::from_static("no-store"));
                    refusal
                }
            };
            let extensions = response.extensions_mut();
            if let Some(record) = record {
                extensions.insert(record);
            }
            if let Some(rule) = rule {
                extensions.insert(rule);
            }
            Ok(response)
        })
    }
}
