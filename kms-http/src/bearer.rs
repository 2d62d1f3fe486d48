//! [`BearerLayer`]: verifies `Authorization: Bearer` JWTs through the KMS
//! client before the inner service sees the request (RFC 6750).
//!
//! Failure paths, in the order they are checked:
//! 1. more than one `Authorization` header, or one that is not visible
//!    ASCII; with a token cookie ([`BearerLayer::with_token_cookie`]), a
//!    token in both the header and the cookie, or the cookie twice: 400,
//!    `WWW-Authenticate: Bearer error="invalid_request"`;
//! 2. a token from the cookie on an unsafe request the browser calls
//!    cross-site: 403 `cross_site_request`;
//! 3. no `Authorization` header (nor token cookie), or another scheme:
//!    401, `WWW-Authenticate: Bearer` with no error code (RFC 6750 §3.1:
//!    the client sent no bearer credentials);
//! 4. a token the KMS refuses ([`KmsError::InvalidToken`]): 401,
//!    `Bearer error="invalid_token", error_description="invalid token"`,
//!    the same for every reason: an unauthenticated caller learns nothing
//!    from the token (not its `kid`, not a key's state, not which purposes
//!    or versions exist). The reason is counted by its code and told at
//!    debug level by `KmsClient::verify_jwt`;
//! 5. the KMS is overloaded, dropped the request or is shutting down: 503
//!    with `Retry-After: 1`, so a client retries instead of treating a
//!    good token as bad;
//! 6. any other KMS error: 500.
//!
//! Every refusal has a JSON body `{"error": "<code>", "message": "<text>"}`
//! (`invalid_request`, `cross_site_request`, `unauthorized`,
//! `invalid_token`, or the KMS error's
//! code for a 503 or 500), `Content-Type: application/json` and
//! `X-Content-Type-Options: nosniff`.
//!
//! The inner service is called only with a verified token, its claims in
//! the request's extensions ([`VerifiedClaims`]) beside the key that signed
//! it ([`kms_actor::JwtSigner`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::ConnectInfo;
use http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use kms_actor::{KmsClient, Origin, TokenKeys};

use crate::authorize::{Authorize, Authorized};
use crate::client_address::ClientAddress;
use crate::error_body::{error_body, ErrorCode};
use crate::record::{RecordToken, TokenRecord};
use crate::resource_metadata::ResourceMetadata;
use crate::token_cookie;
use kms_core::KmsError;
use kms_jose::{Claims, Validation};
use tower::Layer;

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
#[derive(Debug, Clone)]
struct BearerState {
    client: KmsClient,
    keys: TokenKeys,
    validation: Validation,
    /// Whose request it is ([`BearerLayer::with_client_address`]).
    client_address: Option<ClientAddress>,
    /// The cookie a token may come in ([`BearerLayer::with_token_cookie`]).
    token_cookie: Option<Arc<str>>,
    /// The resource metadata's URL, in every 401 challenge
    /// ([`BearerLayer::with_resource_metadata`]).
    resource_metadata: Option<Arc<str>>,
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
                client_address: None,
                token_cookie: None,
                resource_metadata: None,
            }),
        }
    }

    /// Verifies each token as a request from its client
    /// ([`KmsClient::for_origin`], keyed by [`Origin::from_ip`]): the
    /// address `client_address` finds from the connection's peer (axum's
    /// `ConnectInfo<SocketAddr>` in the request's extensions) and its
    /// `X-Forwarded-For`, so that a client whose signatures keep failing
    /// is verified apart from the others' batches. A request without
    /// `ConnectInfo` is verified with no origin.
    #[must_use]
    pub fn with_client_address(mut self, client_address: ClientAddress) -> Self {
        Arc::make_mut(&mut self.state).client_address = Some(client_address);
        self
    }
}

impl BearerLayer {
    /// Takes the token from cookie `name` when the request has no
    /// `Authorization` header (`token_cookie.rs` reads the `Cookie`
    /// header). A request with both, or with the cookie twice, is 400
    /// `invalid_request` (RFC 6750 §2: one method per request). A
    /// cookie-borne token on an unsafe request the browser calls
    /// cross-site (`Sec-Fetch-Site: cross-site`; a method other than GET,
    /// HEAD and OPTIONS, or a forward-auth check whose
    /// `X-Original-Method` or `X-Forwarded-Method` names one) is 403
    /// `cross_site_request`, so that another site's form cannot ride the
    /// cookie.
    #[must_use]
    pub fn with_token_cookie(mut self, name: &str) -> Self {
        Arc::make_mut(&mut self.state).token_cookie = Some(Arc::from(name));
        self
    }

