//! `serve`'s secrets: the admin face's bearer secret (`--admin-token-file`,
//! or one generated at every start), the master key
//! (`--master-key-file`) and a PKCS#11 token's PIN (`--pkcs11-pin-file`). Every secret file is checked once opened
//! ([`read_secret`]: owner, permissions) and read into a buffer sized once
//! and wiped on drop; the admin secret stays in one.
//!
//! Invariant: the admin face always authenticates its clients: by a
//! secret, or by their certificates (`--admin-client-ca`, mutual TLS). Without
//! `--admin-token-file` or `--admin-client-ca` (allowed on a loopback address only), [`generate`]
//! makes 32 random bytes, written as 64 hex characters to a new file
//! (mode 0600) in a new private directory (mode 0700) under the system's
//! temporary directory, which is removed when `serve` stops.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kms::core::root::{MasterKeyBytes, MASTER_KEY_LEN};
use zeroize::Zeroizing;

use crate::config::AdminSettings;

/// Random bytes in a generated admin secret (256 bits).
const GENERATED_BYTES: usize = 32;

/// The shortest admin secret `--admin-token-file` may hold (bytes).
pub(crate) const MIN_ADMIN_SECRET: usize = 32;

/// The largest secret file read (bytes).
const MAX_SECRET_FILE: usize = 64 * 1024;

/// The admin face's bearer secret, and the private directory of a
/// generated one (removed with it).
pub(crate) struct AdminSecret {
    /// Wiped when the last reference goes.
    pub(crate) token: Arc<Zeroizing<Vec<u8>>>,
    /// Where a generated secret was written; `None` for a secret from
    /// `--admin-token-file`.
    pub(crate) generated: Option<PathBuf>,
    /// Kept to the end of `serve`: dropping it removes the directory.
    _dir: Option<tempfile::TempDir>,
}

/// Reads `--admin-token-file` when given ([`read_secret`]); `Ok(None)`
/// when the secret is to be generated ([`generate`], after the store is
/// opened) or client certificates stand in for it (the configuration
/// allows either only on a loopback `--admin-listen` or with
/// `--admin-client-ca`).
///
/// # Errors
/// The file's refusals ([`read_secret`]); a secret that is not visible
/// ASCII or is shorter than [`MIN_ADMIN_SECRET`] bytes once surrounding
/// whitespace is trimmed.
pub(crate) fn admin_token_file(admin: &AdminSettings) -> Result<Option<AdminSecret>, String> {
    let Some(path) = &admin.token_file else {
        return Ok(None);
    };
    let text = read_secret(path, "--admin-token-file", admin.allow_group)?;
    let token = text.trim_ascii();
    if token.is_empty() {
        return Err(format!("--admin-token-file {} is empty", path.display()));
    }
    // It travels in an Authorization header: visible ASCII only.
    if !token.iter().all(|b| (0x21..=0x7e).contains(b)) {
        return Err(format!(
            "--admin-token-file {}: the secret must be visible ASCII (no spaces or binary \
             bytes): it is sent as a bearer token",
            path.display()
        ));
    }
    if token.len() < MIN_ADMIN_SECRET {
        return Err(format!(
            "--admin-token-file {}: the secret is {} bytes; at least {MIN_ADMIN_SECRET} are \
             needed (e.g. head -c 32 /dev/urandom | xxd -p -c 64)",
            path.display(),
            token.len()
        ));
    }
    Ok(Some(AdminSecret {
        token: Arc::new(Zeroizing::new(token.to_vec())),
        generated: None,
        _dir: None,
    }))
}

/// Generates the admin secret (module docs) and writes it to
/// `<tmp>/kms-gateway-XXXXXX/admin-secret`.
///
/// # Errors
/// The system's entropy source or the file system failing, as text.
pub(crate) fn generate() -> Result<AdminSecret, String> {
    let what = |e: &dyn std::fmt::Display| format!("generating the admin secret: {e}");
    let mut bytes = Zeroizing::new([0u8; GENERATED_BYTES]);
    getrandom::fill(bytes.as_mut_slice()).map_err(|e| what(&e))?;
    let mut text = Zeroizing::new([0u8; 2 * GENERATED_BYTES]);
    hex::encode_to_slice(bytes.as_slice(), text.as_mut_slice()).map_err(|e| what(&e))?;
    let mut builder = tempfile::Builder::new();
    builder.prefix("kms-gateway-");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o700));
    }
    let dir = builder.tempdir().map_err(|e| what(&e))?;
    let path = dir.path().join("admin-secret");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&path).map_err(|e| what(&e))?;
    file.write_all(text.as_slice())
        .and_then(|()| file.write_all(b"\n"))
        .map_err(|e| what(&e))?;
    Ok(AdminSecret {
        token: Arc::new(Zeroizing::new(text.to_vec())),
        generated: Some(path),
        _dir: Some(dir),
    })
}

