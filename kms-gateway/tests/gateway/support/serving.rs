//! `gateway serve` as a child process: started on loopback ports it
//! picks (port 0), driven over real sockets with one HTTP/1.1 request per
//! connection, stopped by SIGTERM. Shared by the tests that run it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The deadline that catches a hang.
pub const HANG: Duration = Duration::from_secs(60);

/// The `kms-gateway` binary, built by `cargo test` for this test.
pub fn gateway() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_kms-gateway"))
}

/// `kms-gateway serve` with both faces on loopback port 0, not started:
/// add flags, then [`run_to_exit`].
pub fn serve_command() -> Command {
    let mut command = Command::new(gateway());
    command.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    command
}

/// The claim headers the forward-auth and proxy tests ask for, and the
/// clock skew they allow (none: an expired token is refused at once).
pub const CLAIM_HEADERS: [&str; 6] = [
    "--claim-header",
    "sub=X-Auth-Subject",
    "--claim-header",
    "roles=X-Auth-Roles",
    "--leeway",
    "0",
];

/// Now, in whole seconds since the Unix epoch.
pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

/// `token` with one character of its signature changed: a forgery.
pub fn forged(token: &str) -> String {
    let mut bytes = token.as_bytes().to_vec();
    let last = bytes.len() - 5;
    bytes[last] = if bytes[last] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).expect("ascii")
}

/// Runs `command` to its exit, killed past [`HANG`] (a hang fails the
/// test): the exit code, stdout and stderr, both read as they come.
pub fn run_to_exit(mut command: Command) -> (i32, String, String) {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the gateway");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{command:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (
        status.code().expect("exit code"),
        stdout.join().expect("stdout reader"),
        stderr.join().expect("stderr reader"),
    )
}

