//! [`AccessLayer`]: the access rules (`kms_access`) in front of a service,
//! with the bearer layer's verification where a rule needs a token.
//!
//! For each request, in order:
//! 1. the judged path and method: the request's own
//!    ([`AccessLayer::new`]), or, for a forward-auth check
//!    ([`AccessLayer::for_forward_auth`]), the original request's (below);
//! 2. the path normalized (`kms_access::normalize`); one that is refused,
//!    or a method with a lower-case letter (`post`, which some servers
//!    serve as `POST`), is 400 `invalid_request` for a request judged on
//!    its own path (403 for a forward-auth check: NGINX answers 500 for
//!    any status but 401 and 403); a request judged on its own path whose
//!    path changed goes on with the normalized path (its query kept), so
//!    that the rules and the service see the same one. A forward-auth
//!    check's original path with dot-segments or repeated slashes is
//!    refused (403): the proxy passes the path on as the client sent it,
//!    and the service may read it otherwise than the rules did;
//! 3. the first matching rule, else the default (`AccessRules::decide`):
//!    * `deny`: 403 `access_denied`, token or not;
//!    * `anyone`: the inner service, with no token looked at and
//!      [`Anyone`] in the request's extensions;
//!    * a token: the bearer layer's verification ([`crate::BearerLayer`]:
//!      its 400, 401 and 503 answers unchanged), then the rule's
//!      requirements on the verified claims; a token that misses one is
//!      403 with `WWW-Authenticate: Bearer error="insufficient_scope"`,
//!      plus `scope="…"` (the rule's scopes) when a scope was missing
//!      (RFC 6750 §3.1), and the body
//!      `{"error":"insufficient_scope","requirement":KIND}` (KIND:
//!      `scope`, `claim`, `issuer` or `audience`; never a claim's value).
//!
//! Every request that reaches the inner service carries [`AccessRule`]
//! (the deciding rule) in its extensions.
//!
//! A forward-auth check judges the original request: its path from
//! `X-Original-URI` (NGINX), else `X-Forwarded-Uri` (Traefik, Caddy), else
//! the check's own path under the forward-auth route (Envoy's `ext_authz`
//! appends it), else `/`; its method from `X-Original-Method`, else
//! `X-Forwarded-Method`, else the check's own (but with `X-Original-URI`,
//! `X-Original-Method` is required: NGINX's check is always a GET). A
//! proxy that passes the client's own headers on (Caddy, Traefik; NGINX
//! too, for the headers its configuration does not set) lets a client
//! add a header of its own, so the check is refused (403) when two
//! sources of the path are present and do not name the same path once
//! normalized, when the two method headers differ, when a header is
//! repeated or not text, or when a URI header does not start with `/`.
//! The query (after `?`) is not part of the path.
//!
//! The rules are shared by every clone of the layer and by the layers
//! made from it, and replaced whole ([`AccessLayer::replace_rules`]): a
//! request is judged by one set of rules, from start to end.
//!
//! Mounting it in an app's own axum stack: around the whole router, so
//! that the router routes on the normalized path the rules matched. (An
//! axum `Router::layer` runs after routing: the router would have picked
//! its handler from the raw path, and `/admin/%2e%2e/public/x` would reach
//! an `/admin/{*rest}` handler judged as `/public/x`.) A handler behind a
//! token rule reads [`VerifiedClaims`]; one behind an `anyone` rule finds
//! [`Anyone`] instead.
//!
//! ```
//! use axum::{routing::get, Router};
//! use kms_access::AccessRules;
//! use kms_actor::{KmsHandle, TokenKeys};
//! use kms_core::KeyId;
//! use kms_http::{AccessLayer, AccessService, BearerLayer};
//! use kms_jose::Validation;
//! use tower::Layer;
//!
//! fn app(handle: &KmsHandle, key: &KeyId) -> Result<AccessService<Router>, kms_access::RulesError> {
//!     let rules = AccessRules::from_toml(r#"
//!         [[rule]]
//!         path = "/health"
//!         allow = "anyone"
//!         [[rule]]
//!         path = "/orders/"
//!         scopes = ["orders:read"]
//!     "#)?;
//!     let bearer = BearerLayer::new(handle.client(), TokenKeys::of(key), Validation::default());
//!     let access = AccessLayer::new(rules, bearer);
//!     let router = Router::new()
//!         .route("/health", get(|| async { "ok" }))
//!         .route("/orders/{id}", get(|| async { "an order" }));
//!     // Around the router, not `router.layer(access)`. Keep a clone of
//!     // `access` to replace the rules later.
//!     Ok(access.layer(router))
//! }
//!
//! async fn serve(app: AccessService<Router>, listener: tokio::net::TcpListener) -> std::io::Result<()> {
//!     let app = axum::ServiceExt::<axum::extract::Request>::into_make_service(app);
//!     axum::serve(listener, app).await
//! }
//! ```

