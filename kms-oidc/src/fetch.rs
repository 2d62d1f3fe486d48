//! [`Fetcher`]: one GET of a provider's document, bounded in time, size and
//! redirects, over `https` (or `http` to a loopback address, for tests and
//! local development); and what the answer says of its lifetime
//! (`Cache-Control: max-age`, RFC 9111 §5.2.2.1).
//!
//! Invariant: the fetches of an issuer whose own URL is not local never
//! reach this host. A URL a provider gives (its `jwks_uri`, a redirect)
//! may not name a local host ([`is_local`]: loopback or unspecified
//! addresses in any spelling, `localhost` and `*.localhost`), and every
//! name such an issuer's fetches resolve is resolved by [`RemoteOnly`],
//! which refuses loopback and unspecified addresses: the address
//! connected is checked, not the URL's text.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::CACHE_CONTROL;
use reqwest::{redirect, Url};

use crate::config::{FetchSettings, MAX_MAX_AGE, MAX_REDIRECTS, MIN_MAX_AGE};
use crate::error::{short, FetchError};

/// A document fetched whole, and the lifetime its answer gave it.
#[derive(Debug)]
pub(crate) struct Fetched {
    pub(crate) body: Vec<u8>,
    /// `Cache-Control: max-age`, if the answer had one (unbounded).
    pub(crate) max_age: Option<Duration>,
}

/// The HTTP client of every issuer's fetches.
#[derive(Debug, Clone)]
pub(crate) struct Fetcher {
    client: reqwest::Client,
    /// The same, resolving names by [`RemoteOnly`]: for the fetches of
    /// an issuer that is not local.
    remote: reqwest::Client,
    /// Whether [`Fetcher::get`] uses `remote`.
    remote_only: bool,
    max_bytes: usize,
}

/// Whether a URL may be fetched: `https`, or `http` to a loopback address
/// or `localhost`; no user or password in it.
///
/// # Errors
/// [`FetchError::Url`] saying why not.
pub fn check_url(text: &str) -> Result<Url, FetchError> {
    let refused = |reason| FetchError::Url {
        url: short(text),
        reason,
    };
    let url = Url::parse(text).map_err(|_| refused("not a URL"))?;
    allowed(&url).map_err(refused)?;
    Ok(url)
}

fn allowed(url: &Url) -> Result<(), &'static str> {
    if !url.username().is_empty() || url.password().is_some() {
        return Err("credentials in the URL");
    }
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        "http" => Err("http is allowed to a loopback address or localhost only; use https"),
        _ => Err("not https"),
    }
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// Whether `url`'s host is this host in any spelling: a loopback or
/// unspecified address (an IPv4-mapped IPv6 one included), `localhost` or
/// a name under `.localhost` (RFC 6761 §6.3).
pub(crate) fn is_local(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            name == "localhost" || name.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => is_local_ip(IpAddr::V4(ip)),
        Some(url::Host::Ipv6(ip)) => is_local_ip(IpAddr::V6(ip)),
        None => false,
    }
}

/// Whether a connection to `ip` reaches this host: a loopback or
/// unspecified address, also as an IPv4-mapped IPv6 address.
fn is_local_ip(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified()
}

/// Whether a URL a provider gave (a `jwks_uri`, a redirect's target) may
/// be fetched after `from`, the URL that gave it: an allowed URL, never
/// from `https` down to `http`, and never from a host that is not local to
/// one that is ([`is_local`]: a provider cannot aim the gateway's fetches
/// at its own host's services).
pub(crate) fn allowed_after(from: &Url, to: &Url) -> Result<(), &'static str> {
    allowed(to)?;
    if from.scheme() == "https" && to.scheme() != "https" {
        return Err("from https down to http");
    }
    if !is_local(from) && is_local(to) {
        return Err("from a remote host to a loopback one");
    }
    Ok(())
}

/// A resolver that never answers a loopback or unspecified address (see
/// the module's invariant): a name that resolves only to such addresses
/// is an error, and such addresses among others are dropped.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RemoteOnly;

