//! kms-pkcs11: a PKCS#11 root of trust ([`Pkcs11Root`]) for
//! `kms_core::Keystore::create_under` and `open_under`.
//!
//! The store's 32-byte master key is wrapped by an AES-256 secret key
//! object in a token (PKCS#11 v2.40 §2.8, `CKM_AES_GCM`: a random 12-byte
//! IV, the store's identity as additional authenticated data, a 128-bit
//! tag), and recorded as the IV, the ciphertext and the tag
//! ([`WRAPPED_LEN`] bytes) under the mechanism name [`MECHANISM`]. The
//! token's key never leaves it.
//!
//! Invariants:
//! * one session per root, opened and logged in on first use and kept;
//!   a call that fails because the token dropped it (a closed or invalid
//!   session, a logout, a token removed and put back, the module finalized
//!   by another part of the process) opens a new one (initializing the
//!   module again if needed) and tries once more;
//! * the PIN is held in cryptoki's `AuthPin` (wiped on drop) and never
//!   appears in a message or a `Debug`; a token's login holds for every
//!   session of the process (PKCS#11's rule), so a second root on a token
//!   already logged in does not have its PIN checked;
//! * the unwrapped key is copied into a buffer wiped on drop, and the
//!   token's answer wiped.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error, RvError};
use cryptoki::mechanism::aead::GcmParams;
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::types::Ulong;
use kms_core::root::{
    MasterKeyBytes, MasterKeyRoot, RootKind, StoreId, WrappedKey, MASTER_KEY_LEN,
};
use kms_core::KmsError;
use zeroize::Zeroizing;

pub use cryptoki::types::AuthPin;

/// The mechanism name recorded beside a wrapped key.
pub const MECHANISM: &str = "CKM_AES_GCM";

/// The GCM IV's length (bytes): 96 bits, NIST SP 800-38D §8.2.
const IV_LEN: usize = 12;

/// The GCM tag's length (bits).
const TAG_BITS: u64 = 128;

/// A wrapped master key's length (bytes): IV, ciphertext, tag.
pub const WRAPPED_LEN: usize = IV_LEN + MASTER_KEY_LEN + (TAG_BITS as usize) / 8;

/// A store's master key wrapped by an AES-256 key in a PKCS#11 token.
pub struct Pkcs11Root {
    module: PathBuf,
    token: String,
    key: String,
    pin: AuthPin,
    /// The module, loaded on first use, and the session it keeps.
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    module: Option<Pkcs11>,
    open: Option<Open>,
}

/// A logged-in session and the key found in it.
struct Open {
    session: Session,
    key: ObjectHandle,
}

impl Pkcs11Root {
    /// The root of the AES-256 secret key labelled `key` (with
    /// `CKA_ENCRYPT` and `CKA_DECRYPT`) in the token labelled `token`, through
    /// the module at `module` (a shared library: SoftHSM2's
    /// `libsofthsm2.so`, a vendor's), logged in as the user with `pin`.
    /// Nothing is loaded until the root is used.
    pub fn new(module: impl Into<PathBuf>, token: &str, key: &str, pin: AuthPin) -> Pkcs11Root {
        Pkcs11Root {
            module: module.into(),
            token: token.to_owned(),
            key: key.to_owned(),
            pin,
            state: Mutex::new(State::default()),
        }
    }

    /// The module's path.
    pub fn module(&self) -> &Path {
        &self.module
    }

    fn failed(&self, reason: impl Into<String>) -> KmsError {
        KmsError::Root {
            root: self.describe(),
            reason: reason.into(),
        }
    }

