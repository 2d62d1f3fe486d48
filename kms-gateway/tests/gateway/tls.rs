//! TLS on both faces of `gateway serve` (`--tls-cert`/`--tls-key`,
//! `--admin-tls-cert`/`--admin-tls-key`, `--admin-client-ca`), with
//! certificates the test makes (rcgen): `curl` (installed by `.ci/run`)
//! and a rustls client connect; a certificate replaced on disk, or on
//! SIGHUP, is served to the next connection while an open one keeps
//! working; the admin face refuses a client without a certificate and one
//! with a certificate from another CA. Deadlines only catch hangs.
#![cfg(unix)]

use crate::support::serving;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serving::{Serving, HANG};

/// Writes `text` to `dir/name` with `mode`.
fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    path
}

/// A CA that signs leaf certificates.
struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().expect("key");
        let pem = params.self_signed(&key).expect("CA").pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    fn pem(&self) -> String {
        self.pem.clone()
    }

    /// A leaf for localhost and 127.0.0.1: (certificate PEM, key PEM).
    fn leaf(&self, name: &str) -> (String, String) {
        let mut params = CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        params.distinguished_name.push(DnType::CommonName, name);
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().expect("ip")));
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem())
    }
}

/// Replaces `dir/name` atomically (a rename, as secret managers do).
fn replace(dir: &Path, name: &str, text: &str, mode: u32) {
    let staged = write(dir, &format!(".{name}.new"), text, mode);
    std::fs::rename(staged, dir.join(name)).expect("rename");
}

/// A rustls client trusting `ca`, without session resumption.
fn client_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("ca") {
        roots.add(cert.expect("cert")).expect("root");
    }
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    // A full handshake every time: a resumed session shows the
    // certificate of the session it resumes, not the one in force.
    config.resumption = rustls::client::Resumption::disabled();
    Arc::new(config)
}

/// A TLS connection to `addr` (as `localhost`).
type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

fn connect(config: &Arc<rustls::ClientConfig>, addr: SocketAddr) -> Tls {
    let name = ServerName::try_from("localhost").expect("name");
    let connection = rustls::ClientConnection::new(Arc::clone(config), name).expect("client");
    let socket = TcpStream::connect(addr).expect("connect");
    socket.set_read_timeout(Some(HANG)).expect("timeout");
    let mut tls = rustls::StreamOwned::new(connection, socket);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock).expect("handshake");
    }
    tls
}

/// The certificate the server presented.
fn served(tls: &Tls) -> Vec<u8> {
    tls.conn.peer_certificates().expect("certificates")[0].to_vec()
}

/// `GET /healthz` on an open keep-alive connection: the status.
fn healthz(tls: &mut Tls) -> u16 {
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .expect("write");
    // The answer is small: read until its JSON body has ended.
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    while !answer.ends_with(b"}") {
        let n = tls.read(&mut buf).expect("read");
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&answer);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("status")
}

fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .expect("pem")
        .to_vec()
}

/// `curl` with `args` against `url`: (exit code, body).
fn curl(args: &[&str], url: &str) -> (i32, String) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "30"])
        .args(args)
        .arg(url)
        .output()
        .expect("curl (installed by .ci/run)");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// Waits for a stderr line containing `text`.
fn wait_for_line(s: &Serving, text: &str) -> String {
    let started = Instant::now();
    loop {
        let left = HANG.saturating_sub(started.elapsed());
        let line = s
            .lines
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no line with {text:?}: {e}"));
        if line.contains(text) {
            return line;
        }
    }
}

