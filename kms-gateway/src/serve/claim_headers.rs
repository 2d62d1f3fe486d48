//! `--claim-header CLAIM=HEADER`: verified claims passed on as request
//! headers (forward authentication's answer, the proxy mode's upstream
//! request).
//!
//! * Every value written is ASCII (RFC 9110 §5.5 leaves other bytes'
//!   meaning to the receiver, and upstreams read them as Latin-1, UTF-8 or
//!   not at all). A string claim is written as it is when ASCII; one
//!   holding non-ASCII text is left out, counted in
//!   `kms_claim_headers_omitted_total{claim}`. A number or boolean is
//!   written as its JSON text; an array or object as compact JSON
//!   (serde_json's) with every non-ASCII character escaped as `\uXXXX`
//!   (RFC 8259 §7; a surrogate pair past the BMP). A claim the token
//!   lacks, or whose value is `null`, writes no header (OpenID Connect
//!   Core §5.3.2: an absent claim is omitted, not null).
//! * A value that is not a valid field value as it is (RFC 9110 §5.5: a
//!   control character other than tab, such as CR, LF or NUL, or DEL;
//!   whitespace at either end, which a receiver would strip) is never
//!   written: [`ClaimHeaders::write`] refuses the whole request instead,
//!   so a token cannot split or forge headers.
//! * At start, a header that a proxy or the upstream reads as framing,
//!   routing or credentials is refused ([`parse`]): `Host`,
//!   `Authorization`, `Cookie`, `Content-Length`, `Transfer-Encoding`,
//!   the hop-by-hop headers (RFC 9110 §7.6.1) and the forwarding headers
//!   (`Forwarded`, `X-Forwarded-For`/`-Proto`/`-Host`, `X-Real-IP`), as is
//!   one header named for two claims and a name holding `_` (which
//!   CGI-style servers read as `-`).
//!
//! Invariant: the headers written are exactly the configured ones; every
//! copy of them already in the map (a client's own) is removed first.

use axum::http::header::{self, HeaderMap, HeaderName, HeaderValue};
use axum::response::Response;
use kms::http::invalid_token_response_with;
use kms::jose::Claims;
use serde_json::Value;

/// The forwarding headers the gateway answers for: RFC 7239's
/// `Forwarded`, and `X-Forwarded-For`, `-Proto` and `-Host` (de facto).
/// The proxy mode writes them; no claim may be written to them.
pub(crate) const FORWARDING: [HeaderName; 4] = [
    header::FORWARDED,
    HeaderName::from_static("x-forwarded-for"),
    HeaderName::from_static("x-forwarded-proto"),
    HeaderName::from_static("x-forwarded-host"),
];

/// One `--claim-header`: the claim's name and the header it is written to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimHeader {
    /// The claim's name, as in the token's payload.
    pub(crate) claim: String,
    /// The header's name (lowercase, as `http` holds it).
    pub(crate) header: HeaderName,
}

/// Headers no claim may be written to: the request's framing, routing and
/// credentials, the hop-by-hop headers of RFC 9110 §7.6.1 (with
/// `Keep-Alive` and `Proxy-Connection`, which proxies still treat so), and
/// `X-Real-IP` beside the proxy's [`FORWARDING`] headers (a token must
/// not name the client's address).
const REFUSED: [&str; 14] = [
    "host",
    "x-real-ip",
    "authorization",
    "cookie",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "upgrade",
];

/// Parses one `--claim-header` value, `CLAIM=HEADER` (clap's value parser:
/// an error is a usage error, exit 2).
///
/// # Errors
/// No `=`, an empty claim, a header name that is not a token (RFC 9110
/// §5.1) or that holds `_`, or one of the refused headers (module docs).
pub(crate) fn parse(text: &str) -> Result<ClaimHeader, String> {
    let (claim, header) = text
        .split_once('=')
        .ok_or_else(|| "expected CLAIM=HEADER, e.g. sub=X-Auth-Subject".to_owned())?;
    if claim.is_empty() {
        return Err("the claim's name is empty".to_owned());
    }
    let header = HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| format!("{header:?} is not a header name"))?;
    if header.as_str().contains('_') {
        return Err(format!(
            "{header} holds `_`: CGI-style servers read `_` and `-` as one, and the proxy \
             mode drops every client header with `_` (as NGINX does); name it with `-`"
        ));
    }
    if REFUSED.contains(&header.as_str()) || FORWARDING.contains(&header) {
        return Err(format!(
            "{header} carries the request's framing, routing or credentials; \
             a claim may not be written to it"
        ));
    }
    Ok(ClaimHeader {
        claim: claim.to_owned(),
        header,
    })
}

/// Why a request was refused: a chosen claim's value cannot be a header
/// value (it holds a control character other than tab).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnwritableClaim {
    /// The claim's name.
    pub(crate) claim: String,
}

/// Every `--claim-header`, in the order given.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClaimHeaders(Vec<ClaimHeader>);