    /// Runs `f` on the open session, opening one first if needed; if `f`
    /// fails because the token dropped the session, opens a new one and
    /// runs `f` once more.
    fn with_session<R>(
        &self,
        f: impl Fn(&Open) -> Result<R, Error>,
        what: &str,
    ) -> Result<R, KmsError> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for attempt in 0..2 {
            if state.open.is_none() {
                let module = match &state.module {
                    Some(module) => module.clone(),
                    None => {
                        let module = self.load()?;
                        state.module = Some(module.clone());
                        module
                    }
                };
                state.open = Some(self.open(&module)?);
            }
            let Some(open) = state.open.as_ref() else {
                continue;
            };
            match f(open) {
                Ok(r) => return Ok(r),
                Err(e) if attempt == 0 && dropped(&e) => {
                    // The old session (closed with it, if still open)
                    // before a new one; the module initialized again if
                    // it was finalized.
                    state.open = None;
                    if finalized(&e) {
                        state.module = None;
                    }
                }
                Err(e) => return Err(self.failed(format!("{what}: {}", reason(&e)))),
            }
        }
        Err(self.failed(format!("{what}: the token dropped the session twice")))
    }

    /// Loads and initializes the module (a module another part of the
    /// process initialized already is used as it is).
    fn load(&self) -> Result<Pkcs11, KmsError> {
        let module = Pkcs11::new(&self.module)
            .map_err(|e| self.failed(format!("cannot load the module: {e}")))?;
        match module.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
            Ok(()) | Err(Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(module),
            Err(e) => Err(self.failed(format!("cannot initialize the module: {}", reason(&e)))),
        }
    }

    /// Finds the token, opens a session, logs in and finds the key.
    fn open(&self, module: &Pkcs11) -> Result<Open, KmsError> {
        let slots = module
            .get_slots_with_token()
            .map_err(|e| self.failed(format!("cannot list the slots: {}", reason(&e))))?;
        let mut found = Vec::new();
        for slot in slots {
            let info = module
                .get_token_info(slot)
                .map_err(|e| self.failed(format!("cannot read a token: {}", reason(&e))))?;
            if info.label().trim_end() == self.token {
                found.push(slot);
            }
        }
        let slot = match found.as_slice() {
            [slot] => *slot,
            [] => return Err(self.failed("no token with this label")),
            _ => return Err(self.failed("several tokens have this label")),
        };
        let session = module
            .open_ro_session(slot)
            .map_err(|e| self.failed(format!("cannot open a session: {}", reason(&e))))?;
        match session.login(UserType::User, Some(&self.pin)) {
            Ok(()) | Err(Error::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
            Err(e) => return Err(self.failed(format!("cannot log in: {}", reason(&e)))),
        }
        let template = [
            Attribute::Class(ObjectClass::SECRET_KEY),
            Attribute::KeyType(KeyType::AES),
            Attribute::Label(self.key.as_bytes().to_vec()),
        ];
        let keys = session
            .find_objects(&template)
            .map_err(|e| self.failed(format!("cannot search the token: {}", reason(&e))))?;
        let key = match keys.as_slice() {
            [key] => *key,
            [] => return Err(self.failed("no AES secret key with this label in the token")),
            _ => return Err(self.failed("several AES secret keys have this label")),
        };
        let attributes = session
            .get_attributes(
                key,
                &[
                    AttributeType::ValueLen,
                    AttributeType::Encrypt,
                    AttributeType::Decrypt,
                ],
            )
            .map_err(|e| self.failed(format!("cannot read the key: {}", reason(&e))))?;
        let (mut len, mut encrypt, mut decrypt) = (None, false, false);
        for attribute in attributes {
            match attribute {
                Attribute::ValueLen(value) => len = Some(*value),
                Attribute::Encrypt(on) => encrypt = on,
                Attribute::Decrypt(on) => decrypt = on,
                _ => {}
            }
        }
        // AES-256: 32 bytes (CKA_VALUE_LEN is a CK_ULONG, u32 or u64).
        if len != Some(32) {
            return Err(self.failed("the key is not AES-256 (CKA_VALUE_LEN is not 32)"));
        }
        if !(encrypt && decrypt) {
            return Err(self.failed("the key lacks CKA_ENCRYPT or CKA_DECRYPT"));
        }
        Ok(Open { session, key })
    }
}

/// Whether `e` says the token dropped the session (or its login), so a
/// new session may succeed.
fn dropped(e: &Error) -> bool {
    matches!(
        e,
        Error::Pkcs11(
            RvError::SessionHandleInvalid
                | RvError::SessionClosed
                | RvError::DeviceRemoved
                | RvError::TokenNotPresent
                | RvError::UserNotLoggedIn
                | RvError::KeyHandleInvalid
                | RvError::ObjectHandleInvalid
                | RvError::CryptokiNotInitialized,
            _
        )
    )
}