    /// Adds `resource_metadata="URL"` (RFC 9728 §5.1), `metadata`'s URL,
    /// to every 401 challenge, so that a client finds where to get a
    /// token.
    #[must_use]
    pub fn with_resource_metadata(mut self, metadata: &ResourceMetadata) -> Self {
        Arc::make_mut(&mut self.state).resource_metadata = Some(Arc::from(metadata.url()));
        self
    }
}

impl<S> Layer<S> for BearerLayer {
    type Service = BearerService<S>;

    fn layer(&self, inner: S) -> BearerService<S> {
        Authorized::new(inner, self.clone())
    }
}

/// The service [`BearerLayer`] makes.
pub type BearerService<S> = Authorized<S, BearerLayer>;

impl Authorize for BearerLayer {
    /// Verifies `request`'s bearer token (module docs) and puts its
    /// [`VerifiedClaims`] and signer in the request's extensions.
    ///
    /// # Errors
    /// The refusal to answer with, in the module docs' order.
    async fn authorize<B: Send, R: From<String>>(
        &self,
        request: &mut Request<B>,
    ) -> Result<(), Response<R>> {
        self.state.authorize(request).await
    }
}

impl BearerState {
    /// `BearerLayer`'s [`Authorize::authorize`].
    async fn authorize<ReqBody, ResBody: From<String>>(
        &self,
        request: &mut Request<ReqBody>,
    ) -> Result<(), Response<ResBody>> {
        // Borrowed from the request's header until the answer: the
        // token is copied once, into the verify request.
        let metadata = self.resource_metadata.as_deref();
        let verified = match self.credential(request) {
            Err(refusal) => {
                refusal.count(&self.client);
                return Err(refusal.response(metadata));
            }
            Ok(token) => {
                let origin = self.client_address.as_ref().and_then(|address| {
                    let ConnectInfo(peer) =
                        request.extensions().get::<ConnectInfo<SocketAddr>>()?;
                    Some(Origin::from_ip(address.of(peer.ip(), request.headers())))
                });
                match origin {
                    Some(origin) => {
                        self.client
                            .for_origin(origin)
                            .verify_jwt(token, &self.keys, &self.validation)
                            .await
                    }
                    None => {
                        self.client
                            .verify_jwt(token, &self.keys, &self.validation)
                            .await
                    }
                }
            }
        };
        match verified {
            Ok(verified) => {
                let extensions = request.extensions_mut();
                if extensions.get::<RecordToken>().is_some() {
                    extensions.insert(TokenRecord::of(&verified));
                }
                extensions.insert(VerifiedClaims(verified.claims));
                extensions.insert(verified.signer);
                Ok(())
            }
            Err(e) => Err(Refusal::Kms(e).response(metadata)),
        }
    }
}

impl BearerState {
    /// The request's token: from its `Authorization` header, or from the
    /// token cookie when it has none ([`BearerLayer::with_token_cookie`]).
    fn credential<'r, B>(&self, request: &'r Request<B>) -> Result<&'r str, Refusal> {
        let headers = request.headers();
        let Some(name) = &self.token_cookie else {
            return bearer_token(headers);
        };
        let cookie = token_cookie::value(headers, name).map_err(Refusal::BadRequest)?;
        match cookie {
            None => bearer_token(headers),
            Some(_) if headers.contains_key(AUTHORIZATION) => Err(Refusal::BadRequest(
                "a token in both the Authorization header and the cookie",
            )),
            Some(_) if token_cookie::cross_site_unsafe(request.method(), headers) => {
                Err(Refusal::CrossSite)
            }
            Some(token) => Ok(token),
        }
    }
}

/// Why a request did not reach the inner service.
enum Refusal {
    /// No bearer credentials.
    NoCredentials,
    /// More than one `Authorization` header, or one that is not text; a
    /// token in both the header and the cookie, or the cookie twice.
    BadRequest(&'static str),
    /// A cookie-borne token on a cross-site unsafe request.
    CrossSite,
    /// The KMS's answer.
    Kms(KmsError),
}

impl Refusal {
    /// Counts a refusal made before any token reached the KMS in
    /// `kms_token_refusals_total{topic,code}` (`verify_jwt` counts the
    /// others): `http.no_credentials` or `http.invalid_request`.
    fn count(&self, client: &KmsClient) {
        let code = match self {
            Refusal::NoCredentials => "http.no_credentials",
            Refusal::BadRequest(_) => "http.invalid_request",
            Refusal::CrossSite => "http.cross_site_cookie",
            Refusal::Kms(_) => return,
        };
        metrics::counter!(
            kms_actor::metrics::TOKEN_REFUSALS_TOTAL,
            "topic" => client.topic().to_owned(),
            "code" => code
        )
        .increment(1);
    }

