//! The proxy mode (`serve --upstream URL`): every request that is not one
//! of the public face's own routes passes the bearer layer and goes to the
//! upstream, path and query byte for byte, over HTTP/1.1 keep-alive
//! (hyper-util's pooled client), bodies streamed both ways (never
//! buffered whole).
//!
//! What the upstream receives (the invariants):
//! * the `--claim-header` headers from the verified claims, and none of
//!   the client's own copies (a claim that cannot be a header value
//!   refuses the request with the bearer layer's 401, as forward auth
//!   does); on a path an access rule opens to anyone, no claim headers
//!   (and still none of the client's copies);
//! * with `--access-rules`, the path normalized as the rules matched it
//!   (`kms::access::normalize`), the query unchanged;
//! * no hop-by-hop header (RFC 9110 §7.6.1: `Connection` and the headers
//!   it names, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`, and `Proxy-Authenticate` /
//!   `Proxy-Authorization`, which belong to a proxy's own hop);
//! * `X-Forwarded-For`, `X-Forwarded-Proto`, `X-Forwarded-Host` and
//!   `Forwarded` (RFC 7239) describing the client: from a peer outside
//!   every `--trusted-proxy` CIDR, the client's own values are replaced;
//!   from a trusted proxy, `X-Forwarded-For` and `Forwarded` are appended
//!   to and its `X-Forwarded-Proto` and `-Host` kept (they describe the
//!   original request), or set where it sent none;
//! * no client header whose name holds `_` (as NGINX drops them by
//!   default): CGI, WSGI and Rack servers read `X_Auth_Roles` as
//!   `X-Auth-Roles`, a claim header's spelling the gateway would not have
//!   removed;
//! * from a peer outside every `--trusted-proxy` CIDR, no `X-Real-IP` and
//!   no `X-Forwarded-*` but the three the gateway sets;
//! * `Host` as the client sent it (as Caddy and Traefik do), or an
//!   absolute-form target's authority (RFC 9112 §3.2.2); a request with
//!   two `Host`s, or one that is not `host[:port]`, is 400
//!   `proxy.invalid_host`, never forwarded;
//! * `Authorization` as the client sent it, or none with
//!   `--strip-authorization`, which also removes the `--token-cookie`
//!   cookie (and only it) from `Cookie`.
//!
//! The answer: the upstream's, without its hop-by-hop headers; 502
//! `proxy.upstream_unavailable` when it cannot be reached or breaks the
//! exchange, 504 `proxy.upstream_timeout` when the connection is not made
//! within `--upstream-connect-timeout`, when the upstream takes no byte of
//! the request's body for `--idle-timeout`, or when its response headers
//! come later than `--upstream-timeout` after the request's body was sent
//! whole. Both bodies stream; either one that stalls for longer than
//! `--idle-timeout` between two chunks ends the exchange (`idle_body.rs`).
//! CONNECT and TRACE are 405, never forwarded.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::http::uri::{Authority, PathAndQuery, Scheme, Uri};
use axum::http::StatusCode;
use axum::response::Response;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use ipnet::{IpNet, Ipv4Net};
use kms::http::{error_response, remove_cookie, Anyone, ClientAddress, VerifiedClaims};
use tokio::sync::oneshot;

use super::claim_headers::{refuse_unwritable, ClaimHeaders, FORWARDING};
use super::idle_body::IdleBody;
use crate::config::{ProxySettings, Upstream};

/// How long an idle pooled connection to the upstream is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// TCP keep-alive on connections to the upstream: the idle time before
/// the first probe.
const TCP_KEEPALIVE: Duration = Duration::from_secs(60);

