//! Files the gateway believes: whoever can write one decides what the
//! gateway trusts or does. A **trust anchor** ([`read_trusted`]: a JWK Set,
//! a CA file, the access rules, the `--config` file) must be a regular file
//! owned by the gateway's effective user or root and writable by no one
//! else (no group or world write bit). Secret files add their own rules
//! on top of the same opening (`serve/secrets.rs`).
//!
//! Invariant: every check is made on the opened file (`fstat`), so a swap
//! between the check and the read cannot pass; symbolic links are followed
//! (Kubernetes mounts ConfigMaps and Secrets behind them).

use std::fs::{File, Metadata};
use std::io::Read;
use std::path::Path;

/// The largest trust anchor read (bytes): a JWK Set of thousands of keys
/// fits.
const MAX_TRUSTED_FILE: u64 = 16 * 1024 * 1024;

/// Opens `path` for reading without blocking (a FIFO without a writer
/// would hang the start before the regular-file check refuses it), and
/// checks the opened file: a regular file owned by this process's
/// effective user or root. `what` makes a message name the flag and path.
///
/// # Errors
/// The I/O errors; a file that is not regular, or owned by another user.
pub(crate) fn open_owned(
    path: &Path,
    what: &dyn Fn(&dyn std::fmt::Display) -> String,
) -> Result<(File, Metadata), String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        rustix::fs::OFlags::NONBLOCK.bits() as i32,
    );
    let file = options.open(path).map_err(|e| what(&e))?;
    let metadata = file.metadata().map_err(|e| what(&e))?;
    if !metadata.is_file() {
        return Err(what(&"is not a regular file"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let (owner, me) = (metadata.uid(), rustix::process::geteuid().as_raw());
        if owner != me && owner != 0 {
            return Err(what(&format!(
                "is owned by uid {owner}, neither this user (uid {me}) nor root"
            )));
        }
    }
    Ok((file, metadata))
}

/// Reads a trust anchor whole (module docs); `flag` names it in messages
/// (`--trust-jwks`, `--config`, …; empty for a file named by its path
/// alone).
///
/// # Errors
/// A message naming `flag`, the path and what is wrong (with the `chmod`
/// or `chown` that fixes it): [`open_owned`]'s refusals, a group- or
/// world-writable file, one over 16 MiB; the I/O errors.
pub(crate) fn read_trusted(path: &Path, flag: &str) -> Result<Vec<u8>, String> {
    let what = |e: &dyn std::fmt::Display| {
        if flag.is_empty() {
            format!("{}: {e}", path.display())
        } else {
            format!("{flag} {}: {e}", path.display())
        }
    };
    let (file, metadata) = open_owned(path, &what)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let mode = metadata.mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(what(&format!(
                "is writable by other users (mode {mode:04o}): whoever writes it decides what \
                 the gateway trusts; chmod go-w it"
            )));
        }
    }
    if metadata.len() > MAX_TRUSTED_FILE {
        return Err(what(&format!("is over {MAX_TRUSTED_FILE} bytes")));
    }
    let mut text = Vec::new();
    file.take(MAX_TRUSTED_FILE + 1)
        .read_to_end(&mut text)
        .map_err(|e| what(&e))?;
    if text.len() as u64 > MAX_TRUSTED_FILE {
        return Err(what(&format!("is over {MAX_TRUSTED_FILE} bytes")));
    }
    Ok(text)
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_trust_anchor_writable_by_others_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("set.json");
        std::fs::write(&path, "{}").unwrap();
        for (mode, ok) in [(0o644, true), (0o600, true), (0o664, false), (0o646, false)] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let read = read_trusted(&path, "--trust-jwks");
            assert_eq!(read.is_ok(), ok, "{mode:o}: {read:?}");
            if let Err(e) = read {
                assert!(
                    e.contains("--trust-jwks") && e.contains("chmod go-w"),
                    "{e}"
                );
            }
        }
        assert!(read_trusted(dir.path(), "").is_err(), "a directory");
    }
}
