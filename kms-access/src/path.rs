//! [`normalize`]: the request path the rules match, which is also the
//! path that is served.
//!
//! The steps, in order (each on the result of the one before):
//! 1. percent-escapes of unreserved characters (`A`–`Z`, `a`–`z`, `0`–`9`,
//!    `-`, `.`, `_`, `~`) decoded; every other escape kept, its hex digits
//!    upper-cased (RFC 3986 §6.2.2.1 and §6.2.2.2); every byte a path may
//!    not hold as it is (RFC 3986 §3.3: anything but `pchar` and `/`, so
//!    non-ASCII UTF-8 too) percent-encoded, so that a path sent raw and
//!    the same path sent encoded are one;
//! 2. runs of `/` merged into one;
//! 3. dot-segments removed (RFC 3986 §5.2.4).
//!
//! Refused ([`PathError`]), because a server behind the gateway might read
//! them as another path than the one matched:
//! * a path that does not start with `/`;
//! * `%2F` or `%5C` (an encoded `/` or `\`), a backslash, a NUL (raw or
//!   `%00`), a `%` not followed by two hex digits, a `#` (a fragment is
//!   never part of a request's target, RFC 9112 §3.2; a proxy that ends
//!   the path there would serve another than the one matched);
//! * a `..` that would climb above the root;
//! * a segment whose part before its first `;` is `.` or `..` (`/..;/`:
//!   servlet containers strip `;params` before they resolve dot-segments).
//!
//! Invariants: a normalized path starts with `/`, holds no `//`, no `.`
//! or `..` segment, no escape of an unreserved character and nothing but
//! `pchar`s, `/` and upper-case escapes, and normalizing it again gives
//! it back unchanged. [`NormalPath::restructured`] says whether steps 2
//! and 3 changed anything: a proxy that passes the request's path on
//! unresolved serves another path than the normal one exactly then.

use std::borrow::Cow;

/// Why a path cannot be normalized (module docs). Each variant's meaning
/// is stable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path does not start with `/`.
    #[error("the path does not start with /")]
    NotAbsolute,
    /// `%2F` or `%5C`: an encoded `/` or `\`.
    #[error("the path holds an encoded / or \\")]
    EncodedSeparator,
    /// A raw backslash.
    #[error("the path holds a backslash")]
    Backslash,
    /// A NUL, raw or as `%00`.
    #[error("the path holds a NUL")]
    Nul,
    /// A `%` not followed by two hex digits.
    #[error("the path holds a % that is not an escape")]
    BadEscape,
    /// A `#`.
    #[error("the path holds a #")]
    Fragment,
    /// A `..` segment that would climb above the root.
    #[error("the path climbs above the root")]
    AboveRoot,
    /// A segment whose part before its first `;` is `.` or `..`.
    #[error("the path holds a dot-segment with parameters")]
    DotSegmentWithParameters,
}

/// A path in normal form (module docs): what [`normalize`] gives and
/// what the rules match ([`AccessRules::decide`](crate::AccessRules::decide)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalPath<'a> {
    path: Cow<'a, str>,
    /// Whether repeated slashes were merged or dot-segments removed.
    restructured: bool,
}

impl<'a> NormalPath<'a> {
    /// `/`, the root.
    pub fn root() -> Self {
        NormalPath {
            path: Cow::Borrowed("/"),
            restructured: false,
        }
    }

    /// The path.
    pub fn as_str(&self) -> &str {
        &self.path
    }

    /// Whether normalizing changed the path: the path to serve is then
    /// [`NormalPath::as_str`], not the request's.
    pub fn changed(&self) -> bool {
        matches!(self.path, Cow::Owned(_))
    }

    /// Whether normalizing merged repeated slashes or removed
    /// dot-segments (not only escapes): a server that receives the
    /// request's own path and does not resolve them (most routers) reads
    /// another path than this one.
    pub fn restructured(&self) -> bool {
        self.restructured
    }

    /// The path, borrowed from the request's where normalizing did not
    /// change it.
    pub fn into_cow(self) -> Cow<'a, str> {
        self.path
    }
}

impl std::fmt::Display for NormalPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.path)
    }
}

