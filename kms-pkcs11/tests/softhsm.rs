//! The PKCS#11 root against a real token: SoftHSM2, its tokens and keys
//! made by this test in a temporary directory.
//!
//! One test function: SoftHSM2 reads `SOFTHSM2_CONF` once, when this
//! process first initializes the module, so every step shares one token
//! store, set up before the module loads and before any other thread runs.
//! Built with the `softhsm-tests` feature (SoftHSM2 and OpenSC installed).
#![cfg(feature = "softhsm-tests")]

use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error, RvError};
use kms_core::root::{MasterKeyRoot, RootKind, StoreId, WrappedKey};
use kms_core::{Keystore, KmsError};
use kms_pkcs11::{AuthPin, Pkcs11Root, MECHANISM, WRAPPED_LEN};
use kms_testkit::softhsm::SoftHsm;
use zeroize::Zeroizing;

const PIN: &str = "4321";

fn root(hsm: &SoftHsm, token: &str, key: &str, pin: &str) -> Pkcs11Root {
    Pkcs11Root::new(hsm.module(), token, key, AuthPin::from(pin.to_owned()))
}

fn reason(result: Result<impl std::fmt::Debug, KmsError>) -> String {
    match result {
        Err(KmsError::Root { root, reason }) => format!("{root}: {reason}"),
        other => panic!("expected a root error, got {other:?}"),
    }
}

#[test]
fn a_softhsm2_token_wraps_and_unwraps_store_master_keys() {
    let hsm = SoftHsm::new().expect("SoftHSM2");
    // Before the module loads (below), with no other test thread alive.
    std::env::set_var("SOFTHSM2_CONF", hsm.conf());
    hsm.token("kms", PIN);
    hsm.aes_key("kms", PIN, "master", 32);
    hsm.aes_key("kms", PIN, "other", 32);
    hsm.aes_key("kms", PIN, "aes128", 16);
    hsm.token("spare", PIN);
    hsm.aes_key("spare", PIN, "master", 32);

    let store = StoreId::generate().expect("id");
    let key = Zeroizing::new([9u8; 32]);
    // First, while no session of this process is logged in to the token
    // (a login holds for every session of the process).
    let wrong_pin = reason(root(&hsm, "kms", "master", "999999").wrap(&store, &key));
    assert!(wrong_pin.contains("PinIncorrect"), "{wrong_pin}");
    assert!(!wrong_pin.contains("999999"), "{wrong_pin}");

    let master = root(&hsm, "kms", "master", PIN);
    assert_eq!(master.kind(), RootKind::Pkcs11);
    let wrapped = master.wrap(&store, &key).expect("wraps").expect("recorded");
    assert_eq!(wrapped.mechanism, MECHANISM);
    assert_eq!(wrapped.bytes.len(), WRAPPED_LEN);
    assert!(!wrapped.bytes.windows(32).any(|w| w == key.as_slice()));
    let again = master.wrap(&store, &key).expect("wraps").expect("recorded");
    assert_ne!(
        again.bytes[..12],
        wrapped.bytes[..12],
        "a fresh IV each time"
    );
    assert_eq!(
        *master.unwrap(&store, Some(&wrapped)).expect("unwraps"),
        [9; 32]
    );

    // What cannot unwrap: another store's identity, another key of the
    // token, the same label in another token, a damaged or foreign record.
    let elsewhere = StoreId::generate().expect("id");
    assert!(reason(master.unwrap(&elsewhere, Some(&wrapped))).contains("cannot unwrap"));
    let other = root(&hsm, "kms", "other", PIN);
    assert!(reason(other.unwrap(&store, Some(&wrapped))).contains("\"other\""));
    let spare = root(&hsm, "spare", "master", PIN);
    assert!(reason(spare.unwrap(&store, Some(&wrapped))).contains("cannot unwrap"));
    let mut flipped = wrapped.clone();
    flipped.bytes[20] ^= 1;
    reason(master.unwrap(&store, Some(&flipped)));
    let foreign = WrappedKey {
        mechanism: "CKM_AES_KEY_WRAP".into(),
        ..wrapped.clone()
    };
    assert!(reason(master.unwrap(&store, Some(&foreign))).contains("CKM_AES_KEY_WRAP"));
    reason(master.unwrap(&store, None));

    // What cannot open: each named, and never the PIN.
    let no_token = reason(root(&hsm, "absent", "master", PIN).wrap(&store, &key));
    assert!(
        no_token.contains("\"absent\"") && no_token.contains("no token"),
        "{no_token}"
    );
    let no_key = reason(root(&hsm, "kms", "absent", PIN).wrap(&store, &key));
    assert!(
        no_key.contains("\"absent\"") && no_key.contains("no AES secret key"),
        "{no_key}"
    );
    let short = reason(root(&hsm, "kms", "aes128", PIN).wrap(&store, &key));
    assert!(short.contains("not AES-256"), "{short}");
    let no_module = reason(
        Pkcs11Root::new(
            "/nonexistent/libpkcs11.so",
            "kms",
            "master",
            AuthPin::from(PIN.to_owned()),
        )
        .wrap(&store, &key),
    );
    assert!(no_module.contains("cannot load the module"), "{no_module}");
    assert!(!format!("{master:?}").contains(PIN));

    // A store under the token: created, reopened, signing and verifying;
    // refused by another key, then opened by its own with every key.
    let dir = tempfile::tempdir().expect("temp dir");
    let (signer, signed) = {
        let ks = Keystore::create_under(dir.path(), &master, "master").expect("create");
        let signer = ks.create_ed25519("acme", "tokens").expect("key");
        let signed = ks.sign(&signer, b"before").expect("sign");
        (signer, signed)
    };
    assert!(matches!(
        Keystore::open_under(dir.path(), &other, "master"),
        Err(KmsError::Root { .. })
    ));
    let ks = Keystore::open_under(dir.path(), &master, "master").expect("reopens");
    ks.verify(&signed.0, b"before", &signed.1)
        .expect("verifies");
    let (head, signature) = ks.sign(&signer, b"after").expect("signs");
    ks.verify(&head, b"after", &signature).expect("verifies");
    drop(ks);

    // Another part of the process finalizes the module, which closes
    // every session: the root initializes it again and opens a new one.
    let module = Pkcs11::new(hsm.module()).expect("module");
    match module.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(Error::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
        Err(e) => panic!("{e}"),
    }
    module.finalize().expect("finalizes");
    assert_eq!(
        *master.unwrap(&store, Some(&wrapped)).expect("unwraps"),
        [9; 32]
    );
    assert!(master.wrap(&store, &key).expect("wraps").is_some());
}
