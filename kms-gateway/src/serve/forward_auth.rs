//! Forward authentication on the public face (`--forward-auth-path`,
//! default `/auth`): the route a reverse proxy asks before it forwards a
//! request (NGINX `auth_request`, Caddy `forward_auth`, Traefik
//! `ForwardAuth`, Envoy's HTTP `ext_authz`).
//!
//! The path and every path under it (Envoy's `ext_authz` appends the
//! original path to its prefix), with any method, sit behind the same
//! `BearerLayer` as `/whoami`, or with `--access-rules` behind
//! `kms::http::AccessLayer`, which judges the original request (its path
//! and method from the proxy's headers); past it, the answer is 200 with
//! no body and the chosen claims as headers (`claim_headers.rs`), none on
//! a path a rule opens to anyone. A claim that cannot
//! be a header value refuses the request with the layer's own 401
//! (`kms::http::invalid_token_response`), counted in
//! `kms_token_refusals_total{code="http.unwritable_claim"}`.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use kms::http::{error_response, Anyone, VerifiedClaims};

use super::claim_headers::{refuse_unwritable, ClaimHeaders};

/// The public face's own routes, which a forward-auth path may neither be
/// nor lie under or above.
const OWN_ROUTES: [&str; 5] = [
    "/healthz",
    "/livez",
    "/readyz",
    "/whoami",
    kms::http::JWKS_PATH,
];

/// Checks a `--forward-auth-path` (clap's value parser: an error is a
/// usage error, exit 2): `/` then one or more segments of visible ASCII
/// without `?`, `#`, `{`, `}` or `*`, no empty segment, no trailing `/`,
/// and not one of the face's own routes nor a prefix of one or under one.
///
/// # Errors
/// Which of these the text breaks.
pub(crate) fn path(text: &str) -> Result<String, String> {
    let Some(rest) = text.strip_prefix('/') else {
        return Err("must start with /".to_owned());
    };
    if rest.is_empty() || rest.split('/').any(str::is_empty) {
        return Err("must be /SEGMENT[/SEGMENT...], no empty segment or trailing /".to_owned());
    }
    if !text
        .bytes()
        .all(|b| b.is_ascii_graphic() && !b"?#{}*%".contains(&b))
    {
        return Err("may hold visible ASCII but ? # { } * %".to_owned());
    }
    if let Some(own) = OWN_ROUTES.iter().find(|own| overlaps(own, text)) {
        return Err(format!("overlaps the public face's own route {own}"));
    }
    Ok(text.to_owned())
}

/// Whether routes `a` and `b` are one, or one lies under the other.
pub(crate) fn overlaps(a: &str, b: &str) -> bool {
    let under = |outer: &str, inner: &str| {
        inner == outer
            || inner
                .strip_prefix(outer)
                .is_some_and(|r| r.starts_with('/'))
    };
    under(a, b) || under(b, a)
}

/// The forward-auth routes at `path` and under it, for any method; to be
/// put behind the bearer layer, which sets [`VerifiedClaims`].
pub(crate) fn routes(
    path: &str,
    headers: Arc<ClaimHeaders>,
    topic: String,
    resource_metadata: Option<Arc<str>>,
) -> Router {
    let answer = Arc::new(Answer {
        headers,
        topic,
        resource_metadata,
    });
    // One reference count per request.
    let handler = move |request: Request| Arc::clone(&answer).answer(request);
    Router::new()
        .route(path, any(handler.clone()))
        .route(&format!("{path}/"), any(handler.clone()))
        .route(&format!("{path}/{{*rest}}"), any(handler))
        // Every answer depends on the request's token.
        .layer(axum::middleware::map_response(|r: Response| async {
            super::listener::no_store(r)
        }))
}

/// What every forward-auth answer needs.
struct Answer {
    headers: Arc<ClaimHeaders>,
    /// The KMS client's topic, for the refusal counter.
    topic: String,
    /// The protected-resource metadata's URL, for the refusal's
    /// challenge.
    resource_metadata: Option<Arc<str>>,
}

impl Answer {
    /// 200 with no body and the claim headers, or the bearer layer's 401.
    async fn answer(self: Arc<Self>, mut request: Request) -> Response {
        let mut response = StatusCode::OK.into_response();
        match request.extensions_mut().remove::<VerifiedClaims>() {
            Some(VerifiedClaims(claims)) => {
                match self.headers.write(&claims, response.headers_mut()) {
                    Ok(()) => response,
                    Err(unwritable) => refuse_unwritable(
                        &self.topic,
                        &unwritable.claim,
                        self.resource_metadata.as_deref(),
                    ),
                }
            }
            // An access rule let anyone in: 200 with no claim headers.
            None if request.extensions().get::<Anyone>().is_some() => response,
            // Only behind the bearer or access layer, which set one.
            None => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "http.internal",
                "no verified claims",
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forward_auth_path_is_a_plain_path_apart_from_the_own_routes() {
        for ok in ["/auth", "/auth/v1", "/_gw/check", "/whoamI", "/auth.x"] {
            assert_eq!(path(ok).as_deref(), Ok(ok));
        }
        for bad in [
            "",
            "/",
            "auth",
            "/auth/",
            "//auth",
            "/a//b",
            "/{x}",
            "/a*",
            "/a?b",
            "/a b",
            "/a%20b",
            "/whoami",
            "/whoami/x",
            "/.well-known",
            "/.well-known/jwks.json",
            "/healthz",
            "/livez",
            "/readyz/x",
        ] {
            assert!(path(bad).is_err(), "{bad:?}");
        }
    }
}