    /// The answer, its 401 challenge with `resource_metadata` when given.
    fn response<B: From<String>>(self, resource_metadata: Option<&str>) -> Response<B> {
        // The stable code an access log records: the KMS's own for a
        // refused token (`jose.expired`), where the body says only
        // `invalid_token`.
        let logged = match &self {
            Refusal::NoCredentials => "http.no_credentials",
            Refusal::BadRequest(_) => "http.invalid_request",
            Refusal::CrossSite => "http.cross_site_cookie",
            Refusal::Kms(KmsError::InvalidToken { code, .. }) => code,
            Refusal::Kms(e) => e.code(),
        };
        let (status, challenge, code, message) = match self {
            Refusal::NoCredentials => (
                StatusCode::UNAUTHORIZED,
                Some("Bearer".to_owned()),
                "unauthorized",
                "bearer token required",
            ),
            Refusal::BadRequest(reason) => (
                StatusCode::BAD_REQUEST,
                Some(format!(
                    "Bearer error=\"invalid_request\", error_description=\"{reason}\""
                )),
                "invalid_request",
                reason,
            ),
            Refusal::CrossSite => (
                StatusCode::FORBIDDEN,
                None,
                "cross_site_request",
                "a token from a cookie cannot authorize an unsafe cross-site request",
            ),
            Refusal::Kms(KmsError::InvalidToken { .. }) => (
                StatusCode::UNAUTHORIZED,
                Some(INVALID_TOKEN_CHALLENGE.to_owned()),
                "invalid_token",
                "invalid token",
            ),
            Refusal::Kms(
                e @ (KmsError::Overloaded | KmsError::Dropped | KmsError::ShuttingDown),
            ) => (
                StatusCode::SERVICE_UNAVAILABLE,
                None,
                e.code(),
                "the KMS cannot answer now; retry",
            ),
            Refusal::Kms(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                None,
                e.code(),
                "internal error",
            ),
        };
        let mut response = error_body::<B>(status, code, message);
        response.extensions_mut().insert(ErrorCode(logged));
        let challenge = match (challenge, resource_metadata) {
            (Some(c), Some(url)) if status == StatusCode::UNAUTHORIZED => Some(if c == "Bearer" {
                format!("Bearer resource_metadata=\"{url}\"")
            } else {
                format!("{c}, resource_metadata=\"{url}\"")
            }),
            (challenge, _) => challenge,
        };
        if let Some(value) = challenge.and_then(|c| HeaderValue::from_str(&c).ok()) {
            response.headers_mut().insert(WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The answer the layer gives every refused token: 401 with
/// `WWW-Authenticate: Bearer error="invalid_token",
/// error_description="invalid token"` (RFC 6750 §3) and the JSON body
/// `{"error": "invalid_token", "message": "invalid token"}`. For a service
/// behind the layer that refuses a verified token on grounds of its own (a
/// claim it cannot pass on, say), so that its refusal cannot be told from
/// the layer's.
pub fn invalid_token_response<B: From<String>>() -> Response<B> {
    invalid_token_response_with(None)
}

/// [`invalid_token_response`], its challenge with `resource_metadata`
/// (RFC 9728 §5.1) when given, as a layer
/// [`with_resource_metadata`](BearerLayer::with_resource_metadata)
/// answers.
pub fn invalid_token_response_with<B: From<String>>(
    resource_metadata: Option<&str>,
) -> Response<B> {
    Refusal::Kms(KmsError::InvalidToken {
        code: "http.refused_by_service",
        reason: String::new(),
    })
    .response(resource_metadata)
}

/// The challenge of every refused token (RFC 6750 §3), whatever the
/// reason.
const INVALID_TOKEN_CHALLENGE: &str =
    "Bearer error=\"invalid_token\", error_description=\"invalid token\"";

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

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS};

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
    fn every_refused_token_gets_the_same_answer() {
        let answer = |code: &'static str, reason: &str| {
            Refusal::Kms(KmsError::InvalidToken {
                code,
                reason: reason.to_owned(),
            })
            .response::<String>(None)
        };
        let expired = answer("jose.expired", "expired at 1");
        let destroyed = answer(
            "kms.key_destroyed",
            "kms:acme:tokens:ed25519:0:v1 destroyed",
        );
        for response in [&expired, &destroyed] {
            assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
            assert_eq!(
                response.headers()[WWW_AUTHENTICATE],
                INVALID_TOKEN_CHALLENGE
            );
            assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
            assert_eq!(response.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff");
        }
        assert_eq!(expired.body(), destroyed.body());
        assert!(!destroyed.body().contains("acme"));
        let service = invalid_token_response::<String>();
        assert_eq!(service.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(service.headers(), expired.headers());
        assert_eq!(service.body(), expired.body());
    }
}
