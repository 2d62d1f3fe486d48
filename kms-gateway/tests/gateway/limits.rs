//! `gateway serve`'s connection limits over real sockets: the header
//! timeout cuts off a slow client (slowloris) while others are answered,
//! idle keep-alive connections live to the idle timeout (not the header
//! timeout), connections past `--max-connections` wait in the backlog,
//! and the soft open-files limit is raised to the hard one. Deadlines
//! only catch hangs; the timeouts under test are a second or two.
#![cfg(target_os = "linux")]

use crate::support::serving;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serving::{http, Serving, HANG};

/// A keep-alive connection, driven by hand.
struct Client(TcpStream);

impl Client {
    fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(HANG)).expect("timeout");
        Client(stream)
    }

    /// Sends a whole keep-alive `GET /healthz` and reads its answer.
    fn healthz(&mut self, addr: SocketAddr) -> u16 {
        let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        self.0.write_all(request.as_bytes()).expect("write");
        self.answer()
    }

    /// Reads one answer (headers and its `Content-Length` body): the status.
    fn answer(&mut self) -> u16 {
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match self.0.read(&mut byte) {
                Ok(1) => head.push(byte[0]),
                other => panic!("the connection ended in an answer's head: {other:?}"),
            }
        }
        let head = String::from_utf8(head).expect("utf-8");
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        let mut body = vec![0u8; length];
        self.0.read_exact(&mut body).expect("body");
        head.split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status")
    }

    /// Waits until the server closes the connection (with nothing more to
    /// read); how long that took.
    fn closed_after(&mut self, since: Instant) -> Duration {
        let mut rest = Vec::new();
        match self.0.read_to_end(&mut rest) {
            Ok(_) => assert!(rest.is_empty(), "unexpected bytes: {rest:?}"),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
            Err(e) => panic!("the connection was not closed: {e}"),
        }
        since.elapsed()
    }
}