/// Whether `e` says the module is no longer initialized (another part of
/// the process finalized it).
fn finalized(e: &Error) -> bool {
    matches!(e, Error::Pkcs11(RvError::CryptokiNotInitialized, _))
}

/// A PKCS#11 error in words, with its return value's name.
fn reason(e: &Error) -> String {
    match e {
        Error::Pkcs11(rv, function) => format!("{function:?} answered {rv:?}"),
        other => other.to_string(),
    }
}

/// The GCM parameters over `iv`, bound to `store`.
fn gcm<'a>(iv: &'a mut [u8; IV_LEN], store: &'a StoreId) -> Result<Mechanism<'a>, Error> {
    Ok(Mechanism::AesGcm(GcmParams::new(
        iv,
        store.as_bytes(),
        Ulong::from(TAG_BITS),
    )?))
}

impl MasterKeyRoot for Pkcs11Root {
    fn kind(&self) -> RootKind {
        RootKind::Pkcs11
    }

    fn describe(&self) -> String {
        format!(
            "PKCS#11 key \"{}\" in token \"{}\" (module {})",
            self.key,
            self.token,
            self.module.display()
        )
    }

    fn wrap(&self, store: &StoreId, key: &MasterKeyBytes) -> Result<Option<WrappedKey>, KmsError> {
        let mut iv = [0u8; IV_LEN];
        getrandom::fill(&mut iv).map_err(|_| KmsError::EntropyUnavailable)?;
        // The IV recorded is the one the parameters hold after the call
        // (cryptoki's `GcmParams` lends the IV mutably): a token that
        // writes the IV it used back there is recorded right.
        let (iv, sealed) = self.with_session(
            |open| {
                let mut iv = iv;
                let sealed =
                    open.session
                        .encrypt(&gcm(&mut iv, store)?, open.key, key.as_slice())?;
                Ok((iv, sealed))
            },
            "cannot wrap the master key",
        )?;
        if sealed.len() != WRAPPED_LEN - IV_LEN {
            return Err(self.failed(format!(
                "the token's AES-GCM answered {} bytes, not {}",
                sealed.len(),
                WRAPPED_LEN - IV_LEN
            )));
        }
        let mut bytes = Vec::with_capacity(WRAPPED_LEN);
        bytes.extend_from_slice(&iv);
        bytes.extend_from_slice(&sealed);
        Ok(Some(WrappedKey {
            mechanism: MECHANISM.to_owned(),
            bytes,
        }))
    }

    fn unwrap(
        &self,
        store: &StoreId,
        wrapped: Option<&WrappedKey>,
    ) -> Result<MasterKeyBytes, KmsError> {
        let wrapped = wrapped.ok_or_else(|| self.failed("the store records no wrapped key"))?;
        if wrapped.mechanism != MECHANISM {
            return Err(self.failed(format!(
                "the key was wrapped with {}, not {MECHANISM}",
                wrapped.mechanism
            )));
        }
        let Some((iv, sealed)) = wrapped.bytes.split_first_chunk::<IV_LEN>() else {
            return Err(self.failed("the wrapped key is too short"));
        };
        if wrapped.bytes.len() != WRAPPED_LEN {
            return Err(self.failed(format!(
                "the wrapped key is {} bytes, not {WRAPPED_LEN}",
                wrapped.bytes.len()
            )));
        }
        let opened = self.with_session(
            |open| {
                let mut iv = *iv;
                let opened = open
                    .session
                    .decrypt(&gcm(&mut iv, store)?, open.key, sealed);
                opened.map(Zeroizing::new)
            },
            "cannot unwrap this store's master key (another token key, or another store's \
             record?)",
        )?;
        let mut key = Zeroizing::new([0u8; MASTER_KEY_LEN]);
        if opened.len() != MASTER_KEY_LEN {
            return Err(self.failed("the unwrapped key is not 32 bytes"));
        }
        key.copy_from_slice(&opened);
        drop(opened);
        Ok(key)
    }
}

impl fmt::Debug for Pkcs11Root {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pkcs11Root")
            .field("module", &self.module)
            .field("token", &self.token)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}
