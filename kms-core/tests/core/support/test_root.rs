//! A wrapping root for tests ([`TestRoot`]), shared by the root tests and
//! the crash test.

use std::sync::atomic::{AtomicU32, Ordering};

use kms_core::root::{MasterKeyBytes, MasterKeyRoot, RootKind, StoreId, WrappedKey};
use kms_core::seal::{Envelope, SealKey};
use kms_core::KmsError;
use zeroize::Zeroizing;

/// A wrapping root for tests: seals the master key under its own
/// `SealKey` with the store's identity as associated data, and counts its
/// unwraps. A lying one wraps another key than it is given.
#[derive(Debug)]
pub struct TestRoot {
    key: [u8; 32],
    lies: bool,
    pub unwraps: AtomicU32,
}

impl TestRoot {
    pub fn new(byte: u8) -> TestRoot {
        TestRoot {
            key: [byte; 32],
            lies: false,
            unwraps: AtomicU32::new(0),
        }
    }

    /// A root whose wrap answers a key that unwraps to other bytes than
    /// the ones it was given (a faulty token). Unused by the crash test,
    /// which shares this file.
    #[allow(dead_code)]
    pub fn lying(byte: u8) -> TestRoot {
        TestRoot {
            lies: true,
            ..TestRoot::new(byte)
        }
    }

    fn seal_key(&self) -> SealKey {
        SealKey::from_bytes("test-root", 1, &self.key).expect("seal key")
    }
}

impl MasterKeyRoot for TestRoot {
    fn kind(&self) -> RootKind {
        RootKind::Pkcs11
    }

    fn describe(&self) -> String {
        format!("test root {}", self.key[0])
    }

    fn wrap(&self, store: &StoreId, key: &MasterKeyBytes) -> Result<Option<WrappedKey>, KmsError> {
        let mut wrapped = Zeroizing::new(**key);
        if self.lies {
            wrapped[0] ^= 1;
        }
        let envelope = self.seal_key().seal(store.as_bytes(), wrapped.as_slice())?;
        Ok(Some(WrappedKey {
            mechanism: "TEST".into(),
            bytes: envelope.to_bytes(),
        }))
    }

    fn unwrap(
        &self,
        store: &StoreId,
        wrapped: Option<&WrappedKey>,
    ) -> Result<MasterKeyBytes, KmsError> {
        self.unwraps.fetch_add(1, Ordering::Relaxed);
        let failed = |reason: &str| KmsError::Root {
            root: self.describe(),
            reason: reason.into(),
        };
        let wrapped = wrapped.ok_or_else(|| failed("nothing to unwrap"))?;
        let envelope = Envelope::from_bytes(&wrapped.bytes).map_err(|_| failed("damaged"))?;
        let opened = self
            .seal_key()
            .open(store.as_bytes(), &envelope)
            .map_err(|_| failed("cannot unwrap this store's master key"))?;
        let mut key = Zeroizing::new([0u8; 32]);
        key.copy_from_slice(&opened);
        Ok(key)
    }
}
