//! `--access-log`: one JSON line per request on stdout, for the public and
//! admin faces:
//!
//! `{"ts":"2026-11-28T10:00:00.123456Z","method":"GET","path":"/app",
//! "status":200,"duration_us":812,"bytes_out":57,"client":"203.0.113.9",
//! "face":"public","iss":"…","sub":"…","kid":"…","cached":true,
//! "code":"jose.expired","rule":0}`
//!
//! * `ts`: when the request arrived, RFC 3339 in UTC with microseconds;
//!   `duration_us`: from then to the answer's last byte handed to the
//!   socket (or the connection's end); `bytes_out`: the answer's body
//!   bytes sent;
//! * `path`: the request's path without the query; for a forward-auth
//!   check, `method` and `path` are the original request's, as the proxy
//!   names it (`X-Original-URI`/`X-Forwarded-Uri` or the path under the
//!   route, `X-Original-Method`/`X-Forwarded-Method`);
//! * `client`: the client's address as the bearer layer takes it (the
//!   peer, or with `--trusted-proxy` the rightmost `X-Forwarded-For` entry
//!   that is no trusted proxy);
//! * when a token verified: `iss`, `sub` (when strings), `kid`, `cached`
//!   (`kms_http::TokenRecord`); on an error answer its stable `code`
//!   (`kms_http::ErrorCode`: a refused token's own, `jose.expired`); with
//!   access rules, `rule`: the deciding rule's index from 0, or `default`.
//!
//! Never the token, another claim, or a header value but the original
//! request's method and path.
//!
//! Invariant: the request's task formats its line once the answer's body
//! is done (into one buffer sized up front: the line's fields are freed
//! where they were made) and offers it to a bounded queue ([`QUEUE`]
//! lines); a full queue drops the line and counts it in
//! `kms_access_log_dropped_total`, never blocking a request, and never
//! waking anything: one thread takes whatever is queued every [`TICK`]
//! and writes it, buffered, and flushes (a line reaches stdout at most
//! about a tick after its request ended).
//! It ends, having written every queued line, once every face has
//! stopped ([`AccessLog::finish`]).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderName, Method};
use kms::http::{AccessRule, ClientAddress, ErrorCode, RecordToken, TokenRecord};
use metrics::Counter;

use crate::logging::warn_line;
use crate::timestamp::write_rfc3339_micros;

/// Lines the queue holds before it drops new ones: small enough that its
/// slots stay in the CPUs' caches.
pub(crate) const QUEUE: usize = 4096;

/// How often the writer takes the queued lines: with [`QUEUE`], up to
/// about 800 000 lines a second before any is dropped.
const TICK: Duration = Duration::from_millis(5);

/// `kms_access_log_dropped_total` (counter): lines dropped because the
/// queue was full (the writer could not keep up with stdout).
pub(crate) const ACCESS_LOG_DROPPED_TOTAL: &str = "kms_access_log_dropped_total";

/// How long [`AccessLog::finish`] waits for the writer to drain.
const FINISH: Duration = Duration::from_secs(5);

/// The access log: the queue's sending end and what every line needs.
#[derive(Clone)]
pub(crate) struct AccessLog {
    shared: Arc<Shared>,
}

struct Shared {
    /// Formatted lines, each ending with a newline.
    lines: SyncSender<Vec<u8>>,
    dropped: Counter,
    client_address: ClientAddress,
    /// The forward-auth route, whose checks log the original request.
    forward_auth: Option<String>,
}

impl AccessLog {
    /// Starts the writer thread; `client_address` (`--trusted-proxy`)
    /// names each request's client, `forward_auth` is the forward-auth
    /// route, if served. Returns the log and the writer's handle, for
    /// [`AccessLog::finish`].
    ///
    /// # Errors
    /// The thread cannot be started, as text.
    pub(crate) fn start(
        client_address: ClientAddress,
        forward_auth: Option<String>,
    ) -> Result<(AccessLog, Writer), String> {
        let (lines, queued) = std::sync::mpsc::sync_channel(QUEUE);
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("access-log".to_owned())
            .spawn(move || {
                write_lines(&queued);
                let _ = done_tx.send(());
            })
            .map_err(|e| format!("--access-log: cannot start its writer: {e}"))?;
        let log = AccessLog {
            shared: Arc::new(Shared {
                lines,
                dropped: metrics::counter!(ACCESS_LOG_DROPPED_TOTAL),
                client_address,
                forward_auth,
            }),
        };
        Ok((log, Writer { done }))
    }

