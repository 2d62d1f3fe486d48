//! [`BearerLayer`]: verifies `Authorization: Bearer` JWTs through the KMS
//! client before the inner service sees the request (RFC 6750).
//!
//! Failure paths, in the order they are checked:
//! 1. more than one `Authorization` header, or one that is not visible
//!    ASCII: 400, `WWW-Authenticate: Bearer error="invalid_request"`;
//! 2. no `Authorization` header, or another scheme: 401,
//!    `WWW-Authenticate: Bearer` with no error code (RFC 6750 §3.1: the
//!    client sent no bearer credentials);
//! 3. a token the KMS refuses ([`KmsError::InvalidToken`]): 401,
//!    `Bearer error="invalid_token", error_description="<code>: <reason>"`;
//! 4. the KMS is overloaded, dropped the request or is shutting down: 503
//!    with `Retry-After: 1`, so a client retries instead of treating a
//!    good token as bad;
//! 5. any other KMS error: 500.
//!
//! The inner service is called only with a verified token, its claims in
//! the request's extensions ([`VerifiedClaims`]) beside the key that signed
//! it ([`kms_actor::JwtSigner`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::{AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use kms_actor::{KmsClient, TokenKeys};
use kms_core::KmsError;
use kms_jose::{Claims, Validation};
use tower::{Layer, Service};

/// The claims of the request's verified bearer token, in its extensions.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedClaims(pub Claims);

/// Wraps a service so that only requests with a valid bearer JWT reach it
/// (module docs); clone it freely.
#[derive(Clone, Debug)]
pub struct BearerLayer {
    state: Arc<BearerState>,
}

/// What every request's future needs, behind one `Arc`: a request costs
/// one reference count, not a [`KmsClient`] clone (several counts on
/// lines every worker shares).
#[derive(Debug)]
struct BearerState {
    client: KmsClient,
    keys: TokenKeys,
    validation: Validation,
}

impl BearerLayer {
    /// Verifies tokens through `client`, accepting those signed by one of
    /// `keys` (on a keystore several tenants share, name this service's:
    /// `TokenKeys::of(&signing_key)`), and checks their claims with
    /// `validation`.
    pub fn new(client: KmsClient, keys: TokenKeys, validation: Validation) -> Self {
        BearerLayer {
            state: Arc::new(BearerState {
                client,
                keys,
                validation,
            }),
        }
    }
}

impl<S> Layer<S> for BearerLayer {
    type Service = BearerService<S>;

    fn layer(&self, inner: S) -> BearerService<S> {
        BearerService {
            inner,
            state: Arc::clone(&self.state),
        }
    }
}

/// The service [`BearerLayer`] makes.
#[derive(Clone, Debug)]
pub struct BearerService<S> {
    inner: S,
    state: Arc<BearerState>,
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for BearerService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send,
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
        let state = Arc::clone(&self.state);
        Box::pin(async move {
            // Borrowed from the request's header until the answer: the
            // token is copied once, into the verify request.
            let verified = match bearer_token(request.headers()) {
                Ok(token) => {
                    state
                        .client
                        .verify_jwt(token, &state.keys, &state.validation)
                        .await
                }
                Err(refusal) => return Ok(refusal.response()),
            };
            match verified {
                Ok(verified) => {
                    let extensions = request.extensions_mut();
                    extensions.insert(VerifiedClaims(verified.claims));
                    extensions.insert(verified.signer);
                    inner.call(request).await
                }
                Err(e) => Ok(Refusal::Kms(e).response()),
            }
        })
    }
}

/// Why a request did not reach the inner service.
enum Refusal {
    /// No bearer credentials.
    NoCredentials,
    /// More than one `Authorization` header, or one that is not text.
    BadRequest(&'static str),
    /// The KMS's answer.
    Kms(KmsError),
}

impl Refusal {
    fn response<B: From<String>>(self) -> Response<B> {
        let (status, challenge, body) = match self {
            Refusal::NoCredentials => (
                StatusCode::UNAUTHORIZED,
                Some("Bearer".to_owned()),
                "bearer token required".to_owned(),
            ),
            Refusal::BadRequest(reason) => (
                StatusCode::BAD_REQUEST,
                Some(format!(
                    "Bearer error=\"invalid_request\", error_description=\"{reason}\""
                )),
                reason.to_owned(),
            ),
            Refusal::Kms(KmsError::InvalidToken { code, reason }) => {
                let description = quotable(&format!("{code}: {reason}"));
                (
                    StatusCode::UNAUTHORIZED,
                    Some(format!(
                        "Bearer error=\"invalid_token\", error_description=\"{description}\""
                    )),
                    description,
                )
            }
            Refusal::Kms(
                e @ (KmsError::Overloaded | KmsError::Dropped | KmsError::ShuttingDown),
            ) => (StatusCode::SERVICE_UNAVAILABLE, None, e.to_string()),
            Refusal::Kms(e) => (StatusCode::INTERNAL_SERVER_ERROR, None, e.code().to_owned()),
        };
        let mut response = Response::new(B::from(body));
        *response.status_mut() = status;
        if let Some(value) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

/// The bearer token of a request (RFC 6750 §2.1; the scheme compared
/// without regard to case, RFC 7235 §2.1).
fn bearer_token(headers: &HeaderMap) -> Result<&str, Refusal> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Err(Refusal::NoCredentials);
    };
    if values.next().is_some() {
        return Err(Refusal::BadRequest("more than one Authorization header"));
    }
    let value = value
        .to_str()
        .map_err(|_| Refusal::BadRequest("the Authorization header is not visible ASCII"))?;
    let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("Bearer") {
        return Err(Refusal::NoCredentials);
    }
    let token = token.trim_matches(' ');
    if token.is_empty() {
        return Err(Refusal::BadRequest("empty bearer token"));
    }
    Ok(token)
}

/// `text` made safe inside a quoted `error_description` (RFC 6750 §3:
/// visible ASCII except `"` and `\`), at most 200 characters.
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            ' '..='~' => c,
            _ => '?',
        })
        .take(200)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(AUTHORIZATION, HeaderValue::from_str(v).expect("header"));
        }
        map
    }

    #[test]
    fn the_scheme_is_case_insensitive_and_one_header_only() {
        for ok in ["Bearer abc", "bearer abc", "BEARER  abc "] {
            assert_eq!(bearer_token(&headers(&[ok])).ok(), Some("abc"), "{ok}");
        }
        assert!(matches!(
            bearer_token(&headers(&[])),
            Err(Refusal::NoCredentials)
        ));
        assert!(matches!(
            bearer_token(&headers(&["Basic YTpi"])),
            Err(Refusal::NoCredentials)
        ));
        assert!(matches!(
            bearer_token(&headers(&["Bearer a", "Bearer b"])),
            Err(Refusal::BadRequest(_))
        ));
        assert!(matches!(
            bearer_token(&headers(&["Bearer "])),
            Err(Refusal::BadRequest(_))
        ));
    }

    #[test]
    fn descriptions_stay_inside_their_quotes() {
        assert_eq!(quotable("a \"b\" \\ é\n"), "a 'b' ' ??");
        assert_eq!(quotable(&"x".repeat(500)).len(), 200);
    }
}
