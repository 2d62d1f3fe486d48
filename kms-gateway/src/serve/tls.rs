//! TLS on a face (`--tls-cert`/`--tls-key` for the public face,
//! `--admin-tls-cert`/`--admin-tls-key` for the admin face): rustls with
//! the process's one crypto provider, aws-lc-rs, TLS 1.2 and 1.3 only,
//! ALPN `http/1.1` (the faces serve HTTP/1.1; HTTP/2 is not offered).
//!
//! * **Files:** PEM. The certificate file holds the chain, leaf first; the
//!   key file one private key (PKCS #8, PKCS #1 or SEC 1), a secret file
//!   checked as the others are (`secrets::read_secret`). A key that does
//!   not match the leaf's public key is refused.
//! * **Rotation:** [`Certificates::reload`] reads both files again and
//!   swaps the pair in whole, or keeps the old pair and says why; it runs
//!   when either file changes on disk ([`watch`], checked every
//!   [`WATCH_EVERY`]: modification time, size and inode, so an atomic
//!   rename is seen) and on SIGHUP. A handshake takes the pair in force
//!   when it starts; connections already open keep theirs.
//! * **Client certificates** (`--admin-client-ca FILE`, the admin face):
//!   every client must present a certificate that chains to one of the
//!   file's CA certificates (rustls's `WebPkiClientVerifier`); one without
//!   a certificate, or with one from another CA, fails the handshake.
//!
//! The handshake runs within the header timeout (`listener.rs`).

use crate::logging::{info_line, warn_line};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

use super::secrets;

/// How often the certificate and key files are checked for a change.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The most certificates a chain or CA file may hold.
const MAX_CERTS: usize = 64;

/// The process's crypto provider: aws-lc-rs (installed at start by
/// `main`; built here too so that a test of this module needs nothing
/// installed).
fn provider() -> Arc<CryptoProvider> {
    CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
}

/// A face's certificate and key files, and the pair in force.
#[derive(Debug)]
pub(crate) struct Certificates {
    cert: PathBuf,
    key: PathBuf,
    /// The flags' names, for messages (`--tls-cert`, `--admin-tls-cert`).
    flag: &'static str,
    allow_group: bool,
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certificates {
    /// Loads the pair of `cert` and `key` (module docs).
    ///
    /// # Errors
    /// A file that cannot be read, holds no certificate or no key, a key
    /// file that is not a safe secret file, or a key that does not match
    /// the certificate; each message names the flag and the file.
    pub(crate) fn load(
        cert: PathBuf,
        key: PathBuf,
        flag: &'static str,
        allow_group: bool,
    ) -> Result<Arc<Self>, String> {
        let pair = load_pair(&cert, &key, flag, allow_group)?;
        Ok(Arc::new(Certificates {
            cert,
            key,
            flag,
            allow_group,
            current: RwLock::new(Arc::new(pair)),
        }))
    }

    /// Reads both files again and swaps the new pair in; on an error the
    /// old pair stays in force.
    ///
    /// # Errors
    /// As [`Certificates::load`].
    pub(crate) fn reload(&self) -> Result<(), String> {
        let pair = load_pair(&self.cert, &self.key, self.flag, self.allow_group)?;
        match self.current.write() {
            Ok(mut current) => *current = Arc::new(pair),
            // A panic while swapping cannot leave a torn `Arc`: take it.
            Err(poisoned) => *poisoned.into_inner() = Arc::new(pair),
        }
        Ok(())
    }

    /// What identifies the files' contents on disk now (a change of any
    /// part means they may have changed).
    fn stamp(&self) -> [Option<(SystemTime, u64, u64)>; 2] {
        let one = |path: &Path| {
            let metadata = std::fs::metadata(path).ok()?;
            #[cfg(unix)]
            let inode = std::os::unix::fs::MetadataExt::ino(&metadata);
            #[cfg(not(unix))]
            let inode = 0;
            Some((metadata.modified().ok()?, metadata.len(), inode))
        };
        [one(&self.cert), one(&self.key)]
    }
}

impl ResolvesServerCert for Certificates {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let current = match self.current.read() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        Some(Arc::clone(&current))
    }
}

/// Reloads `certificates` whenever their files change on disk, until the
/// task is dropped; each outcome is one stderr line.
pub(crate) async fn watch(certificates: Arc<Certificates>) {
    let mut seen = certificates.stamp();
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let now = certificates.stamp();
        if now == seen {
            continue;
        }
        seen = now;
        report(&certificates, "changed on disk", certificates.reload());
    }
}

/// Says on stderr how a reload went, and `why` it ran.
pub(crate) fn report(certificates: &Certificates, why: &str, outcome: Result<(), String>) {
    match outcome {
        Ok(()) => info_line!(
            "gateway serve: reloaded {} {} ({why})",
            certificates.flag,
            certificates.cert.display()
        ),
        Err(e) => warn_line!("gateway serve: TLS reload refused, the old certificate stays: {e}"),
    }
}

fn load_pair(
    cert: &Path,
    key: &Path,
    flag: &str,
    allow_group: bool,
) -> Result<CertifiedKey, String> {
    let chain = read_certs(cert, flag)?;
    let key_flag = flag.replace("-cert", "-key");
    let text = secrets::read_secret(key, &key_flag, allow_group)?;
    let der = PrivateKeyDer::from_pem_slice(&text)
        .map_err(|e| format!("{key_flag} {}: no private key: {e}", key.display()))?;
    CertifiedKey::from_der(chain, der, &provider()).map_err(|e| {
        format!(
            "{flag} {} with {key_flag} {}: {e}",
            cert.display(),
            key.display()
        )
    })
}

/// Every certificate of a PEM file (at least one, at most [`MAX_CERTS`]).
fn read_certs(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    pem_certs(&pem, path, flag)
}

/// Every certificate of PEM text read from `path` (at least one, at most
/// [`MAX_CERTS`]).
fn pem_certs(pem: &[u8], path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let what = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
    let certs = CertificateDer::pem_slice_iter(pem)
        .take(MAX_CERTS + 1)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| what(&e))?;
    match certs.len() {
        0 => Err(what(&"holds no PEM certificate")),
        n if n > MAX_CERTS => Err(what(&format!("holds over {MAX_CERTS} certificates"))),
        _ => Ok(certs),
    }
}

/// The acceptor of a face serving `certificates`, asking clients for a
/// certificate that chains to `client_ca` when given.
///
/// # Errors
/// A CA file that cannot be read or holds no usable CA certificate; a
/// configuration rustls refuses.
pub(crate) fn acceptor(
    certificates: Arc<Certificates>,
    client_ca: Option<&Path>,
) -> Result<TlsAcceptor, String> {
    let provider = provider();
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let flag = "--admin-client-ca";
            let mut roots = RootCertStore::empty();
            let pem = crate::files::read_trusted(path, flag)?;
            for cert in pem_certs(&pem, path, flag)? {
                roots
                    .add(cert)
                    .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("{flag} {}: {e}", path.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(certificates);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