    /// Begins the line of `request`, which arrived from `peer` on `face`
    /// (before routing: its own method and path), and asks the layers for
    /// its token's record ([`RecordToken`]).
    pub(crate) fn begin<B>(
        &self,
        face: &'static str,
        request: &mut axum::http::Request<B>,
        peer: SocketAddr,
    ) -> Pending {
        // One clock read: the line's time, and the start of its duration.
        let started = SystemTime::now();
        let shared = &self.shared;
        let path = request.uri().path();
        // Sized once for the whole line (a long token's fields may grow
        // it once).
        let mut text = Vec::with_capacity(448 + path.len());
        text.extend_from_slice(b"{\"ts\":\"");
        write_rfc3339_micros(&mut text, started);
        text.push(b'"');
        match &shared.forward_auth {
            Some(route) if face == "public" && under(path, route) => {
                let (method, path) = original(request.method(), path, route, request.headers());
                field(&mut text, "method", method.as_str());
                field(&mut text, "path", &path);
            }
            _ => {
                field(&mut text, "method", request.method().as_str());
                field(&mut text, "path", path);
            }
        }
        let client = shared.client_address.of(peer.ip(), request.headers());
        let _ = write!(text, ",\"client\":\"{client}\"");
        field(&mut text, "face", face);
        request.extensions_mut().insert(RecordToken);
        Pending {
            line: Some(Line {
                text,
                started,
                bytes_out: 0,
            }),
            shared: Arc::clone(&self.shared),
        }
    }
}

/// A request's line until its answer's body is done: queued when dropped
/// (after the body's last frame, or when the connection ended first).
pub(crate) struct Pending {
    line: Option<Line>,
    shared: Arc<Shared>,
}

impl Pending {
    /// Takes from `response` (before its body is sent) its status and what
    /// the layers left in its extensions.
    pub(crate) fn answered<B>(&mut self, response: &mut axum::http::Response<B>) {
        let Some(line) = self.line.as_mut() else {
            return;
        };
        let text = &mut line.text;
        number(text, "status", u64::from(response.status().as_u16()));
        let extensions = response.extensions_mut();
        if let Some(token) = extensions.remove::<TokenRecord>() {
            for (name, value) in [("iss", &token.iss), ("sub", &token.sub)] {
                if let Some(value) = value {
                    field(text, name, value);
                }
            }
            field(text, "kid", &token.kid);
            text.extend_from_slice(if token.cached {
                b",\"cached\":true"
            } else {
                b",\"cached\":false"
            });
        }
        if let Some(ErrorCode(code)) = extensions.get::<ErrorCode>() {
            field(text, "code", code);
        }
        match extensions.get::<AccessRule>() {
            Some(AccessRule(Some(index))) => number(text, "rule", *index as u64),
            Some(AccessRule(None)) => field(text, "rule", "default"),
            None => {}
        }
    }