/// Reads the master key file ([`read_secret`]): 64 hex characters (a
/// trailing newline is fine).
///
/// # Errors
/// The file's refusals; anything but 64 hex characters (the message never
/// repeats the file's text).
pub(crate) fn master_key(path: &Path, allow_group: bool) -> Result<MasterKeyBytes, String> {
    let what = |e: &dyn std::fmt::Display| format!("--master-key-file {}: {e}", path.display());
    let text = read_secret(path, "--master-key-file", allow_group)?;
    let hex_text = text.trim_ascii_end();
    let mut bytes = Zeroizing::new([0u8; MASTER_KEY_LEN]);
    // hex's error names the offending character: a byte of the secret.
    hex::decode_to_slice(hex_text, bytes.as_mut_slice())
        .map_err(|_| what(&"expected 64 hex characters"))?;
    Ok(bytes)
}

/// Reads a PIN file (`flag`: `--pkcs11-pin-file`, `--to-pkcs11-pin-file`;
/// [`read_secret`]): the PIN, UTF-8, without
/// one trailing newline (`\n` or `\r\n`), into a buffer of exactly its
/// length that cryptoki wipes on drop.
///
/// # Errors
/// The file's refusals; an empty PIN, or one that is not UTF-8.
pub(crate) fn pkcs11_pin(
    path: &Path,
    flag: &str,
    allow_group: bool,
) -> Result<kms::pkcs11::AuthPin, String> {
    let what = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
    let text = read_secret(path, flag, allow_group)?;
    let pin = without_line_end(&text);
    if pin.is_empty() {
        return Err(what(&"is empty"));
    }
    let pin = std::str::from_utf8(pin).map_err(|_| what(&"is not UTF-8"))?;
    // Boxed at its length: no reallocation leaves a copy behind.
    Ok(kms::pkcs11::AuthPin::from(Box::<str>::from(pin)))
}

/// `text` without one trailing line end, `\n` or `\r\n`; a lone `\r` is
/// kept (it is part of the secret).
fn without_line_end(text: &[u8]) -> &[u8] {
    match text.strip_suffix(b"\n") {
        Some(line) => line.strip_suffix(b"\r").unwrap_or(line),
        None => text,
    }
}

/// Reads a secret file whole into a buffer sized once and wiped on drop,
/// after checking the opened file (`fstat`, so a swap between the check
/// and the read cannot pass): a regular file of at most
/// [`MAX_SECRET_FILE`] bytes, owned by this process's effective user or
/// root, with no permission for other users, never writable by its group,
/// and readable by its group only when `allow_group` (for Kubernetes,
/// whose secret volumes are group-readable root-owned files behind
/// symbolic links, which are followed).
///
/// # Errors
/// A message naming `flag`, the path and what is wrong (with the `chmod`
/// that fixes it); the I/O errors.
pub(crate) fn read_secret(
    path: &Path,
    flag: &str,
    allow_group: bool,
) -> Result<Zeroizing<Vec<u8>>, String> {
    let what = |e: &dyn std::fmt::Display| format!("{flag} {}: {e}", path.display());
    let (mut file, metadata) = crate::files::open_owned(path, &what)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mode = metadata.mode() & 0o777;
        if mode & 0o007 != 0 {
            return Err(what(&format!(
                "has permissions for every user (mode {mode:04o}); chmod o-rwx it"
            )));
        }
        if mode & 0o020 != 0 {
            return Err(what(&format!(
                "is writable by its group (mode {mode:04o}); chmod g-w it"
            )));
        }
        if mode & 0o070 != 0 && !allow_group {
            return Err(what(&format!(
                "is readable by its group (mode {mode:04o}); chmod g-rwx it, or pass \
                 --allow-group-readable-secrets"
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = allow_group;
    let len = usize::try_from(metadata.len()).unwrap_or(usize::MAX);
    if len > MAX_SECRET_FILE {
        return Err(what(&format!("is over {MAX_SECRET_FILE} bytes")));
    }
    let mut text = Zeroizing::new(vec![0u8; len]);
    file.read_exact(&mut text).map_err(|e| what(&e))?;
    let mut more = [0u8; 1];
    if file.read(&mut more).map_err(|e| what(&e))? != 0 {
        return Err(what(&"changed while it was read"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::without_line_end;

    #[test]
    fn one_line_end_is_dropped_and_a_lone_carriage_return_kept() {
        assert_eq!(without_line_end(b"1234\n"), b"1234");
        assert_eq!(without_line_end(b"1234\r\n"), b"1234");
        assert_eq!(without_line_end(b"1234\r"), b"1234\r");
        assert_eq!(without_line_end(b"1234\n\n"), b"1234\n");
        assert_eq!(without_line_end(b"1234"), b"1234");
    }
}