use std::sync::{Arc, PoisonError, RwLock};

use http::header::WWW_AUTHENTICATE;
use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri};
use kms_access::{normalize, Access, AccessRules, Decision, NormalPath, Requirement};
use tower::Layer;

use crate::authorize::{Authorize, Authorized};
use crate::bearer::{BearerLayer, VerifiedClaims};
use crate::error_body::{error_body, json_response, ErrorCode};
use crate::record::AccessRule;
use crate::resource_metadata::ResourceMetadata;

/// In the extensions of a request an `anyone` rule let in: no token was
/// looked at, and there are no [`VerifiedClaims`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Anyone;

/// `X-Original-URI` (NGINX's `auth_request` configurations pass it).
const X_ORIGINAL_URI: HeaderName = HeaderName::from_static("x-original-uri");
/// `X-Forwarded-Uri` (Traefik's `ForwardAuth`, Caddy's `forward_auth`).
const X_FORWARDED_URI: HeaderName = HeaderName::from_static("x-forwarded-uri");
/// `X-Original-Method` (NGINX).
const X_ORIGINAL_METHOD: HeaderName = HeaderName::from_static("x-original-method");
/// `X-Forwarded-Method` (Traefik, Caddy).
const X_FORWARDED_METHOD: HeaderName = HeaderName::from_static("x-forwarded-method");

/// The access rules in front of a service (module docs); clone it freely.
#[derive(Clone, Debug)]
pub struct AccessLayer {
    /// Behind one `Arc`: a request costs one reference count.
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The rules in force, shared with every layer made from this one.
    rules: Arc<RwLock<Arc<AccessRules>>>,
    bearer: BearerLayer,
    /// `None`: the request is judged on its own path and method; else
    /// the forward-auth route whose checks judge the original request.
    forward_auth: Option<Box<str>>,
}

impl AccessLayer {
    /// The rules in front of a service that serves what a request asks
    /// for (a proxy, an app's routes): each request judged on its own
    /// path and method, the tokens verified by `bearer`.
    pub fn new(rules: AccessRules, bearer: BearerLayer) -> Self {
        AccessLayer {
            shared: Arc::new(Shared {
                rules: Arc::new(RwLock::new(Arc::new(rules))),
                bearer,
                forward_auth: None,
            }),
        }
    }

    /// A layer with the same rules (replaced together) for the forward-auth
    /// checks at `route` and under it (`/auth`): each check judges the
    /// original request (module docs).
    #[must_use]
    pub fn for_forward_auth(&self, route: &str) -> Self {
        AccessLayer {
            shared: Arc::new(Shared {
                rules: Arc::clone(&self.shared.rules),
                bearer: self.shared.bearer.clone(),
                forward_auth: Some(Box::from(route.trim_end_matches('/'))),
            }),
        }
    }