    /// Counts a data frame of `len` bytes sent.
    pub(crate) fn sent(&mut self, len: usize) {
        if let Some(line) = self.line.as_mut() {
            line.bytes_out += len as u64;
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let Some(mut line) = self.line.take() else {
            return;
        };
        // The wall clock: a step back reads as 0.
        let elapsed = line.started.elapsed().unwrap_or_default();
        let duration = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        number(&mut line.text, "duration_us", duration);
        number(&mut line.text, "bytes_out", line.bytes_out);
        line.text.extend_from_slice(b"}\n");
        match self.shared.lines.try_send(line.text) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => self.shared.dropped.increment(1),
            // The writer is gone (it failed to write): nothing to count.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

/// One request's line, written as its parts become known.
struct Line {
    /// The JSON object so far (no closing brace yet).
    text: Vec<u8>,
    started: SystemTime,
    bytes_out: u64,
}

/// Appends `,"name":` and `value` as a JSON string (RFC 8259 §7).
fn field(out: &mut Vec<u8>, name: &str, value: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    // Most texts need no escape: written as they are.
    if value.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(value.as_bytes());
        out.push(b'"');
    } else {
        // Writing to a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, value);
    }
}

/// Appends `,"name":` and `value`.
fn number(out: &mut Vec<u8>, name: &str, value: u64) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// The writer thread's end, for [`AccessLog::finish`].
pub(crate) struct Writer {
    done: Receiver<()>,
}

impl AccessLog {
    /// Drops this handle and waits (at most 5 s) for the writer to write
    /// every queued line: call once every face has stopped (the faces'
    /// routers hold the other handles).
    pub(crate) fn finish(self, writer: Writer) {
        drop(self);
        if writer.done.recv_timeout(FINISH).is_err() {
            warn_line!("gateway serve: the access log's last lines may be lost (its writer did not finish)");
        }
    }
}

/// Whether `path` is the forward-auth `route` or under it.
fn under(path: &str, route: &str) -> bool {
    path.strip_prefix(route)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The original request of a forward-auth check at `route`, as the proxy
/// names it (module docs); the check's own where it names none.
fn original(
    own_method: &Method,
    own_path: &str,
    route: &str,
    headers: &HeaderMap,
) -> (Method, String) {
    let header = |name: &'static str| {
        headers
            .get(HeaderName::from_static(name))
            .and_then(|v| v.to_str().ok())
    };
    let path = header("x-original-uri")
        .or_else(|| header("x-forwarded-uri"))
        .map(|uri| uri.split_once('?').map_or(uri, |(path, _)| path).to_owned())
        .or_else(|| {
            own_path
                .strip_prefix(route)
                .filter(|rest| rest.len() > 1)
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "/".to_owned());
    let method = header("x-original-method")
        .or_else(|| header("x-forwarded-method"))
        .and_then(|m| Method::from_bytes(m.as_bytes()).ok())
        .unwrap_or_else(|| own_method.clone());
    (method, path)
}

/// The writer thread (module docs): every [`TICK`], every queued line
/// written to stdout, buffered, then flushed; until every sender is gone
/// and the queue is empty. A write error (stdout closed) ends it: the
/// queue then fills and lines are counted as dropped.
fn write_lines(queued: &Receiver<Vec<u8>>) {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());
    loop {
        let mut wrote = false;
        loop {
            match queued.try_recv() {
                Ok(text) => {
                    if out.write_all(&text).is_err() {
                        return;
                    }
                    wrote = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    let _ = out.flush();
                    return;
                }
            }
        }
        if wrote && out.flush().is_err() {
            return;
        }
        std::thread::sleep(TICK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object_with_only_the_fields_it_has() {
        let (lines, queued) = std::sync::mpsc::sync_channel(4);
        let log = AccessLog {
            shared: Arc::new(Shared {
                lines,
                dropped: metrics::counter!(ACCESS_LOG_DROPPED_TOTAL),
                client_address: ClientAddress::default(),
                forward_auth: Some("/auth".to_owned()),
            }),
        };
        let mut request = axum::http::Request::get("/auth/check")
            .header("x-original-uri", "/a\"b\\c?secret=1")
            .header("x-original-method", "DELETE")
            .body(())
            .unwrap();
        let mut pending = log.begin("public", &mut request, "203.0.113.9:4000".parse().unwrap());
        assert!(request.extensions().get::<RecordToken>().is_some());
        let mut response = axum::http::Response::builder()
            .status(403)
            .body(())
            .unwrap();
        let extensions = response.extensions_mut();
        extensions.insert(TokenRecord {
            iss: Some("https://idp.example".to_owned()),
            sub: None,
            kid: "k1".to_owned(),
            cached: true,
        });
        extensions.insert(ErrorCode("insufficient_scope"));
        extensions.insert(AccessRule(None));
        pending.answered(&mut response);
        pending.sent(50);
        pending.sent(7);
        drop(pending);
        let out = queued.try_recv().expect("queued at the body's end");
        assert!(out.ends_with(b"}\n"));
        let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(value["method"], "DELETE");
        assert_eq!(value["path"], "/a\"b\\c");
        assert_eq!(value["status"], 403);
        assert_eq!(value["bytes_out"], 57);
        assert!(value["duration_us"].as_u64().is_some());
        assert_eq!(value["client"], "203.0.113.9");
        assert_eq!(value["face"], "public");
        assert_eq!(value["iss"], "https://idp.example");
        assert!(value.get("sub").is_none());
        assert_eq!(value["kid"], "k1");
        assert_eq!(value["cached"], true);
        assert_eq!(value["code"], "insufficient_scope");
        assert_eq!(value["rule"], "default");
        assert_eq!(value["ts"].as_str().map(str::len), Some(27));
    }
}
