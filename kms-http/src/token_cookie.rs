//! A bearer token carried in a cookie ([`crate::BearerLayer::with_token_cookie`]):
//! reading it from the `Cookie` header, the cross-site refusal that keeps
//! another site's form from riding it, and removing it from what a proxy
//! passes on ([`remove_cookie`]).
//!
//! The `Cookie` header is read as RFC 6265 §5.4 reads it: pairs
//! `name=value` separated by `;`, names and values trimmed of spaces and
//! tabs, a value optionally in double quotes (§4.1.1), any octet in the
//! other cookies; every `Cookie` header of the request is read (HTTP/2
//! sends one per pair). An empty token cookie (a logout's) is no cookie;
//! the token cookie twice is refused: a request whose credentials cannot
//! be told apart carries none.

use http::header::COOKIE;
use http::{HeaderMap, HeaderName, HeaderValue, Method};

/// The value of cookie `name` in `headers`, if it is there with a value
/// (an empty one, as a logout leaves it, counts as absent).
///
/// # Errors
/// The reason, for a 400: `name` twice, or its value not text.
pub(crate) fn value<'h>(
    headers: &'h HeaderMap,
    name: &str,
) -> Result<Option<&'h str>, &'static str> {
    let mut found: Option<&[u8]> = None;
    for header in headers.get_all(COOKIE) {
        for (pair_name, pair_value) in pairs(header.as_bytes()) {
            if pair_name != name.as_bytes() {
                continue;
            }
            // Twice, even with one copy empty: a service reading the
            // first would see another than the one verified.
            if found.is_some() {
                return Err("the token cookie is sent twice");
            }
            found = Some(pair_value);
        }
    }
    match found {
        None | Some(b"") => Ok(None),
        Some(value) => std::str::from_utf8(value)
            .map(Some)
            .map_err(|_| "the token cookie is not text"),
    }
}

/// The `name=value` pairs of one `Cookie` header, as bytes (other cookies
/// may hold any octet), names and values trimmed of spaces and tabs
/// (RFC 6265 §5.4), a value unquoted.
fn pairs(header: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    header.split(|&b| b == b';').filter_map(|pair| {
        let at = pair.iter().position(|&b| b == b'=')?;
        let (name, value) = (trim(&pair[..at]), trim(&pair[at + 1..]));
        let value = value
            .strip_prefix(b"\"")
            .and_then(|v| v.strip_suffix(b"\""))
            .unwrap_or(value);
        Some((name, value))
    })
}

fn trim(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = bytes.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(start), Some(end)) => &bytes[start..=end],
        _ => &[],
    }
}

/// The methods a form on another site cannot use to change anything
/// (RFC 9110 §9.2.1's safe methods that browsers send cross-site).
const SAFE: [Method; 3] = [Method::GET, Method::HEAD, Method::OPTIONS];

/// `X-Original-Method` (NGINX) and `X-Forwarded-Method` (Traefik,
/// Caddy): a forward-auth check's original method.
const ORIGINAL_METHODS: [HeaderName; 2] = [
    HeaderName::from_static("x-original-method"),
    HeaderName::from_static("x-forwarded-method"),
];

/// Whether a request with a cookie-borne token must be refused: the
/// browser says it is cross-site (`Sec-Fetch-Site: cross-site`) and its
/// method is unsafe, that is, the request's own method, or the original
/// method a forward-auth check names, is not GET, HEAD or OPTIONS (either
/// one unsafe is enough: a page cannot add those headers to a form).
pub(crate) fn cross_site_unsafe(method: &Method, headers: &HeaderMap) -> bool {
    let cross_site = headers
        .get_all("sec-fetch-site")
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"));
    if !cross_site {
        return false;
    }
    let unsafe_original = ORIGINAL_METHODS.iter().any(|name| {
        headers
            .get_all(name)
            .iter()
            .any(|v| Method::from_bytes(v.as_bytes()).map_or(true, |m| !SAFE.contains(&m)))
    });
    !SAFE.contains(method) || unsafe_original
}

