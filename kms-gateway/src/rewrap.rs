//! `kms-gateway rewrap`: moves a durable store to another root of trust
//! (`kms::core::Keystore::move_to_root`): the same 32-byte master key,
//! unwrapped by the current root, checked against every record, and
//! wrapped anew by the new one, in one atomic replacement of the store's
//! root record (a directory's `keystore.root`, a fleet's `<prefix>/root`
//! on etcd). Not `Keystore::rewrap`, which rotates the master key.

use kms::core::{Keystore, KmsError};

use crate::config::{RewrapConfig, RewrapTarget};
use crate::roots;

/// Moves the store; the line to print when done.
///
/// # Errors
/// A secret file refused; the store in use (a running `serve` holds its
/// lock), under another kind of root, or not opened by the key; a root
/// that cannot unwrap or wrap (naming it); a new key file that exists.
/// Nothing is changed by any of them.
pub(crate) fn run(config: &RewrapConfig) -> Result<String, String> {
    let from = roots::master_key_root(&config.from, config.allow_group)?;
    let to = roots::new_root(&config.to, config.allow_group)?;
    let (moved, what) = match &config.target {
        RewrapTarget::Store(dir) => (
            Keystore::move_to_root(dir, from.as_ref(), to.as_ref(), roots::MASTER_KEY_ID),
            format!("--store {}", dir.display()),
        ),
        #[cfg(feature = "etcd")]
        RewrapTarget::Fleet(fleet) => {
            let etcd = crate::serve::etcd_config(fleet)?;
            (
                kms::etcd::move_to_root(etcd, from.as_ref(), to.as_ref(), roots::MASTER_KEY_ID),
                format!("--etcd {} --etcd-prefix {}", fleet.endpoints, fleet.prefix),
            )
        }
    };
    match moved {
        Ok(record) => Ok(format!(
            "gateway rewrap: {what} is now under {} (store {})",
            record.root, record.store
        )),
        Err(e @ KmsError::StoreInUse { .. }) => Err(format!(
            "{what}: {e}: stop the serve that holds it, then rewrap"
        )),
        Err(e @ KmsError::WrongRoot { expected, .. }) => {
            Err(format!("{what}: {e}; give {}", roots::flags(expected)))
        }
        Err(e @ KmsError::Root { .. }) => Err(e.to_string()),
        Err(e) => Err(format!("{what}: {e}")),
    }
}