/// Parses `--upstream URL` (clap's value parser: an error is a usage
/// error, exit 2): `http://HOST[:PORT]` with no path but `/`, no query,
/// no user information.
///
/// # Errors
/// Another scheme (`https` included: TLS to the upstream is not built),
/// a path, a query or user information.
pub(crate) fn upstream(text: &str) -> Result<Authority, String> {
    let uri: Uri = text.parse().map_err(|e| format!("{e}"))?;
    if uri.scheme() != Some(&Scheme::HTTP) {
        return Err("must be http://HOST[:PORT] (TLS to the upstream is not supported)".to_owned());
    }
    let authority = uri
        .authority()
        .ok_or_else(|| "must name a host".to_owned())?;
    if authority.as_str().contains('@') {
        return Err("must not hold user information".to_owned());
    }
    if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
        return Err(
            "must have no path or query: requests keep their own, byte for byte".to_owned(),
        );
    }
    Ok(authority.clone())
}

/// Parses a `--trusted-proxy` value: a CIDR (`10.0.0.0/8`, `fd00::/8`)
/// or a single address.
///
/// # Errors
/// Neither.
pub(crate) fn cidr(text: &str) -> Result<IpNet, String> {
    let net = text
        .parse::<IpNet>()
        .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
        .map_err(|_| "expected a CIDR (10.0.0.0/8, fd00::/8) or an address".to_owned())?;
    // Peers are compared in their canonical form (an IPv4-mapped IPv6
    // address as IPv4): so is an IPv4-mapped network.
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .map_err(|e| e.to_string()),
            None => Ok(net),
        },
        _ => Ok(net),
    }
}

/// What the proxy needs, shared by every request.
#[derive(Debug)]
pub(crate) struct Proxy {
    client: Client<HttpConnector, Body>,
    /// `--upstream` and its settings.
    upstream: Upstream,
    /// `--idle-timeout`: the longest a body, either way, may stall.
    idle: Duration,
    claim_headers: Arc<ClaimHeaders>,
    /// `X-Forwarded-Proto`'s value: the public face's scheme.
    proto: &'static str,
    /// The KMS client's topic, for the refusal counter.
    topic: String,
    /// `--trusted-proxy`: whose forwarding headers are appended to.
    trusted_proxies: ClientAddress,
    /// `--token-cookie`: removed from `Cookie` with
    /// `--strip-authorization`.
    token_cookie: Option<String>,
    /// The protected-resource metadata's URL, for the challenge of a
    /// refusal.
    resource_metadata: Option<Arc<str>>,
}