impl reqwest::dns::Resolve for RemoteOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found = tokio::net::lookup_host((host.as_str(), 0)).await?;
            let remote = remote_addresses(found).map_err(|reason| format!("{host}: {reason}"))?;
            Ok(Box::new(remote.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The addresses among `found` that are not this host's.
///
/// # Errors
/// When none is left.
fn remote_addresses(
    found: impl Iterator<Item = SocketAddr>,
) -> Result<Vec<SocketAddr>, &'static str> {
    let remote: Vec<SocketAddr> = found.filter(|addr| !is_local_ip(addr.ip())).collect();
    if remote.is_empty() {
        return Err(
            "resolves to a loopback or unspecified address only, refused for a remote issuer",
        );
    }
    Ok(remote)
}

impl Fetcher {
    /// The client: rustls with aws-lc-rs, the platform's roots plus
    /// `settings.ca_pem`, `settings.fetch_timeout` per document, at most
    /// [`MAX_REDIRECTS`] redirects, each allowed after the URL before it
    /// (`allowed_after`).
    ///
    /// # Errors
    /// A message naming a CA file that is not PEM, or the client's own
    /// error (no platform roots, say).
    pub(crate) fn new(settings: &FetchSettings) -> Result<Self, String> {
        let mut roots = Vec::new();
        for pem in &settings.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| format!("a CA is not PEM: {e}"))?;
            if certs.is_empty() {
                return Err("a CA file holds no certificate".to_owned());
            }
            roots.extend(certs);
        }
        let policy = || {
            redirect::Policy::custom(|attempt| {
                let refused = match attempt.previous().last() {
                    _ if attempt.previous().len() > MAX_REDIRECTS => Some("too many redirects"),
                    Some(from) => allowed_after(from, attempt.url()).err(),
                    None => allowed(attempt.url()).err(),
                };
                match refused {
                    Some(reason) => attempt.error(reason),
                    None => attempt.follow(),
                }
            })
        };
        let builder = || {
            reqwest::Client::builder()
                .timeout(settings.fetch_timeout)
                .connect_timeout(settings.fetch_timeout)
                .redirect(policy())
                .user_agent(concat!("kms-oidc/", env!("CARGO_PKG_VERSION")))
                .tls_certs_merge(roots.clone())
        };
        let built = |e: reqwest::Error| format!("cannot build the HTTP client: {e}");
        let client = builder().build().map_err(built)?;
        let remote = builder()
            .dns_resolver(Arc::new(RemoteOnly))
            .build()
            .map_err(built)?;
        Ok(Fetcher {
            client,
            remote,
            remote_only: false,
            max_bytes: settings.max_document_bytes,
        })
    }

    /// This fetcher for the issuer whose discovery URL is `own`: for one
    /// that is not local ([`is_local`]), every name is resolved by
    /// [`RemoteOnly`].
    pub(crate) fn for_issuer(&self, own: &Url) -> Fetcher {
        Fetcher {
            remote_only: !is_local(own),
            ..self.clone()
        }
    }

    /// GETs `url` whole.
    ///
    /// # Errors
    /// [`FetchError::Timeout`], [`FetchError::Transport`] (redirects
    /// included), [`FetchError::Status`] for anything but 200,
    /// [`FetchError::TooLarge`].
    pub(crate) async fn get(&self, url: &Url) -> Result<Fetched, FetchError> {
        let text = url.as_str();
        let failed = |e: reqwest::Error| {
            if e.is_timeout() {
                FetchError::Timeout { url: short(text) }
            } else {
                FetchError::Transport {
                    url: short(text),
                    reason: error_chain(&e),
                }
            }
        };
        let client = if self.remote_only {
            &self.remote
        } else {
            &self.client
        };
        let mut response = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(failed)?;
        if response.status() != reqwest::StatusCode::OK {
            return Err(FetchError::Status {
                url: short(text),
                status: response.status().as_u16(),
            });
        }
        let too_large = || FetchError::TooLarge {
            url: short(text),
            max: self.max_bytes,
        };
        let declared = response.content_length().unwrap_or(0);
        if declared > self.max_bytes as u64 {
            return Err(too_large());
        }
        let max_age = response
            .headers()
            .get_all(CACHE_CONTROL)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .find_map(max_age);
        // Sized by what the answer declares (bounded above), grown up to
        // the limit only if it lied.
        let mut body = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > self.max_bytes {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched { body, max_age })
    }
}

/// The error and its sources, as one line.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The `max-age` (or `s-maxage`) of one `Cache-Control` value, in
/// seconds; `no-cache` and `no-store` read as 0 (RFC 9111 §5.2.2).
pub(crate) fn max_age(value: &str) -> Option<Duration> {
    let mut found = None;
    for directive in value.split(',') {
        let directive = directive.trim();
        let (name, arg) = match directive.split_once('=') {
            Some((name, arg)) => (name.trim(), Some(arg.trim().trim_matches('"'))),
            None => (directive, None),
        };
        if name.eq_ignore_ascii_case("no-cache") || name.eq_ignore_ascii_case("no-store") {
            return Some(Duration::ZERO);
        }
        if name.eq_ignore_ascii_case("max-age") || name.eq_ignore_ascii_case("s-maxage") {
            // RFC 9111 §1.2.2: a delta-seconds too large to represent is
            // the largest value.
            if let Some(arg) =
                arg.filter(|a| !a.is_empty() && a.bytes().all(|b| b.is_ascii_digit()))
            {
                found = Some(Duration::from_secs(arg.parse().unwrap_or(u64::MAX)));
            }
        }
    }
    found
}