/// The normal form of `path` (a request's path, without its query;
/// module docs).
///
/// # Errors
/// Every [`PathError`], as the module docs list them.
///
/// ```
/// use kms_access::{normalize, PathError};
/// assert_eq!(normalize("/orders/../admin//x").unwrap().as_str(), "/admin/x");
/// assert_eq!(normalize("/%61dmin/%7euser/%3f").unwrap().as_str(), "/admin/~user/%3F");
/// assert_eq!(normalize("/admin%2Fx"), Err(PathError::EncodedSeparator));
/// assert_eq!(normalize("/public/..;/admin/x"), Err(PathError::DotSegmentWithParameters));
/// assert_eq!(normalize("/a/../../etc"), Err(PathError::AboveRoot));
/// assert!(!normalize("/orders/1").unwrap().changed());
/// ```
pub fn normalize(path: &str) -> Result<NormalPath<'_>, PathError> {
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    let decoded = decode_unreserved(path)?;
    // Segments after the leading `/`; runs of `/` give empty segments,
    // which are dropped (but the last: a trailing `/` is kept).
    let mut kept: Vec<&str> = Vec::new();
    // Whether the result ends in `/` (a trailing slash, or a last segment
    // that was a dot-segment: RFC 3986 §5.2.4 keeps the `/` before it).
    let mut trailing = false;
    let mut restructured = false;
    let mut segments = decoded[1..].split('/').peekable();
    while let Some(segment) = segments.next() {
        let last = segments.peek().is_none();
        restructured |= matches!(segment, "." | "..") || (segment.is_empty() && !last);
        let before_params = segment.split(';').next().unwrap_or(segment);
        if segment.contains(';') && matches!(before_params, "." | "..") {
            return Err(PathError::DotSegmentWithParameters);
        }
        match segment {
            "" => trailing = last,
            "." => trailing = last,
            ".." => {
                if kept.pop().is_none() {
                    return Err(PathError::AboveRoot);
                }
                trailing = last;
            }
            _ => {
                kept.push(segment);
                trailing = false;
            }
        }
    }
    let mut normal = String::with_capacity(decoded.len());
    for segment in &kept {
        normal.push('/');
        normal.push_str(segment);
    }
    if trailing || kept.is_empty() {
        normal.push('/');
    }
    let path = if normal == path {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(normal)
    };
    Ok(NormalPath { path, restructured })
}

/// Step 1 (module docs), with the refusals that need the escapes read.
fn decode_unreserved(path: &str) -> Result<Cow<'_, str>, PathError> {
    let bytes = path.as_bytes();
    if bytes.iter().all(|&b| b != b'%' && plain(b)) {
        return Ok(Cow::Borrowed(path));
    }
    let mut out = String::with_capacity(path.len() + path.len() / 2);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => return Err(PathError::Backslash),
            0 => return Err(PathError::Nul),
            b'#' => return Err(PathError::Fragment),
            b'%' => {
                let (Some(high), Some(low)) = (
                    bytes.get(i + 1).and_then(|b| hex(*b)),
                    bytes.get(i + 2).and_then(|b| hex(*b)),
                ) else {
                    return Err(PathError::BadEscape);
                };
                match high << 4 | low {
                    b'/' | b'\\' => return Err(PathError::EncodedSeparator),
                    0 => return Err(PathError::Nul),
                    b if unreserved(b) => out.push(char::from(b)),
                    b => escape(&mut out, b),
                }
                i += 3;
            }
            b if plain(b) => {
                out.push(char::from(b));
                i += 1;
            }
            b => {
                escape(&mut out, b);
                i += 1;
            }
        }
    }
    Ok(Cow::Owned(out))
}

/// RFC 3986 §2.3's unreserved characters.
fn unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// Whether `path` holds only characters a normal path holds as they are:
/// `pchar`s that are not escapes (RFC 3986 §3.3: letters, digits,
/// `-._~!$&'()*+,;=:@`) and `/`; no `%`, space, quote, brace or non-ASCII
/// character.
pub fn is_plain_path(path: &str) -> bool {
    path.bytes().all(plain)
}

/// A byte a normal path holds as it is: a `pchar` that is not an escape
/// (RFC 3986 §3.3: unreserved, sub-delims, `:`, `@`), or `/`.
pub(crate) fn plain(b: u8) -> bool {
    unreserved(b) || b"!$&'()*+,;=:@/".contains(&b)
}