impl ClaimHeaders {
    /// The configured claim headers.
    ///
    /// # Errors
    /// A header named for two claims (a usage error).
    pub(crate) fn new(list: Vec<ClaimHeader>) -> Result<Self, String> {
        for (i, one) in list.iter().enumerate() {
            if let Some(other) = list[..i].iter().find(|o| o.header == one.header) {
                return Err(format!(
                    "--claim-header: {} is named for both {} and {}",
                    one.header, other.claim, one.claim
                ));
            }
        }
        Ok(ClaimHeaders(list))
    }

    /// Removes every copy of the configured headers from `headers` (a
    /// client's own, which must never pass for the gateway's).
    pub(crate) fn remove_from(&self, headers: &mut HeaderMap) {
        for one in &self.0 {
            // `remove` drops every value of a repeated header.
            headers.remove(&one.header);
        }
    }

    /// Removes the configured headers from `headers`, then writes each
    /// chosen claim of `claims` that the token has (module docs).
    ///
    /// # Errors
    /// [`UnwritableClaim`] for the first claim whose value cannot be a
    /// header value; the request must then be refused (401), whatever was
    /// written.
    pub(crate) fn write(
        &self,
        claims: &Claims,
        headers: &mut HeaderMap,
    ) -> Result<(), UnwritableClaim> {
        self.remove_from(headers);
        for one in &self.0 {
            let Some(value) = claims.get(&one.claim) else {
                continue;
            };
            let text = match value {
                Value::Null => continue,
                // A control character refuses the request (below) before
                // non-ASCII text is left out.
                Value::String(s) if !s.is_ascii() && !s.chars().any(is_refused_control) => {
                    metrics::counter!(
                        crate::telemetry::CLAIM_HEADERS_OMITTED_TOTAL,
                        "claim" => one.claim.clone()
                    )
                    .increment(1);
                    continue;
                }
                Value::String(s) => s.clone(),
                // Numbers, booleans, arrays and objects: compact JSON,
                // ASCII only.
                other => ascii_json(other),
            };
            // A field value has no whitespace at its ends (RFC 9110
            // §5.5): a receiver would strip it and read another value.
            let padded = text.starts_with([' ', '\t']) || text.ends_with([' ', '\t']);
            let value = HeaderValue::from_bytes(text.as_bytes())
                .ok()
                .filter(|_| !padded)
                .ok_or_else(|| UnwritableClaim {
                    claim: one.claim.clone(),
                })?;
            headers.insert(one.header.clone(), value);
        }
        Ok(())
    }
}

/// A character no header value may hold (RFC 9110 §5.5): a control
/// character other than tab, or DEL. (Other non-ASCII characters are left
/// out with the whole value, never written.)
fn is_refused_control(c: char) -> bool {
    c.is_ascii_control() && c != '\t'
}