impl Proxy {
    /// A proxy to `upstream`, with `settings`' trusted proxies, token
    /// cookie and resource metadata, whose bodies may stall for `idle`;
    /// `tls` says whether the public face is HTTPS (`X-Forwarded-Proto`).
    pub(crate) fn new(
        upstream: Upstream,
        settings: &ProxySettings,
        idle: Duration,
        claim_headers: Arc<ClaimHeaders>,
        tls: bool,
        topic: String,
    ) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(upstream.connect_timeout));
        // A dead upstream host is noticed on a pooled connection too.
        connector.set_keepalive(Some(TCP_KEEPALIVE));
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        Proxy {
            client,
            upstream,
            idle,
            claim_headers,
            proto: if tls { "https" } else { "http" },
            topic,
            trusted_proxies: settings.trusted_proxies.clone(),
            token_cookie: settings.token_cookie.clone(),
            resource_metadata: settings
                .resource_metadata
                .as_ref()
                .map(|metadata| Arc::from(metadata.url())),
        }
    }

    /// Forwards one request that passed the bearer layer (module docs).
    pub(crate) async fn forward(self: Arc<Self>, request: Request) -> Response {
        let (mut parts, body) = request.into_parts();
        // CONNECT would ask the upstream for a tunnel, TRACE echo the
        // request's headers (the claim headers included) back.
        // Compared without regard to case: servers that upper-case the
        // method would read `trace` as TRACE.
        let method = parts.method.as_str();
        if method.eq_ignore_ascii_case("CONNECT") || method.eq_ignore_ascii_case("TRACE") {
            return error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "proxy.method_not_allowed",
                "CONNECT and TRACE are not forwarded",
            );
        }
        let claims = match parts.extensions.remove::<VerifiedClaims>() {
            Some(VerifiedClaims(claims)) => Some(claims),
            // An access rule let anyone in: no token was looked at.
            None if parts.extensions.get::<Anyone>().is_some() => None,
            // Only behind the bearer or access layer, which set one.
            None => {
                return error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "http.internal",
                    "no verified claims",
                )
            }
        };
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(peer)| peer.ip().to_canonical());
        if let Err(why) = route_host(&parts.uri, &mut parts.headers) {
            return error_response(StatusCode::BAD_REQUEST, "proxy.invalid_host", why);
        }
        let headers = &mut parts.headers;
        remove_hop_by_hop(headers);
        remove_underscored(headers);
        match &claims {
            Some(claims) => {
                if let Err(unwritable) = self.claim_headers.write(claims, headers) {
                    return refuse_unwritable(
                        &self.topic,
                        &unwritable.claim,
                        self.resource_metadata.as_deref(),
                    );
                }
            }
            None => self.claim_headers.remove_from(headers),
        }
        if self.upstream.strip_authorization {
            headers.remove(header::AUTHORIZATION);
            if let Some(name) = &self.token_cookie {
                remove_cookie(headers, name);
            }
        }
        self.set_forwarded(headers, peer);
        let path = parts
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        let uri = Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.upstream.authority.clone())
            .path_and_query(path);
        parts.uri = match uri.build() {
            Ok(uri) => uri,
            Err(_) => {
                return error_response(
                    StatusCode::BAD_REQUEST,
                    "http.invalid_request",
                    "the request's target cannot be forwarded",
                )
            }
        };
        // HTTP/1.1 to the upstream, whatever the client spoke.
        parts.version = axum::http::Version::HTTP_11;
        let (sent, mut was_sent) = oneshot::channel();
        let body = IdleBody::new(body, self.idle, Some(sent));
        let taken = body.taken();
        let response = self
            .client
            .request(Request::from_parts(parts, Body::new(body)));
        // The upstream timeout runs from the end of the request's body
        // (an upload takes as long as it keeps moving: the idle timeout
        // bounds its stalls, the client's and the upstream's) to the
        // response's headers.
        let timeout = async {
            tokio::select! {
                _ = &mut was_sent => {}
                () = taken.stalled_for(self.idle) => return,
            }
            tokio::time::sleep(self.upstream.timeout).await;
        };
        let answered = tokio::select! {
            biased;
            answered = response => Ok(answered),
            () = timeout => Err(()),
        };
        match answered {
            Ok(Ok(response)) => {
                let (mut parts, body) = response.into_parts();
                remove_hop_by_hop(&mut parts.headers);
                Response::from_parts(parts, Body::new(IdleBody::new(body, self.idle, None)))
            }
            Ok(Err(e)) if timed_out(&e) => {
                tracing::warn!(error = %e, upstream = %self.upstream.authority, "upstream connect timed out");
                error_response(
                    StatusCode::GATEWAY_TIMEOUT,
                    "proxy.upstream_timeout",
                    "the upstream did not accept the connection within the connect timeout",
                )
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, upstream = %self.upstream.authority, "upstream failed");
                error_response(
                    StatusCode::BAD_GATEWAY,
                    "proxy.upstream_unavailable",
                    "the upstream cannot be reached or broke the exchange",
                )
            }
            Err(_) => {
                tracing::warn!(upstream = %self.upstream.authority, "upstream timed out");
                error_response(
                    StatusCode::GATEWAY_TIMEOUT,
                    "proxy.upstream_timeout",
                    "the upstream did not take the request or answer it in time",
                )
            }
        }
    }

    /// Sets the forwarding headers for a request from `peer` (module
    /// docs).
    fn set_forwarded(&self, headers: &mut HeaderMap, peer: Option<IpAddr>) {
        let trusted = peer.is_some_and(|ip| self.trusted_proxies.is_trusted(ip));
        let host = headers.get(header::HOST).cloned();
        let joined = |name: &HeaderName, headers: &HeaderMap| -> Option<String> {
            let values: Vec<&str> = headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .collect();
            (!values.is_empty()).then(|| values.join(", "))
        };
        let [forwarded, xff, xfp, xfh] = &FORWARDING;
        if !trusted {
            remove_untrusted_forwarding(headers);
        }
        let before = |name: &HeaderName| if trusted { joined(name, headers) } else { None };
        let (old_xff, old_forwarded) = (before(xff), before(forwarded));
        let keep_proto = trusted && headers.contains_key(xfp);
        let keep_host = trusted && headers.contains_key(xfh);
        let peer_text = peer.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
        let append = |old: Option<String>, new: String| match old {
            Some(old) => format!("{old}, {new}"),
            None => new,
        };
        set(headers, xff, append(old_xff, peer_text));
        if !keep_proto {
            headers.insert(xfp, HeaderValue::from_static(self.proto));
        }
        if !keep_host {
            match &host {
                Some(host) => headers.insert(xfh, host.clone()),
                None => headers.remove(xfh),
            };
        }
        // RFC 7239 §4: an IPv6 node in brackets and quoted; a host
        // quoted (it may hold `:`).
        let node = match peer {
            Some(IpAddr::V6(ip)) => format!("\"[{ip}]\""),
            Some(IpAddr::V4(ip)) => ip.to_string(),
            None => "unknown".to_owned(),
        };
        let mut element = format!("for={node};proto={}", self.proto);
        if let Some(host) = host.as_ref().and_then(|h| h.to_str().ok()) {
            let quoted = host.replace('\\', "\\\\").replace('"', "\\\"");
            element += &format!(";host=\"{quoted}\"");
        }
        set(headers, forwarded, append(old_forwarded, element));
    }
}

