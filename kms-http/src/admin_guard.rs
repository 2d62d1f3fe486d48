//! What a request to the admin face must be before its secret is even
//! read: not sent by a web page, and addressed to the face itself.
//!
//! A page in a browser on the operator's host can send requests to a
//! loopback admin face: a plain HTML form (no CORS preflight), a `no-cors`
//! fetch, or, through DNS rebinding, a same-origin fetch under a name the
//! attacker controls that resolves to 127.0.0.1. Browsers mark the first
//! two with `Origin` (every cross-origin POST and every CORS request) or
//! `Sec-Fetch-Site`; the third arrives with the attacker's name in `Host`.
//! An operator's client (curl, a script, Prometheus) sends neither header
//! and the face's own address as `Host`. So:
//!
//! * a request with an `Origin` header, or with `Sec-Fetch-Site` other than
//!   `none` (a navigation the user typed), is 403 `admin.cross_origin`
//!   (Fetch Metadata, W3C "Fetch Metadata Request Headers" §2.4);
//! * when [`AdminConfig::allowed_hosts`](crate::AdminConfig::allowed_hosts)
//!   is not empty, a request whose `Host` (RFC 9110 §7.2; for HTTP/2 the
//!   `:authority`) is none of them, or that has none, is 403
//!   `admin.forbidden_host`.
//!
//! Invariant: `allowed_hosts` is stored lowercased, so a comparison is
//! one ASCII-lowercase of the request's value (host names are
//! case-insensitive, RFC 3986 §3.2.2).

use axum::extract::Request;
use axum::http::{header, HeaderName, StatusCode};
use axum::response::Response;

use crate::error_body::error_response;

/// `Sec-Fetch-Site` (not among `http`'s constants).
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// The `Host` values a face answers, lowercased.
#[derive(Debug, Clone, Default)]
pub(crate) struct AllowedHosts(Vec<String>);

impl AllowedHosts {
    pub(crate) fn new(hosts: &[String]) -> Self {
        AllowedHosts(hosts.iter().map(|h| h.to_ascii_lowercase()).collect())
    }

    /// The refusal for `request`, or `None` when it may go on to the
    /// secret check.
    pub(crate) fn refusal(&self, request: &Request) -> Option<Response> {
        let headers = request.headers();
        let from_a_page = headers.contains_key(header::ORIGIN)
            || headers
                .get(SEC_FETCH_SITE)
                .is_some_and(|site| site.as_bytes() != b"none");
        if from_a_page {
            return Some(error_response(
                StatusCode::FORBIDDEN,
                "admin.cross_origin",
                "the admin face does not answer requests from web pages",
            ));
        }
        if self.0.is_empty() {
            return None;
        }
        let host = match headers.get(header::HOST) {
            Some(host) => host.to_str().ok(),
            None => request.uri().authority().map(|a| a.as_str()),
        };
        let allowed = host.is_some_and(|host| self.0.iter().any(|a| a.eq_ignore_ascii_case(host)));
        if allowed {
            None
        } else {
            Some(error_response(
                StatusCode::FORBIDDEN,
                "admin.forbidden_host",
                "the Host header does not name this admin face",
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn request(headers: &[(&str, &str)]) -> Request {
        let mut builder = Request::post("/keys/rotate");
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.body(Body::empty()).unwrap()
    }

    fn code(response: Option<Response>) -> Option<StatusCode> {
        response.map(|r| r.status())
    }

    #[test]
    fn pages_are_refused_and_only_the_faces_own_hosts_pass() {
        let hosts = AllowedHosts::new(&["127.0.0.1:8081".into(), "Admin.Example:8081".into()]);
        assert_eq!(
            code(hosts.refusal(&request(&[("host", "127.0.0.1:8081")]))),
            None
        );
        assert_eq!(
            code(hosts.refusal(&request(&[("host", "admin.EXAMPLE:8081")]))),
            None
        );
        let forbidden = Some(StatusCode::FORBIDDEN);
        for headers in [
            // DNS rebinding: the attacker's name, the right address.
            &[("host", "rebind.attacker.example:8081")][..],
            &[("host", "127.0.0.1:9999")],
            &[],
            &[("host", "127.0.0.1:8081"), ("origin", "null")],
            &[
                ("host", "127.0.0.1:8081"),
                ("origin", "http://127.0.0.1:8081"),
            ],
            &[("host", "127.0.0.1:8081"), ("sec-fetch-site", "cross-site")],
            &[("host", "127.0.0.1:8081"), ("sec-fetch-site", "same-site")],
        ] {
            assert_eq!(
                code(hosts.refusal(&request(headers))),
                forbidden,
                "{headers:?}"
            );
        }
        // A navigation the user typed.
        let typed = request(&[("host", "127.0.0.1:8081"), ("sec-fetch-site", "none")]);
        assert_eq!(code(hosts.refusal(&typed)), None);
        // No hosts configured: any Host, but never a page.
        let any = AllowedHosts::new(&[]);
        assert_eq!(code(any.refusal(&request(&[("host", "x")]))), None);
        assert_eq!(
            code(any.refusal(&request(&[("origin", "null")]))),
            forbidden
        );
    }
}