/// `pipe`'s lines as they come, read on a thread of their own until the
/// pipe closes (or the receiver is gone).
fn lines_of(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// A running `gateway serve` and its two faces.
pub struct Serving {
    pub child: Child,
    pub public: SocketAddr,
    pub admin: SocketAddr,
    /// The admin secret: the one it generated (read from the file it
    /// named), or `None` when the test gave `--admin-token-file`.
    pub admin_secret: Option<String>,
    /// The rest of its stderr, line by line.
    pub lines: mpsc::Receiver<String>,
    /// Its stdout (the access log), line by line.
    pub stdout: mpsc::Receiver<String>,
    /// Its stderr lines before the line with the addresses.
    pub early: Vec<String>,
}

impl Serving {
    pub fn start(args: &[&str]) -> Serving {
        Serving::start_with_env(args, &[])
    }

    pub fn start_with_env(args: &[&str], env: &[(&str, &str)]) -> Serving {
        Serving::start_wrapped(&[], args, env)
    }

    /// Starts it through `wrapper` (a command that ends by running its
    /// arguments, as `sh -c '...; exec "$@"' sh` does), or directly when
    /// `wrapper` is empty.
    pub fn start_wrapped(wrapper: &[&str], args: &[&str], env: &[(&str, &str)]) -> Serving {
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(gateway());
                command
            }
            None => Command::new(gateway()),
        };
        let mut child = command
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn gateway serve");
        let stdout = lines_of(child.stdout.take().expect("stdout"));
        let lines = lines_of(child.stderr.take().expect("stderr"));
        let mut early = Vec::new();
        let line = loop {
            let line = lines.recv_timeout(HANG).unwrap_or_else(|e| {
                panic!("gateway serve did not log its addresses ({e}); it said {early:?}")
            });
            if line.contains("public face on") {
                break line;
            }
            early.push(line);
        };
        let addr = |face: &str| -> SocketAddr {
            let rest = line
                .split(&format!("{face} face on "))
                .nth(1)
                .and_then(|r| {
                    r.strip_prefix("http://")
                        .or_else(|| r.strip_prefix("https://"))
                })
                .unwrap_or_else(|| panic!("no {face} address in {line:?}"));
            rest.split([',', ' '])
                .next()
                .expect("address")
                .parse()
                .expect("socket address")
        };
        let admin_secret = early
            .iter()
            .find_map(|l| l.strip_prefix("gateway serve: admin secret in "))
            .map(|path| {
                std::fs::read_to_string(path)
                    .unwrap_or_else(|e| panic!("read the admin secret at {path}: {e}"))
                    .trim()
                    .to_owned()
            });
        Serving {
            public: addr("public"),
            admin: addr("admin"),
            admin_secret,
            child,
            lines,
            stdout,
            early,
        }
    }

    /// The kids the public face's JWKS lists, in its order.
    pub fn kids(&self) -> Vec<String> {
        let (status, body) = http(self.public, "GET", "/.well-known/jwks.json", &[], "");
        assert_eq!(status, 200, "{body}");
        json(&body)["keys"]
            .as_array()
            .expect("keys")
            .iter()
            .map(|k| k["kid"].as_str().expect("kid").to_owned())
            .collect()
    }

    /// `GET /whoami` on the public face with `token` as the bearer: the
    /// status and body.
    pub fn whoami(&self, token: &str) -> (u16, String) {
        let (status, _, body) = self.get_with("/whoami", &format!("Bearer {token}"));
        (status, body)
    }

    /// `GET path` on the public face with `Authorization: {authorization}`:
    /// the status, the answer's header lines and its body.
    pub fn get_with(&self, path: &str, authorization: &str) -> (u16, Vec<String>, String) {
        http_full(
            self.public,
            "GET",
            path,
            &[("Authorization", authorization)],
            "",
        )
    }

    /// A request to the admin face as an operator sends it: its secret as
    /// the bearer token, and for a `POST` the JSON `body` (`{}` when
    /// empty) as `application/json`.
    pub fn admin(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let secret = self
            .admin_secret
            .as_deref()
            .expect("a generated admin secret");
        admin_http(self.admin, secret, method, path, body)
    }

    /// A token minted by the admin face (`POST /tokens`) with `claims`
    /// (a JSON object).
    pub fn mint(&self, claims: &str) -> String {
        let (status, body) = self.admin("POST", "/tokens", claims);
        assert_eq!(status, 200, "{body}");
        json(&body)["token"].as_str().expect("token").to_owned()
    }

    /// Where the generated admin secret is.
    pub fn secret_path(&self) -> PathBuf {
        self.early
            .iter()
            .find_map(|l| l.strip_prefix("gateway serve: admin secret in "))
            .map(PathBuf::from)
            .expect("a generated admin secret")
    }

    /// SIGHUP, then the first stderr line after it that holds `about`
    /// (what the reload logged), within the deadline.
    pub fn hangup(&self, about: &str) -> String {
        let status = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        loop {
            let line = self
                .lines
                .recv_timeout(HANG)
                .unwrap_or_else(|e| panic!("no line about {about:?} after SIGHUP: {e}"));
            if line.contains(about) {
                return line;
            }
        }
    }

    /// Sends `signal` (`TERM`, `INT`, `HUP`) and returns at once.
    pub fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit (after a stop signal the test sent):
    /// its exit code and the rest of its stderr.
    pub fn exited(&mut self) -> (i32, Vec<String>) {
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let mut log = Vec::new();
                while let Ok(line) = self.lines.recv_timeout(HANG) {
                    log.push(line);
                }
                return (status.code().expect("exit code"), log);
            }
            assert!(started.elapsed() < HANG, "gateway serve did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// SIGTERM, then the exit status, within the deadline.
    pub fn stop(mut self) -> i32 {
        self.stop_in_place()
    }

    pub fn stop_in_place(&mut self) -> i32 {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success());
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                // The reader thread may lag the exit: take every line up
                // to end of file (the pipe is closed, so this ends).
                let mut log = Vec::new();
                while let Ok(line) = self.lines.recv_timeout(HANG) {
                    log.push(line);
                }
                assert!(log.iter().any(|l| l.contains("stopped")), "{log:?}");
                return status.code().expect("exit code");
            }
            assert!(started.elapsed() < HANG, "gateway serve did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serving {
    /// A failed assertion must not leave the server running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One HTTP/1.1 request on its own connection (`Host: ADDR` unless
/// `headers` has one): status and body.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let (status, _, body) = http_full(addr, method, path, headers, body);
    (status, body)
}

/// [`http`], with the answer's header lines (`name: value`) too.
pub fn http_full(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, Vec<String>, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(HANG)).expect("timeout");
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    // `Host: ADDR` unless the caller sends its own.
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request += &format!("Host: {addr}\r\n");
    }
    for (name, value) in headers {
        request += &format!("{name}: {value}\r\n");
    }
    request += "\r\n";
    request += body;
    stream.write_all(request.as_bytes()).expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let lines = head.lines().skip(1).map(str::to_owned).collect();
    (status, lines, body.to_owned())
}

/// [`Serving::admin`] with the admin face's address and `secret` given.
pub fn admin_http(
    addr: SocketAddr,
    secret: &str,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    let bearer = format!("Bearer {secret}");
    if method == "POST" {
        let body = if body.is_empty() { "{}" } else { body };
        http(
            addr,
            method,
            path,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            body,
        )
    } else {
        http(addr, method, path, &[("Authorization", &bearer)], body)
    }
}

/// Polls `GET /readyz` on `addr` until it answers `wanted`, failing past
/// `deadline`: the time it took and the last body.
pub fn readyz_until(addr: SocketAddr, wanted: u16, deadline: Duration) -> (Duration, String) {
    let started = Instant::now();
    loop {
        let (status, body) = http(addr, "GET", "/readyz", &[], "");
        if status == wanted {
            return (started.elapsed(), body);
        }
        assert!(
            started.elapsed() < deadline,
            "/readyz stayed {status} ({body}), not {wanted}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body:?}"))
}