/// Removes cookie `name` from every `Cookie` header of `headers`, keeping
/// the other pairs in order, trimmed and joined by `; ` (a header left
/// empty goes).
pub fn remove_cookie(headers: &mut HeaderMap, name: &str) {
    let name = name.as_bytes();
    if !headers
        .get_all(COOKIE)
        .iter()
        .any(|header| pairs(header.as_bytes()).any(|(n, _)| n == name))
    {
        return;
    }
    let kept: Vec<HeaderValue> = headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|header| {
            let rest: Vec<&[u8]> = header
                .as_bytes()
                .split(|&b| b == b';')
                .map(trim)
                .filter(|pair| {
                    !pair.is_empty()
                        && pair
                            .iter()
                            .position(|&b| b == b'=')
                            .is_none_or(|at| trim(&pair[..at]) != name)
                })
                .collect();
            (!rest.is_empty())
                .then(|| HeaderValue::from_bytes(&rest.join(&b"; "[..])).ok())
                .flatten()
        })
        .collect();
    headers.remove(COOKIE);
    for value in kept {
        headers.append(COOKIE, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cookies(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(COOKIE, HeaderValue::from_str(v).unwrap());
        }
        headers
    }

    #[test]
    fn the_token_cookie_is_found_once_in_any_cookie_header() {
        let headers = cookies(&["a=1;  kms_token = abc.def.ghi", "b=2"]);
        assert_eq!(value(&headers, "kms_token"), Ok(Some("abc.def.ghi")));
        assert_eq!(value(&headers, "b"), Ok(Some("2")));
        assert_eq!(value(&headers, "kms"), Ok(None));
        assert_eq!(value(&cookies(&["t=\"x.y.z\""]), "t"), Ok(Some("x.y.z")));
        assert!(value(&cookies(&["t=1", "t=2"]), "t").is_err());
        assert!(value(&cookies(&["t=1; t=2"]), "t").is_err());
        // An empty value (a logout's) is no cookie.
        assert_eq!(value(&cookies(&["t=; a=1"]), "t"), Ok(None));
        assert!(value(&cookies(&["t=; t=x.y.z"]), "t").is_err());
        // Another cookie's octets do not matter.
        let mut raw = HeaderMap::new();
        raw.append(
            COOKIE,
            HeaderValue::from_bytes(b"n=caf\xc3\xa9; t=x.y.z").unwrap(),
        );
        assert_eq!(value(&raw, "t"), Ok(Some("x.y.z")));
        remove_cookie(&mut raw, "t");
        assert_eq!(raw[COOKIE].as_bytes(), b"n=caf\xc3\xa9");
    }

    #[test]
    fn only_a_cross_site_unsafe_request_is_refused() {
        let mut headers = HeaderMap::new();
        assert!(!cross_site_unsafe(&Method::POST, &headers));
        headers.insert("sec-fetch-site", HeaderValue::from_static("same-site"));
        assert!(!cross_site_unsafe(&Method::POST, &headers));
        headers.insert("sec-fetch-site", HeaderValue::from_static("cross-site"));
        assert!(cross_site_unsafe(&Method::POST, &headers));
        assert!(cross_site_unsafe(&Method::DELETE, &headers));
        assert!(!cross_site_unsafe(&Method::GET, &headers));
        headers.insert("x-forwarded-method", HeaderValue::from_static("PUT"));
        assert!(cross_site_unsafe(&Method::GET, &headers));
        headers.insert("x-forwarded-method", HeaderValue::from_static("HEAD"));
        assert!(!cross_site_unsafe(&Method::GET, &headers));
    }

    #[test]
    fn removing_the_token_cookie_keeps_the_others() {
        let mut headers = cookies(&["a=1; kms_token=abc; b=2", "\tkms_token =x", "c=3"]);
        remove_cookie(&mut headers, "kms_token");
        let left: Vec<&str> = headers
            .get_all(COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap())
            .collect();
        assert_eq!(left, ["a=1; b=2", "c=3"]);
    }
}