    /// Replaces the rules of this layer and of every layer sharing them;
    /// requests already being judged finish under the old ones.
    pub fn replace_rules(&self, rules: AccessRules) {
        // A poisoned lock held an `Arc` swap that cannot have half
        // happened: the value inside is whole.
        *self
            .shared
            .rules
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(rules);
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<AccessRules> {
        Arc::clone(
            &self
                .shared
                .rules
                .read()
                .unwrap_or_else(PoisonError::into_inner),
        )
    }

    /// `metadata`'s route ([`ResourceMetadata::router`]), its
    /// `scopes_supported` every scope these rules ask for, from the rules
    /// in force at each request.
    pub fn metadata_router(&self, metadata: &ResourceMetadata) -> axum::Router {
        let layer = self.clone();
        metadata.router_with(move || {
            let rules = layer.rules();
            Some(
                rules
                    .scopes_supported()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
            )
        })
    }
}

impl<S> Layer<S> for AccessLayer {
    type Service = AccessService<S>;

    fn layer(&self, inner: S) -> AccessService<S> {
        Authorized::new(inner, self.clone())
    }
}

/// The service [`AccessLayer`] makes.
pub type AccessService<S> = Authorized<S, AccessLayer>;

impl Authorize for AccessLayer {
    /// The rules' decision for `request` (module docs), with the bearer
    /// layer's verification and the rule's requirements for a token rule.
    ///
    /// # Errors
    /// The refusal to answer with: 400 or 403 for a refused path or
    /// method, 403 `access_denied`, the bearer layer's refusals, 403
    /// `insufficient_scope`.
    async fn authorize<B: Send, R: From<String>>(
        &self,
        request: &mut Request<B>,
    ) -> Result<(), Response<R>> {
        let rules = self.rules();
        let decision = match &self.shared.forward_auth {
            None => own(request, &rules)?,
            Some(route) => original(request, route, &rules)?,
        };
        request.extensions_mut().insert(AccessRule(decision.rule));
        match decision.access {
            Access::Deny => Err(error_body(
                StatusCode::FORBIDDEN,
                "access_denied",
                "no access rule lets this request in",
            )),
            Access::Anyone => {
                request.extensions_mut().insert(Anyone);
                Ok(())
            }
            Access::Token(requirements) => {
                self.shared.bearer.authorize(request).await?;
                let met = match request.extensions().get::<VerifiedClaims>() {
                    Some(VerifiedClaims(claims)) => requirements.check(claims),
                    // The bearer layer sets them whenever it passes a
                    // request.
                    None => Err(Requirement::Claim),
                };
                met.map_err(|unmet| insufficient(unmet, requirements.scopes()))
            }
        }
    }
}

/// The decision for a request judged on its own path and method; the
/// request goes on with the normalized path.
fn own<'r, B, R: From<String>>(
    request: &mut Request<B>,
    rules: &'r AccessRules,
) -> Result<Decision<'r>, Response<R>> {
    let path = normalize(request.uri().path()).map_err(|e| {
        error_body(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            &format!("the request's path is refused: {e}"),
        )
    })?;
    if has_lowercase(request.method()) {
        return Err(error_body(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the method is not upper case",
        ));
    }
    let decision = rules.decide(&path, request.method());
    if path.changed() {
        let target = match request.uri().query() {
            Some(query) => format!("{path}?{query}"),
            None => path.to_string(),
        };
        let mut parts = request.uri().clone().into_parts();
        parts.path_and_query = PathAndQuery::try_from(target).ok();
        *request.uri_mut() = Uri::from_parts(parts).map_err(|_| {
            error_body(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the request's normalized path is not a request target",
            )
        })?;
    }
    Ok(decision)
}