#[test]
fn both_faces_serve_tls_rotate_certificates_and_the_admin_face_checks_clients() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let ca = Ca::new("kms test CA");
    let other = Ca::new("another CA");
    let ca_file = write(d, "ca.crt", &ca.pem(), 0o644);
    let (cert, key) = ca.leaf("gateway");
    write(d, "public.crt", &cert, 0o644);
    write(d, "public.key", &key, 0o600);
    let (admin_cert, admin_key) = ca.leaf("gateway admin");
    write(d, "admin.crt", &admin_cert, 0o644);
    write(d, "admin.key", &admin_key, 0o600);
    let (client_cert, client_key) = ca.leaf("operator");
    write(d, "client.crt", &client_cert, 0o644);
    write(d, "client.key", &client_key, 0o600);
    let (stranger_cert, stranger_key) = other.leaf("stranger");
    write(d, "stranger.crt", &stranger_cert, 0o644);
    write(d, "stranger.key", &stranger_key, 0o600);
    let path = |name: &str| d.join(name).to_str().expect("utf-8").to_owned();

    let s = Serving::start(&[
        "--tls-cert",
        &path("public.crt"),
        "--tls-key",
        &path("public.key"),
        "--admin-tls-cert",
        &path("admin.crt"),
        "--admin-tls-key",
        &path("admin.key"),
        "--admin-client-ca",
        &path("ca.crt"),
        "--header-timeout",
        "2",
    ]);
    // Client certificates stand in for the admin secret.
    assert!(s.admin_secret.is_none(), "{:?}", s.early);

    // curl, TLS 1.3 and 1.2; nothing older.
    let public = format!("https://127.0.0.1:{}/healthz", s.public.port());
    let ca_arg = path("ca.crt");
    for version in [
        ["--tlsv1.3", "--tls-max", "1.3"],
        ["--tlsv1.2", "--tls-max", "1.2"],
    ] {
        let mut args = vec!["--cacert", &ca_arg];
        args.extend(version);
        let (code, body) = curl(&args, &public);
        assert_eq!(
            (code, body.as_str()),
            (0, r#"{"status":"ok"}"#),
            "{version:?}"
        );
    }
    let (code, _) = curl(
        &["--cacert", &ca_arg, "--tlsv1.1", "--tls-max", "1.1"],
        &public,
    );
    assert_ne!(code, 0, "TLS 1.1 must be refused");
    // Plain HTTP on the TLS face gets no answer.
    let (code, _) = curl(
        &[],
        &format!("http://127.0.0.1:{}/healthz", s.public.port()),
    );
    assert_ne!(code, 0);

    // The admin face: a client certificate from the CA, and nothing else.
    let metrics = format!("https://127.0.0.1:{}/metrics", s.admin.port());
    let (client_crt, client_k) = (path("client.crt"), path("client.key"));
    let (code, body) = curl(
        &[
            "--cacert",
            &ca_arg,
            "--cert",
            &client_crt,
            "--key",
            &client_k,
        ],
        &metrics,
    );
    assert_eq!(code, 0, "{body}");
    assert!(body.contains("kms_build_info"), "{body}");
    let (code, _) = curl(&["--cacert", &ca_arg], &metrics);
    assert_ne!(code, 0, "no client certificate must be refused");
    let (stranger_crt, stranger_k) = (path("stranger.crt"), path("stranger.key"));
    let (code, _) = curl(
        &[
            "--cacert",
            &ca_arg,
            "--cert",
            &stranger_crt,
            "--key",
            &stranger_k,
        ],
        &metrics,
    );
    assert_ne!(code, 0, "another CA's certificate must be refused");

    // A rustls client; the certificate replaced on disk is served to the
    // next connection, while the open one keeps working.
    let config = client_config(&ca_file);
    let mut open = connect(&config, s.public);
    assert_eq!(served(&open), der(&cert));
    assert_eq!(healthz(&mut open), 200);
    let (cert2, key2) = ca.leaf("gateway, rotated");
    replace(d, "public.key", &key2, 0o600);
    replace(d, "public.crt", &cert2, 0o644);
    wait_for_line(&s, "reloaded --tls-cert");
    // The watcher may have seen the key before the certificate: wait for
    // the pair to be in force.
    let started = Instant::now();
    loop {
        let mut next = connect(&config, s.public);
        if served(&next) == der(&cert2) {
            assert_eq!(healthz(&mut next), 200);
            break;
        }
        assert!(
            started.elapsed() < HANG,
            "the new certificate is never served"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(healthz(&mut open), 200);
    assert_eq!(served(&open), der(&cert));

    // A bad pair on disk (a key of another certificate) is refused and
    // the old pair stays; SIGHUP reloads too.
    let (cert3, key3) = ca.leaf("gateway, third");
    replace(d, "public.crt", &cert3, 0o644);
    wait_for_line(&s, "TLS reload refused");
    assert_eq!(served(&connect(&config, s.public)), der(&cert2));
    replace(d, "public.key", &key3, 0o600);
    wait_for_line(&s, "(changed on disk)");
    // SIGHUP reloads too (the files are unchanged since).
    let line = s.hangup("(SIGHUP)");
    assert!(line.contains("reloaded --tls-cert"), "{line}");
    assert_eq!(served(&connect(&config, s.public)), der(&cert3));

    // A TCP client that never starts its handshake is closed at the
    // header timeout (2 s).
    let mut idle = TcpStream::connect(s.public).expect("connect");
    idle.set_read_timeout(Some(HANG)).expect("timeout");
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let read = idle.read(&mut byte);
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(20),
        "{took:?}"
    );

    assert_eq!(s.stop(), 0);
}

#[test]
fn a_key_that_does_not_match_its_certificate_or_a_readable_key_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let ca = Ca::new("kms test CA");
    let (cert, _) = ca.leaf("a");
    let (_, other_key) = ca.leaf("b");
    let (_, key) = ca.leaf("c");
    let cert = write(d, "a.crt", &cert, 0o644);
    let wrong = write(d, "b.key", &other_key, 0o600);
    let readable = write(d, "c.key", &key, 0o644);
    for (key, why) in [(&wrong, "does not match"), (&readable, "every user")] {
        let mut command = serving::serve_command();
        command
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(key);
        let (code, _, stderr) = serving::run_to_exit(command);
        assert_eq!(code, 1, "{why}: {stderr}");
        assert!(stderr.contains("--tls-"), "{why}: {stderr}");
    }
    // --tls-cert alone is a usage error.
    let mut command = Command::new(serving::gateway());
    command.args(["serve", "--tls-cert"]).arg(&cert);
    assert_eq!(serving::run_to_exit(command).0, 2);
}