/// Whether the client's failure was the connect timeout: a connect error
/// whose sources hold an `io::Error` of kind `TimedOut` (hyper-util's
/// connector reports it so); a pooled connection that timed out later is
/// not one.
fn timed_out(e: &hyper_util::client::legacy::Error) -> bool {
    if !e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if inner
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        source = inner.source();
    }
    false
}

/// The `Host` the upstream gets (module docs): an absolute-form target's
/// authority replaces the client's `Host` (RFC 9112 §3.2.2).
///
/// # Errors
/// Two `Host`s, or a `Host` (or target authority) that is not
/// `host[:port]`: the reason, for the 400's message.
fn route_host(uri: &Uri, headers: &mut HeaderMap) -> Result<(), &'static str> {
    if headers.get_all(header::HOST).iter().nth(1).is_some() {
        return Err("the request has more than one Host");
    }
    if let Some(authority) = uri.authority() {
        if !is_host_port(authority.as_str()) {
            return Err("the request target's authority is not host[:port]");
        }
        let value = HeaderValue::from_str(authority.as_str())
            .map_err(|_| "the request target's authority is not host[:port]")?;
        headers.insert(header::HOST, value);
        return Ok(());
    }
    match headers.get(header::HOST) {
        Some(host) if !is_host_port(host.to_str().unwrap_or("")) => {
            Err("the request's Host is not host[:port]")
        }
        _ => Ok(()),
    }
}

/// Whether `text` is `host[:port]` (RFC 9110 §7.2, RFC 3986 §3.2.2): a
/// bracketed IPv6 address, or a name or IPv4 address of letters, digits,
/// `-`, `.`, `_` and `~`; then optionally `:` and a port of 1 to 5
/// digits at most 65535.
fn is_host_port(text: &str) -> bool {
    let (host_ok, port) = match text.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((ip, after)) => (ip.parse::<std::net::Ipv6Addr>().is_ok(), after),
            None => return false,
        },
        None => {
            let (host, port) = text.split_at(text.find(':').unwrap_or(text.len()));
            let name = |b: u8| b.is_ascii_alphanumeric() || b"-._~".contains(&b);
            (!host.is_empty() && host.bytes().all(name), port)
        }
    };
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(digits) => {
            (1..=5).contains(&digits.len())
                && digits.bytes().all(|b| b.is_ascii_digit())
                && digits.parse::<u32>().is_ok_and(|p| p <= 65_535)
        }
    };
    host_ok && port_ok
}