/// The decision for the original request of a forward-auth check at
/// `route` (module docs).
fn original<'r, B, R: From<String>>(
    request: &Request<B>,
    route: &str,
    rules: &'r AccessRules,
) -> Result<Decision<'r>, Response<R>> {
    let forbidden = |message: &str| error_body(StatusCode::FORBIDDEN, "invalid_request", message);
    let headers = request.headers();
    let uri_header = |name: &HeaderName| -> Result<Option<&str>, Response<R>> {
        match one(headers, name) {
            Err(()) => Err(forbidden(
                "a header naming the original request is repeated or not text",
            )),
            Ok(None) => Ok(None),
            Ok(Some(uri)) => {
                let path = uri.split_once('?').map_or(uri, |(path, _)| path);
                if path.starts_with('/') {
                    Ok(Some(path))
                } else {
                    Err(forbidden("the original URI does not start with /"))
                }
            }
        }
    };
    let own_path = request.uri().path();
    let under_route = own_path
        .strip_prefix(route)
        .and_then(|rest| rest.strip_prefix('/'))
        .filter(|rest| !rest.is_empty());
    let sources = [
        uri_header(&X_ORIGINAL_URI)?.map(str::to_owned),
        uri_header(&X_FORWARDED_URI)?.map(str::to_owned),
        under_route.map(|rest| format!("/{rest}")),
    ];
    let mut judged: Option<NormalPath<'_>> = None;
    for source in sources.iter().flatten() {
        let normal = normalize(source)
            .map_err(|e| forbidden(&format!("the original path is refused: {e}")))?;
        // The proxy passes the request's own path on: one that holds
        // dot-segments or repeated slashes reaches the service
        // unresolved, where it may name another path than this one.
        if normal.restructured() {
            return Err(forbidden(
                "the original path holds dot-segments or repeated slashes",
            ));
        }
        match &judged {
            None => judged = Some(normal),
            Some(first) if first.as_str() == normal.as_str() => {}
            Some(_) => return Err(forbidden("the sources of the original path disagree")),
        }
    }
    let method_header = |name: &HeaderName| -> Result<Option<Method>, Response<R>> {
        match one(headers, name) {
            Err(()) => Err(forbidden(
                "a header naming the original request is repeated or not text",
            )),
            Ok(None) => Ok(None),
            Ok(Some(text)) => Method::from_bytes(text.as_bytes())
                .map(Some)
                .map_err(|_| forbidden("the original method is not a method")),
        }
    };
    let method = match (
        method_header(&X_ORIGINAL_METHOD)?,
        method_header(&X_FORWARDED_METHOD)?,
    ) {
        (Some(a), Some(b)) if a != b => {
            return Err(forbidden("the original method headers disagree"))
        }
        // NGINX's check is always a GET, and NGINX passes the client's
        // own headers on (an `X-Forwarded-Method` among them): with its
        // URI header, the method must come in its own.
        (None, _) if headers.contains_key(X_ORIGINAL_URI) => {
            return Err(forbidden("X-Original-URI came without X-Original-Method"))
        }
        (Some(method), _) | (None, Some(method)) => method,
        (None, None) => request.method().clone(),
    };
    if has_lowercase(&method) {
        return Err(forbidden("the original method is not upper case"));
    }
    let judged = judged.unwrap_or_else(NormalPath::root);
    Ok(rules.decide(&judged, &method))
}

/// Whether `method` holds a lower-case letter: `post` is not `POST` to
/// the rules, but servers that upper-case it (Django, Werkzeug) serve it
/// as `POST`, so it is refused before any rule.
fn has_lowercase(method: &Method) -> bool {
    method.as_str().bytes().any(|b| b.is_ascii_lowercase())
}

/// The one value of `name`, as text.
///
/// # Errors
/// More than one value, or one that is not visible ASCII.
fn one<'h>(headers: &'h HeaderMap, name: &HeaderName) -> Result<Option<&'h str>, ()> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(());
    }
    value.to_str().map(Some).map_err(|_| ())
}

/// The 403 of a verified token that misses `unmet` (module docs).
fn insufficient<R: From<String>>(unmet: Requirement, scopes: &[String]) -> Response<R> {
    let body = serde_json::json!({"error": "insufficient_scope", "requirement": unmet.as_str()})
        .to_string();
    let mut response = json_response(StatusCode::FORBIDDEN, body);
    response
        .extensions_mut()
        .insert(ErrorCode("insufficient_scope"));
    let challenge = if unmet == Requirement::Scope {
        // Scopes hold no `"` or `\` (the rules file refuses them).
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\"",
            scopes.join(" ")
        )
    } else {
        "Bearer error=\"insufficient_scope\"".to_owned()
    };
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}