#[test]
fn a_slow_client_is_cut_off_at_the_header_timeout_while_others_are_answered() {
    let s = Serving::start(&["--header-timeout", "1", "--idle-timeout", "30"]);
    // Nothing at all after connecting: closed from accept.
    let mut silent = Client::connect(s.public);
    let since = Instant::now();
    // One header byte every 100 ms, never the end of the head.
    let mut slow = Client::connect(s.public);
    let slow_since = Instant::now();
    let mut writer = slow.0.try_clone().expect("clone");
    let dripping = std::thread::spawn(move || {
        for byte in b"GET /healthz HTTP/1.1\r\nX-Slow: "
            .iter()
            .chain([b'a'; 200].iter())
        {
            if writer.write_all(&[*byte]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    });
    // Meanwhile other clients are answered, each well within the slow
    // one's header timeout (a hang would show here).
    for _ in 0..5 {
        let asked = Instant::now();
        assert_eq!(http(s.public, "GET", "/healthz", &[], "").0, 200);
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{:?}",
            asked.elapsed()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = slow.closed_after(slow_since);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(10),
        "the slow client was closed after {took:?}"
    );
    assert!(
        dripping.join().expect("writer"),
        "its writes failed once closed"
    );
    let took = silent.closed_after(since);
    assert!(took >= Duration::from_millis(900), "{took:?}");
    // The face still answers.
    assert_eq!(http(s.public, "GET", "/healthz", &[], "").0, 200);
    assert_eq!(s.stop(), 0);
}

#[test]
fn keep_alive_connections_live_to_the_idle_timeout_not_the_header_timeout() {
    let s = Serving::start(&["--header-timeout", "1", "--idle-timeout", "2"]);
    let mut client = Client::connect(s.public);
    assert_eq!(client.healthz(s.public), 200);
    // Idle past the header timeout, within the idle timeout: still open.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(client.healthz(s.public), 200);
    // Then idle past the idle timeout: closed.
    let since = Instant::now();
    let took = client.closed_after(since);
    assert!(
        took >= Duration::from_millis(1900) && took < Duration::from_secs(10),
        "closed after {took:?}"
    );
    // A later request's head has the header timeout from its first byte.
    let mut slow = Client::connect(s.public);
    assert_eq!(slow.healthz(s.public), 200);
    slow.0.write_all(b"GET /hea").expect("write");
    let since = Instant::now();
    let took = slow.closed_after(since);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(1900),
        "a half-sent head was closed after {took:?}, not at the header timeout"
    );
    assert_eq!(s.stop(), 0);
}

#[test]
fn connections_past_the_limit_wait_in_the_backlog_while_none_is_idle() {
    let s = Serving::start(&["--max-connections", "2", "--idle-timeout", "30"]);
    let mut first = Client::connect(s.public);
    let mut second = Client::connect(s.public);
    assert_eq!(first.healthz(s.public), 200);
    assert_eq!(second.healthz(s.public), 200);
    // Both busy: each has sent part of its next request.
    first.0.write_all(b"GET /hea").expect("write");
    second.0.write_all(b"GET /hea").expect("write");
    std::thread::sleep(Duration::from_millis(100));
    // A third connects (the kernel's backlog) but is not served...
    let mut third = Client::connect(s.public);
    third
        .0
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("timeout");
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {}\r\n\r\n", s.public);
    third.0.write_all(request.as_bytes()).expect("write");
    let mut byte = [0u8; 1];
    let early = third.0.read(&mut byte);
    assert!(
        matches!(&early, Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)),
        "answered past the limit: {early:?}"
    );
    // ...until a slot frees.
    drop(first);
    third.0.set_read_timeout(Some(HANG)).expect("timeout");
    assert_eq!(third.answer(), 200);
    second
        .0
        .write_all(b"lthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    assert_eq!(second.answer(), 200);
    assert_eq!(s.stop(), 0);
}

/// At the cap, a new client is served in the slot of the keep-alive
/// connection idle the longest, which is closed; busy ones are not.
#[test]
fn at_the_cap_the_longest_idle_connection_makes_room() {
    let s = Serving::start(&["--max-connections", "3", "--idle-timeout", "30"]);
    let mut oldest = Client::connect(s.public);
    assert_eq!(oldest.healthz(s.public), 200);
    std::thread::sleep(Duration::from_millis(50));
    let mut busy = Client::connect(s.public);
    assert_eq!(busy.healthz(s.public), 200);
    // Busy, and idle before the newer one below: not chosen.
    busy.0.write_all(b"GET /hea").expect("write");
    std::thread::sleep(Duration::from_millis(50));
    let mut newer = Client::connect(s.public);
    assert_eq!(newer.healthz(s.public), 200);
    let mut third = Client::connect(s.public);
    assert_eq!(third.healthz(s.public), 200, "served at the cap");
    // The oldest idle one was closed to make room.
    let since = Instant::now();
    oldest.closed_after(since);
    assert_eq!(newer.healthz(s.public), 200);
    busy.0
        .write_all(b"lthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    assert_eq!(busy.answer(), 200);
    assert_eq!(s.stop(), 0);
}

/// Past `--max-connections-per-ip`, a connection is closed before a byte
/// is read and counted; a `--trusted-proxy` peer has no such limit.
#[test]
fn one_address_holds_at_most_its_share_of_connections() {
    let s = Serving::start(&["--max-connections-per-ip", "2"]);
    let mut first = Client::connect(s.public);
    let mut second = Client::connect(s.public);
    assert_eq!(first.healthz(s.public), 200);
    assert_eq!(second.healthz(s.public), 200);
    let mut over = Client::connect(s.public);
    let since = Instant::now();
    over.closed_after(since);
    let (_, metrics) = s.admin("GET", "/metrics", "");
    assert!(
        metrics.contains(r#"kms_connections_refused_total{face="public",reason="per_ip"} 1"#),
        "{metrics}"
    );
    // One closes: another may come.
    drop(first);
    std::thread::sleep(Duration::from_millis(100));
    let mut next = Client::connect(s.public);
    assert_eq!(next.healthz(s.public), 200);
    assert_eq!(second.healthz(s.public), 200);
    assert_eq!(s.stop(), 0);

    let s = Serving::start(&[
        "--max-connections-per-ip",
        "2",
        "--trusted-proxy",
        "127.0.0.1",
    ]);
    let mut clients: Vec<Client> = (0..4).map(|_| Client::connect(s.public)).collect();
    for client in &mut clients {
        assert_eq!(client.healthz(s.public), 200);
    }
    assert_eq!(s.stop(), 0);
}

/// The soft `RLIMIT_NOFILE` is raised to the hard limit at start.
#[test]
fn the_open_files_limit_is_raised_to_the_hard_limit() {
    let s = Serving::start_wrapped(
        &["sh", "-c", "ulimit -Sn 256 && exec \"$@\"", "sh"],
        &[],
        &[],
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", s.child.id()))
        .expect("read /proc/PID/limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("the open-files line");
    let fields: Vec<&str> = line.split_whitespace().collect();
    // "Max open files  <soft>  <hard>  files"
    let (soft, hard) = (fields[3], fields[4]);
    assert_eq!(soft, hard, "{line}");
    assert_ne!(soft, "256", "{line}");
    assert_eq!(s.stop(), 0);
}

/// A client that sends requests and never reads the answers stalls the
/// server's writes; its connection is closed at the idle timeout after
/// the stall, so it cannot hold a slot (here the only one) forever.
#[test]
fn a_client_that_never_reads_its_answers_is_cut_off() {
    let s = Serving::start(&["--max-connections", "1", "--idle-timeout", "1"]);
    let stalled = Client::connect(s.public);
    let mut writer = stalled.0.try_clone().expect("clone");
    let addr = s.public;
    // Pipelined requests until the connection is closed (or the deadline
    // that catches a hang): the answers fill both sockets' buffers.
    let flooding = std::thread::spawn(move || {
        let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").repeat(64);
        let started = Instant::now();
        while started.elapsed() < HANG {
            if writer.write_all(request.as_bytes()).is_err() {
                return true;
            }
        }
        false
    });
    // The one slot frees once the stalled connection is cut: another
    // client is then served.
    let mut next = Client::connect(s.public);
    assert_eq!(next.healthz(s.public), 200);
    assert!(
        flooding.join().expect("writer"),
        "the stalled connection was closed"
    );
    drop(stalled);
    assert_eq!(s.stop(), 0);
}
