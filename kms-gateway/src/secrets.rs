//! `serve`'s secrets: the admin face's bearer secret (`--admin-token-file`,
//! or one generated at every start) and the master key
//! (`--master-key-file`). A file that every user can read is refused, and
//! the master key's text is wiped after use.
//!
//! Invariant: the admin face always has a secret. Without
//! `--admin-token-file` (allowed on a loopback address only), [`generate`]
//! makes 32 random bytes, written as 64 hex characters to a new file
//! (mode 0600) in a new private directory (mode 0700) under the system's
//! temporary directory, which is removed when `serve` stops.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kms::core::seal::SealKey;
use zeroize::Zeroizing;

use crate::serve::ServeArgs;

/// Random bytes in a generated admin secret (256 bits).
const GENERATED_BYTES: usize = 32;

/// The admin face's bearer secret, and the private directory of a
/// generated one (removed with it).
pub(crate) struct AdminSecret {
    pub(crate) token: Arc<[u8]>,
    /// Where a generated secret was written; `None` for a secret from
    /// `--admin-token-file`.
    pub(crate) generated: Option<PathBuf>,
    /// Kept to the end of `serve`: dropping it removes the directory.
    _dir: Option<tempfile::TempDir>,
}

/// Reads `--admin-token-file` when given; `Ok(None)` when the secret is to
/// be generated ([`generate`], after the store is opened).
///
/// # Errors
/// A non-loopback `--admin-listen` without `--admin-token-file`; the
/// file's refusals (missing, readable by every user, empty).
pub(crate) fn admin_token_file(args: &ServeArgs) -> Result<Option<AdminSecret>, String> {
    let Some(path) = &args.admin_token_file else {
        if !args.admin_listen.ip().is_loopback() {
            return Err(format!(
                "--admin-listen {} is not a loopback address: the admin face issues tokens and \
                 rotates keys, so it needs --admin-token-file there",
                args.admin_listen
            ));
        }
        return Ok(None);
    };
    refuse_world_readable(path, "--admin-token-file")?;
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--admin-token-file {}: {e}", path.display()))?;
    let token = text.trim();
    if token.is_empty() {
        return Err(format!("--admin-token-file {} is empty", path.display()));
    }
    Ok(Some(AdminSecret {
        token: Arc::from(token.as_bytes()),
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
        token: Arc::from(text.as_slice()),
        generated: Some(path),
        _dir: Some(dir),
    })
}

/// Reads the master key file: 64 hex characters (a trailing newline is
/// fine), not readable by every user.
pub(crate) fn master_key(path: &Path) -> Result<SealKey, String> {
    let what = |e: &dyn std::fmt::Display| format!("--master-key-file {}: {e}", path.display());
    refuse_world_readable(path, "--master-key-file")?;
    let text = zeroize::Zeroizing::new(std::fs::read_to_string(path).map_err(|e| what(&e))?);
    let hex_text = text.trim_end_matches(['\n', '\r']);
    let mut bytes = zeroize::Zeroizing::new([0u8; 32]);
    hex::decode_to_slice(hex_text, bytes.as_mut_slice())
        .map_err(|e| what(&format!("expected 64 hex characters ({e})")))?;
    SealKey::from_bytes("gateway-master", 1, &bytes).map_err(|e| what(&e))
}

/// Refuses a secret file every user can read.
fn refuse_world_readable(path: &Path, flag: &str) -> Result<(), String> {
    let metadata =
        std::fs::metadata(path).map_err(|e| format!("{flag} {}: {e}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if metadata.permissions().mode() & 0o004 != 0 {
            return Err(format!(
                "{flag} {}: is readable by every user; chmod o-r it",
                path.display()
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = metadata;
    Ok(())
}
