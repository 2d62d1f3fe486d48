//! [`ResourceMetadata`]: OAuth 2.0 Protected Resource Metadata (RFC 9728)
//! for the resource a bearer layer guards, and the `resource_metadata`
//! parameter of its 401 challenges (RFC 9728 §5.1), by which clients
//! (MCP clients among them) find where to get a token.
//!
//! The document is served at the well-known URL RFC 9728 §3.1 derives
//! from the resource: `/.well-known/oauth-protected-resource`, followed
//! by the resource's path when it has one (a terminating `/` removed), on
//! the resource's own host. It holds `resource` exactly as given (§3.3
//! asks a client to compare it with the identifier it started from),
//! `authorization_servers`, `bearer_methods_supported` (`["header"]`) and,
//! with access rules (`AccessLayer::metadata_router`), `scopes_supported`:
//! every scope a rule asks for, from the rules in force when the document
//! is asked for.

use std::sync::Arc;

use axum::http::{StatusCode, Uri};
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use crate::error_body::json_response;

/// The well-known path segment of RFC 9728 §3.
const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// A protected resource's metadata (module docs); clone it freely.
#[derive(Debug, Clone)]
pub struct ResourceMetadata {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The resource identifier, as given.
    resource: String,
    authorization_servers: Vec<String>,
    /// Where the document is served on the resource's host.
    path: String,
    /// The document's absolute URL.
    url: String,
}

/// Why a resource or an authorization server cannot be used (RFC 9728 §2
/// and §1.2: an `https` URL with no query or fragment; `http` only to a
/// loopback host, for tests and local development; a path of plain
/// characters, since it becomes a route and a quoted challenge
/// parameter).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} {url:?}: {reason}")]
pub struct InvalidResource {
    /// `resource` or `authorization server`.
    pub what: &'static str,
    /// The URL as given.
    pub url: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl ResourceMetadata {
    /// The metadata of `resource`, whose tokens come from
    /// `authorization_servers` (at least one).
    ///
    /// # Errors
    /// [`InvalidResource`]: a URL that is not `https` (or `http` to
    /// `localhost`, `127.0.0.1` or `[::1]`), has a query or a fragment,
    /// or no host; no authorization server.
    pub fn new(
        resource: &str,
        authorization_servers: Vec<String>,
    ) -> Result<ResourceMetadata, InvalidResource> {
        let uri = check_url("resource", resource)?;
        for server in &authorization_servers {
            check_url("authorization server", server)?;
        }
        if authorization_servers.is_empty() {
            return Err(InvalidResource {
                what: "resource",
                url: resource.to_owned(),
                reason: "names no authorization server",
            });
        }
        let own_path = uri.path().trim_end_matches('/');
        let path = format!("{WELL_KNOWN}{own_path}");
        let (scheme, authority) = (
            uri.scheme_str().unwrap_or("https"),
            uri.authority().map_or("", |a| a.as_str()),
        );
        let url = format!("{scheme}://{authority}{path}");
        Ok(ResourceMetadata {
            inner: Arc::new(Inner {
                resource: resource.to_owned(),
                authorization_servers,
                path,
                url,
            }),
        })
    }

    /// Where the document is served on the resource's host: the
    /// well-known path and the resource's path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The document's absolute URL, as 401 challenges carry it.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// `GET` [`ResourceMetadata::path`]: the document as JSON, without
    /// `scopes_supported` (with access rules:
    /// [`AccessLayer::metadata_router`](crate::AccessLayer::metadata_router)).
    pub fn router(&self) -> Router {
        self.router_with(|| None)
    }

    /// The document's route, `scopes_supported` from `scopes` when it
    /// gives them (asked at every request).
    pub(crate) fn router_with(
        &self,
        scopes: impl Fn() -> Option<Vec<String>> + Clone + Send + Sync + 'static,
    ) -> Router {
        let metadata = self.clone();
        Router::new().route(
            self.path(),
            get(move || {
                let document = metadata.document(scopes());
                async move { document }
            }),
        )
    }

    fn document(&self, scopes: Option<Vec<String>>) -> Response {
        let mut document = serde_json::json!({
            "resource": self.inner.resource,
            "authorization_servers": self.inner.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if let Some(scopes) = scopes {
            document["scopes_supported"] = serde_json::json!(scopes);
        }
        json_response(StatusCode::OK, document.to_string())
    }
}

/// The URL `text`, checked (the module's [`InvalidResource`] rules).
fn check_url(what: &'static str, text: &str) -> Result<Uri, InvalidResource> {
    let refuse = |reason| InvalidResource {
        what,
        url: text.to_owned(),
        reason,
    };
    let uri: Uri = text.parse().map_err(|_| refuse("is not a URL"))?;
    let host = uri.host().ok_or_else(|| refuse("has no host"))?;
    let loopback = matches!(host, "localhost" | "127.0.0.1" | "[::1]");
    match uri.scheme_str() {
        Some("https") => {}
        Some("http") if loopback => {}
        _ => return Err(refuse("must be https (or http to a loopback host)")),
    }
    if uri.query().is_some() || text.contains('#') {
        return Err(refuse("must have no query or fragment"));
    }
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(refuse("must hold no user information"));
    }
    if !kms_access::is_plain_path(uri.path()) {
        return Err(refuse(
            "must have a path of letters, digits, / and -._~!$&'()*+,;=:@ only",
        ));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers() -> Vec<String> {
        vec!["https://idp.example.com".to_owned()]
    }

    #[test]
    fn the_well_known_url_follows_rfc_9728_section_3_1() {
        for (resource, path, url) in [
            (
                "https://api.example.com",
                "/.well-known/oauth-protected-resource",
                "https://api.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://api.example.com/",
                "/.well-known/oauth-protected-resource",
                "https://api.example.com/.well-known/oauth-protected-resource",
            ),
            (
                "https://api.example.com:8443/v1/orders/",
                "/.well-known/oauth-protected-resource/v1/orders",
                "https://api.example.com:8443/.well-known/oauth-protected-resource/v1/orders",
            ),
            (
                "http://127.0.0.1:8080/mcp",
                "/.well-known/oauth-protected-resource/mcp",
                "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
            ),
        ] {
            let metadata = ResourceMetadata::new(resource, servers()).unwrap();
            assert_eq!((metadata.path(), metadata.url()), (path, url), "{resource}");
        }
    }

    #[test]
    fn only_https_urls_without_query_or_fragment() {
        for bad in [
            "http://api.example.com",
            "https://api.example.com/?x=1",
            "https://api.example.com/#f",
            "https://user@api.example.com",
            "/relative",
            "api.example.com",
            "https://api.example.com/{id}",
            "https://api.example.com/a\"b",
            "https://api.example.com/%7Bid%7D",
        ] {
            assert!(ResourceMetadata::new(bad, servers()).is_err(), "{bad}");
        }
        assert!(ResourceMetadata::new("https://api.example.com", Vec::new()).is_err());
        let bad_server = vec!["http://idp.example.com".to_owned()];
        assert!(ResourceMetadata::new("https://api.example.com", bad_server).is_err());
    }
}
