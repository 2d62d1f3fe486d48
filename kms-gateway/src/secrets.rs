//! `serve`'s secrets from files: the admin face's bearer secret
//! (`--admin-token-file`) and the master key (`--master-key-file`). A file
//! that every user can read is refused, and the master key's text is
//! wiped after use.

use std::path::Path;
use std::sync::Arc;

use kms::core::seal::SealKey;

use crate::serve::ServeArgs;

/// The admin secret, if any; refuses a non-loopback admin face without one.
pub(crate) fn admin_token(args: &ServeArgs) -> Result<Option<Arc<[u8]>>, String> {
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
    Ok(Some(Arc::from(token.as_bytes())))
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