/// A set's lifetime: its answer's `max-age` bounded to [`MIN_MAX_AGE`] ..
/// [`MAX_MAX_AGE`], else `default`.
pub(crate) fn lifetime(max_age: Option<Duration>, default: Duration) -> Duration {
    max_age.map_or(default, |age| age.clamp(MIN_MAX_AGE, MAX_MAX_AGE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_url_never_leads_to_this_host_in_any_spelling() {
        let remote = Url::parse("https://idp.example/").unwrap();
        for local in [
            "https://127.0.0.1/jwks",
            "https://127.1.2.3/jwks",
            "https://[::1]/jwks",
            "https://[::ffff:127.0.0.1]/jwks",
            "https://0.0.0.0/jwks",
            "https://[::]/jwks",
            "https://[::ffff:0.0.0.0]/jwks",
            "https://localhost/jwks",
            "https://keys.localhost/jwks",
            "https://KEYS.LOCALHOST./jwks",
        ] {
            let to = Url::parse(local).unwrap();
            assert!(is_local(&to), "{local}");
            assert!(allowed_after(&remote, &to).is_err(), "{local}");
        }
        let other = Url::parse("https://keys.idp.example/jwks").unwrap();
        assert!(allowed_after(&remote, &other).is_ok());
        // From a local issuer (tests, development), anything allowed.
        let local = Url::parse("http://127.0.0.1:8080/").unwrap();
        assert!(allowed_after(&local, &Url::parse("http://localhost:1/x").unwrap()).is_ok());
    }

    #[test]
    fn the_remote_only_resolver_drops_this_hosts_addresses() {
        let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
        let mixed = [
            addr("127.0.0.1:0"),
            addr("192.0.2.7:0"),
            addr("[::ffff:127.0.0.1]:0"),
            addr("0.0.0.0:0"),
            addr("[2001:db8::1]:0"),
        ];
        assert_eq!(
            remote_addresses(mixed.into_iter()).unwrap(),
            [addr("192.0.2.7:0"), addr("[2001:db8::1]:0")]
        );
        assert!(remote_addresses([addr("[::1]:0"), addr("[::]:0")].into_iter()).is_err());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_this_host_is_refused_for_a_remote_issuer() {
        use reqwest::dns::Resolve;
        // `localhost` resolves to loopback addresses only: whatever the
        // text, the answer is what is checked.
        let resolved = RemoteOnly.resolve("localhost".parse().unwrap()).await;
        let error = resolved.err().expect("refused").to_string();
        assert!(error.contains("loopback"), "{error}");
    }

    #[test]
    fn only_https_or_loopback_http_is_fetched() {
        for ok in [
            "https://idp.example/.well-known/openid-configuration",
            "http://127.0.0.1:8080/jwks",
            "http://[::1]/jwks",
            "http://localhost:1/x",
            "http://LOCALHOST/x",
        ] {
            assert!(check_url(ok).is_ok(), "{ok}");
        }
        for bad in [
            "http://idp.example/jwks",
            "http://10.0.0.1/jwks",
            "ftp://idp.example/x",
            "https://user:pw@idp.example/x",
            "not a url",
            "file:///etc/passwd",
            "http://localhost.evil.example/x",
        ] {
            assert!(
                matches!(check_url(bad), Err(FetchError::Url { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_provider_cannot_send_a_fetch_down_to_http_or_to_loopback() {
        let url = |text: &str| Url::parse(text).expect("url");
        let remote = url("https://idp.example/x");
        assert_eq!(
            allowed_after(&remote, &url("https://keys.example/jwks")),
            Ok(())
        );
        for refused in [
            "http://127.0.0.1:8081/metrics",
            "https://127.0.0.1:8081/keys",
            "https://localhost/keys",
            "http://idp.example/keys",
        ] {
            assert!(allowed_after(&remote, &url(refused)).is_err(), "{refused}");
        }
        // A loopback provider (tests, development) may stay on loopback.
        let local = url("http://127.0.0.1:9000/.well-known/openid-configuration");
        assert_eq!(
            allowed_after(&local, &url("http://127.0.0.1:9000/jwks")),
            Ok(())
        );
    }

    #[test]
    fn cache_control_gives_the_lifetime_within_bounds() {
        let s = Duration::from_secs;
        assert_eq!(max_age("public, max-age=120"), Some(s(120)));
        assert_eq!(max_age("max-age=\"300\", must-revalidate"), Some(s(300)));
        assert_eq!(max_age("Max-Age=7"), Some(s(7)));
        assert_eq!(max_age("s-maxage=50"), Some(s(50)));
        assert_eq!(max_age("no-cache"), Some(s(0)));
        assert_eq!(max_age("max-age=60, no-store"), Some(s(0)));
        assert_eq!(max_age("public"), None);
        assert_eq!(max_age("max-age=-1"), None);
        assert_eq!(max_age("max-age="), None);
        assert_eq!(
            max_age("max-age=99999999999999999999999"),
            Some(s(u64::MAX))
        );
        let default = s(600);
        assert_eq!(lifetime(None, default), default);
        assert_eq!(lifetime(Some(s(120)), default), s(120));
        assert_eq!(lifetime(Some(s(0)), default), MIN_MAX_AGE);
        assert_eq!(lifetime(Some(s(u64::MAX)), default), MAX_MAX_AGE);
    }
}