/// `value` as compact JSON whose every non-ASCII character is escaped as
/// `\uXXXX` (RFC 8259 §7), through serde_json's formatter hook.
fn ascii_json(value: &Value) -> String {
    struct Ascii;
    impl serde_json::ser::Formatter for Ascii {
        fn write_string_fragment<W: ?Sized + std::io::Write>(
            &mut self,
            writer: &mut W,
            fragment: &str,
        ) -> std::io::Result<()> {
            let mut units = [0u16; 2];
            for c in fragment.chars() {
                if c.is_ascii() {
                    writer.write_all(&[c as u8])?;
                } else {
                    for unit in c.encode_utf16(&mut units) {
                        write!(writer, "\\u{unit:04x}")?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut out = Vec::new();
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, Ascii);
    // Writing JSON into a Vec fails only on a map with non-string keys,
    // which a `Value` never holds; every byte written is ASCII.
    match serde::Serialize::serialize(value, &mut serializer) {
        Ok(()) => String::from_utf8(out).unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The 401 of a verified token whose chosen claim cannot be a header
/// value (its challenge naming `resource_metadata`'s URL when the face
/// serves one), counted and told at debug level as the layer's refusals
/// are.
pub(crate) fn refuse_unwritable(
    topic: &str,
    claim: &str,
    resource_metadata: Option<&str>,
) -> Response {
    metrics::counter!(
        kms::actor::metrics::TOKEN_REFUSALS_TOTAL,
        "topic" => topic.to_owned(),
        "code" => "http.unwritable_claim"
    )
    .increment(1);
    tracing::debug!(claim, "token refused: the claim cannot be a header value");
    let mut response: Response = invalid_token_response_with(resource_metadata);
    response
        .extensions_mut()
        .insert(kms::http::ErrorCode("http.unwritable_claim"));
    // It depends on the token: no cache keeps it.
    response.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Claims {
        Claims::from_json(value.to_string().as_bytes()).unwrap()
    }

    fn headers(list: &[&str]) -> ClaimHeaders {
        ClaimHeaders::new(list.iter().map(|t| parse(t).unwrap()).collect()).unwrap()
    }

    #[test]
    fn framing_routing_credentials_and_hop_by_hop_headers_are_refused() {
        use axum::http::header;
        let known = [
            header::HOST,
            header::AUTHORIZATION,
            header::COOKIE,
            header::CONTENT_LENGTH,
            header::TRANSFER_ENCODING,
            header::CONNECTION,
            header::TE,
            header::UPGRADE,
        ];
        for name in known {
            assert!(parse(&format!("sub={name}")).is_err(), "{name}");
        }
        for name in [
            "Host",
            "AUTHORIZATION",
            "Keep-Alive",
            "Proxy-Authorization",
            "Trailer",
        ] {
            assert!(parse(&format!("sub={name}")).is_err(), "{name}");
        }
        assert!(parse("sub").is_err());
        assert!(parse("=X-Sub").is_err());
        assert!(parse("sub=X Sub").is_err());
        assert!(parse("sub=").is_err());
        let ok = parse("sub=X-Auth-Subject").unwrap();
        assert_eq!(ok.claim, "sub");
        assert_eq!(ok.header, "x-auth-subject");
        // A claim's name may hold `=`? No: the first `=` splits.
        assert_eq!(parse("a=b=c").unwrap_err(), "\"b=c\" is not a header name");
    }

    #[test]
    fn one_header_for_two_claims_is_refused() {
        let list = vec![parse("sub=X-A").unwrap(), parse("email=x-a").unwrap()];
        assert!(ClaimHeaders::new(list).is_err());
    }

    #[test]
    fn values_are_written_as_text_or_compact_json_and_absent_claims_write_nothing() {
        let chosen = headers(&[
            "sub=X-Sub",
            "n=X-N",
            "ok=X-Ok",
            "roles=X-Roles",
            "org=X-Org",
            "name=X-Name",
            "gone=X-Gone",
            "none=X-None",
        ]);
        let mut map = HeaderMap::new();
        // A client's own copies: removed, even where nothing replaces them.
        map.append("x-gone", HeaderValue::from_static("forged"));
        map.append("x-sub", HeaderValue::from_static("forged"));
        map.append("x-sub", HeaderValue::from_static("forged again"));
        map.insert("x-other", HeaderValue::from_static("kept"));
        let token = claims(json!({
            "sub": "alice",
            "n": 42,
            "ok": true,
            "roles": ["admin", "ops"],
            "org": {"id": 7, "name": "acme"},
            "name": "Zoë\tZ",
            "none": null,
        }));
        let token_ascii_name = claims(json!({"name": "Zoe\tZ"}));
        chosen.write(&token, &mut map).unwrap();
        assert_eq!(map.get_all("x-sub").iter().collect::<Vec<_>>(), ["alice"]);
        assert_eq!(map["x-n"], "42");
        assert_eq!(map["x-ok"], "true");
        assert_eq!(map["x-roles"], r#"["admin","ops"]"#);
        assert_eq!(map["x-org"], r#"{"id":7,"name":"acme"}"#);
        // Non-ASCII text is left out, not written as bytes.
        assert!(!map.contains_key("x-name"));
        chosen.write(&token_ascii_name, &mut map).unwrap();
        assert_eq!(map["x-name"], "Zoe\tZ");
        assert!(!map.contains_key("x-gone"));
        assert!(!map.contains_key("x-none"));
        assert_eq!(map["x-other"], "kept");
    }

    #[test]
    fn arrays_and_objects_are_ascii_json() {
        let chosen = headers(&["roles=X-Roles", "org=X-Org"]);
        let mut map = HeaderMap::new();
        let token = claims(json!({
            "roles": ["zoë", "😀", "a\nb"],
            "org": {"naïve": "ok"},
        }));
        chosen.write(&token, &mut map).unwrap();
        assert_eq!(map["x-roles"], r#"["zo\u00eb","\ud83d\ude00","a\nb"]"#);
        assert_eq!(map["x-org"], r#"{"na\u00efve":"ok"}"#);
        // The escapes read back as the same value.
        let back: Value = serde_json::from_slice(map["x-roles"].as_bytes()).unwrap();
        assert_eq!(back, json!(["zoë", "😀", "a\nb"]));
    }

    #[test]
    fn a_control_character_refuses_the_request() {
        let chosen = headers(&["sub=X-Sub"]);
        for bad in [
            "a\r\nX-Admin: yes",
            "a\nb",
            "a\0b",
            "a\u{7f}b",
            "\u{1b}[31m",
            "zoë\r\n",
        ] {
            let mut map = HeaderMap::new();
            let refused = chosen.write(&claims(json!({ "sub": bad })), &mut map);
            assert_eq!(
                refused,
                Err(UnwritableClaim {
                    claim: "sub".to_owned()
                }),
                "{bad:?}"
            );
        }
    }
}