/// Removes every header whose name holds `_` (module docs).
fn remove_underscored(headers: &mut HeaderMap) {
    remove_named(headers, |name| name.contains('_'));
}

/// From a peer that is no trusted proxy: removes `X-Real-IP` and every
/// `X-Forwarded-*` but the [`FORWARDING`] ones, which are replaced.
fn remove_untrusted_forwarding(headers: &mut HeaderMap) {
    remove_named(headers, |name| {
        name == "x-real-ip"
            || (name.starts_with("x-forwarded-") && !FORWARDING.iter().any(|f| f.as_str() == name))
    });
}

/// Removes every header whose (lower-case) name `doomed` picks.
fn remove_named(headers: &mut HeaderMap, doomed: impl Fn(&str) -> bool) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|name| doomed(name.as_str()))
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

/// Replaces every value of `name` with `value` (`HeaderMap::insert`
/// drops them all; a text that cannot be a header value, which the texts
/// built here never are, removes the header).
fn set(headers: &mut HeaderMap, name: &HeaderName, value: String) {
    match HeaderValue::from_str(&value) {
        Ok(value) => headers.insert(name, value),
        Err(_) => headers.remove(name),
    };
}

/// The hop-by-hop headers of RFC 9110 §7.6.1 (and those proxies still
/// treat so), besides the ones `Connection` names.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes the hop-by-hop headers, the ones `Connection` names first (but
/// `Host` and the [`FORWARDING`] headers: the request's routing and the
/// forwarding chain, which the gateway itself answers for).
fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .filter(|name| *name != header::HOST && !FORWARDING.contains(name))
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upstream_is_a_plain_http_origin() {
        assert_eq!(upstream("http://127.0.0.1:9000").unwrap(), "127.0.0.1:9000");
        assert_eq!(upstream("http://app.internal/").unwrap(), "app.internal");
        for bad in [
            "https://app:443",
            "app:80",
            "http://app/base",
            "http://app/?q",
            "http://user:pw@app",
            "ftp://app",
            "",
        ] {
            assert!(upstream(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn trusted_proxies_are_cidrs_or_addresses() {
        assert!(cidr("10.0.0.0/8")
            .unwrap()
            .contains(&"10.2.3.4".parse::<IpAddr>().unwrap()));
        assert!(cidr("::1")
            .unwrap()
            .contains(&"::1".parse::<IpAddr>().unwrap()));
        assert!(cidr("10.0.0.0/33").is_err());
        let mapped = cidr("::ffff:10.0.0.0/104").unwrap();
        assert_eq!(mapped, cidr("10.0.0.0/8").unwrap());
        assert!(mapped.contains(&"10.1.2.3".parse::<IpAddr>().unwrap()));
        assert!(cidr("example.com").is_err());
    }

    #[test]
    fn a_host_is_a_name_or_address_and_an_optional_port() {
        for good in [
            "api.example",
            "api.example:8443",
            "10.0.0.1:80",
            "[::1]",
            "[::1]:8080",
            "a_b-c~d",
        ] {
            assert!(is_host_port(good), "{good:?}");
        }
        for bad in [
            "",
            ":80",
            "api.example:",
            "api.example:65536",
            "api.example:123456",
            "api.example:8o",
            "a b",
            "a\"b",
            "user@api.example",
            "[::1",
            "[nope]:80",
            "[::1]x",
            "api.example:80:81",
        ] {
            assert!(!is_host_port(bad), "{bad:?}");
        }
    }

    #[test]
    fn two_hosts_are_refused_and_an_absolute_target_names_the_host() {
        let mut headers = HeaderMap::new();
        headers.append(header::HOST, HeaderValue::from_static("a.example"));
        headers.append(header::HOST, HeaderValue::from_static("b.example"));
        assert!(route_host(&Uri::from_static("/x"), &mut headers).is_err());
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("b.example"));
        route_host(&Uri::from_static("http://a.example:81/x"), &mut headers).unwrap();
        assert_eq!(headers[header::HOST], "a.example:81");
        headers.insert(header::HOST, HeaderValue::from_static("a\"b"));
        assert!(route_host(&Uri::from_static("/x"), &mut headers).is_err());
    }

    #[test]
    fn underscored_and_untrusted_forwarding_headers_go() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("x_auth_roles", "admin"),
            ("x-auth-roles", "kept"),
            ("x-real-ip", "1.2.3.4"),
            ("x-forwarded-port", "443"),
            ("x-forwarded-prefix", "/admin"),
            ("x-forwarded-for", "1.2.3.4"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        remove_underscored(&mut headers);
        remove_untrusted_forwarding(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["x-auth-roles", "x-forwarded-for"]);
    }

    #[test]
    fn hop_by_hop_headers_and_those_connection_names_go() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            (
                "connection",
                "keep-alive, X-Secret-Hop, host, x-forwarded-for",
            ),
            ("host", "api.example"),
            ("x-forwarded-for", "10.0.0.1"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("proxy-authorization", "Basic x"),
            ("x-kept", "1"),
        ] {
            headers.append(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        remove_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 3, "{headers:?}");
        assert_eq!(headers["x-kept"], "1");
        // `Connection` cannot take the routing or the forwarding chain away.
        assert_eq!(headers["host"], "api.example");
        assert_eq!(headers["x-forwarded-for"], "10.0.0.1");
    }

    fn proxy(trusted: &[&str]) -> Proxy {
        let settings = ProxySettings {
            trusted_proxies: ClientAddress::new(trusted.iter().map(|t| cidr(t).unwrap()).collect()),
            ..ProxySettings::default()
        };
        Proxy::new(
            Upstream {
                authority: upstream("http://127.0.0.1:1").unwrap(),
                timeout: Duration::from_secs(1),
                connect_timeout: Duration::from_secs(1),
                strip_authorization: false,
            },
            &settings,
            Duration::from_secs(1),
            Arc::default(),
            false,
            "kms".to_owned(),
        )
    }

    fn client_headers() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("api.example:8443"));
        headers.insert("x-forwarded-for", HeaderValue::from_static("1.2.3.4"));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        headers.insert("x-forwarded-host", HeaderValue::from_static("evil.example"));
        headers.insert("forwarded", HeaderValue::from_static("for=1.2.3.4"));
        headers
    }

    #[tokio::test]
    async fn an_untrusted_clients_forwarding_headers_are_replaced() {
        let mut headers = client_headers();
        proxy(&["10.0.0.0/8"]).set_forwarded(&mut headers, Some("192.0.2.7".parse().unwrap()));
        assert_eq!(headers["x-forwarded-for"], "192.0.2.7");
        assert_eq!(headers["x-forwarded-proto"], "http");
        assert_eq!(headers["x-forwarded-host"], "api.example:8443");
        assert_eq!(
            headers["forwarded"],
            "for=192.0.2.7;proto=http;host=\"api.example:8443\""
        );
    }

    #[tokio::test]
    async fn a_trusted_proxys_forwarding_headers_are_appended_to() {
        let mut headers = client_headers();
        proxy(&["10.0.0.0/8", "::1"])
            .set_forwarded(&mut headers, Some("10.1.1.1".parse().unwrap()));
        assert_eq!(headers["x-forwarded-for"], "1.2.3.4, 10.1.1.1");
        assert_eq!(headers["x-forwarded-proto"], "https");
        assert_eq!(headers["x-forwarded-host"], "evil.example");
        assert_eq!(
            headers["forwarded"],
            "for=1.2.3.4, for=10.1.1.1;proto=http;host=\"api.example:8443\""
        );
        let mut headers = HeaderMap::new();
        proxy(&["::1"]).set_forwarded(&mut headers, Some("::1".parse().unwrap()));
        assert_eq!(headers["x-forwarded-for"], "::1");
        assert_eq!(headers["forwarded"], "for=\"[::1]\";proto=http");
        assert!(!headers.contains_key("x-forwarded-host"));
    }
}