fn escape(out: &mut String, b: u8) {
    out.push('%');
    out.push(char::from(HEX_UPPER[usize::from(b >> 4)]));
    out.push(char::from(HEX_UPPER[usize::from(b & 0x0f)]));
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_cases_against_a_rule_on_admin() {
        for (path, normal) in [
            ("/orders/../admin/x", "/admin/x"),
            ("/orders/%2e%2e/admin/x", "/admin/x"),
            ("/orders/%2E%2E/admin/x", "/admin/x"),
            ("//admin/x", "/admin/x"),
            ("/%61dmin/x", "/admin/x"),
            ("/ADMIN/x", "/ADMIN/x"),
        ] {
            assert_eq!(
                normalize(path).as_ref().map(NormalPath::as_str),
                Ok(normal),
                "{path}"
            );
        }
        assert_eq!(
            normalize("/admin%2Fx").err(),
            Some(PathError::EncodedSeparator)
        );
        assert_eq!(
            normalize("/admin%2fx").err(),
            Some(PathError::EncodedSeparator)
        );
        assert_eq!(
            normalize("/public/..;/admin/x").err(),
            Some(PathError::DotSegmentWithParameters)
        );
    }

    #[test]
    fn dot_segments_and_slashes() {
        for (path, normal) in [
            ("/", "/"),
            ("//", "/"),
            ("/a/.", "/a/"),
            ("/a/..", "/"),
            ("/a/b/..", "/a/"),
            ("/a/./b", "/a/b"),
            ("/a//b///c/", "/a/b/c/"),
            ("/.", "/"),
            ("/a/..b/.c", "/a/..b/.c"),
            ("/a;x/b", "/a;x/b"),
            ("/a/%2E/b", "/a/b"),
            ("/caf\u{e9}/%41", "/caf%C3%A9/A"),
            ("/caf%c3%a9/", "/caf%C3%A9/"),
            ("/a b/\"x\"", "/a%20b/%22x%22"),
        ] {
            assert_eq!(
                normalize(path).as_ref().map(NormalPath::as_str),
                Ok(normal),
                "{path}"
            );
        }
        for (path, error) in [
            ("", PathError::NotAbsolute),
            ("a/b", PathError::NotAbsolute),
            ("*", PathError::NotAbsolute),
            ("/..", PathError::AboveRoot),
            ("/a/../..", PathError::AboveRoot),
            ("/%2e%2e/x", PathError::AboveRoot),
            ("/a\\b", PathError::Backslash),
            ("/a%5cb", PathError::EncodedSeparator),
            ("/a%00b", PathError::Nul),
            ("/a\0b", PathError::Nul),
            ("/admin/x#/../../public/y", PathError::Fragment),
            ("/a%zz", PathError::BadEscape),
            ("/a%4", PathError::BadEscape),
            ("/a/.;x/b", PathError::DotSegmentWithParameters),
            ("/a/..;", PathError::DotSegmentWithParameters),
            ("/a/%2e%2e;x/b", PathError::DotSegmentWithParameters),
        ] {
            assert_eq!(normalize(path).err(), Some(error), "{path}");
        }
    }

    #[test]
    fn other_escapes_are_kept_upper_cased() {
        let normal = |path| normalize(path).map(|p| p.as_str().to_owned());
        assert_eq!(normal("/a%3fb%c3%a9").as_deref(), Ok("/a%3Fb%C3%A9"));
        assert_eq!(normal("/a%20b").as_deref(), Ok("/a%20b"));
        assert!(!normalize("/a%3Fb").unwrap().changed());
        assert!(normalize("/a%3fb").unwrap().changed());
    }

    #[test]
    fn restructuring_is_told_apart_from_escapes() {
        for (path, restructured) in [
            ("/a/b", false),
            ("/a/b/", false),
            ("/", false),
            ("/%61dmin/x", false),
            ("/a//b", true),
            ("//a", true),
            ("/a/./b", true),
            ("/a/../b", true),
            ("/a/%2e%2e/b", true),
            ("/a/.", true),
        ] {
            assert_eq!(
                normalize(path).unwrap().restructured(),
                restructured,
                "{path}"
            );
        }
    }
}
