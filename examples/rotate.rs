//! A durable keystore in a temporary directory: create the store and a
//! key, sign, rotate, reopen, and check that the old signature still
//! verifies under its version and the head signs with the new one; a
//! second open while the store is held, creating over it, and a wrong
//! master key are refused; then the master key is rotated (open with the
//! keyring of both versions, `rewrap`, reopen with the new one alone).
//!
//! ```text
//! cargo run --example rotate
//! ```
//!
//! Exits 0 when every step behaves as it must, 1 otherwise.

use std::process::ExitCode;

use kms::core::seal::{Keyring, SealKey};
use kms::core::{Keystore, KmsError, STORE_FILE};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rotate example failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), KmsError> {
    let dir = std::env::temp_dir().join(format!("kms-rotate-example-{}", std::process::id()));
    // In production the master key comes from a KMS, an HSM or the
    // operator, never from the same disk as the store.
    let master_bytes = [0x42u8; 32];
    let master = || SealKey::from_bytes("store-master", 1, &master_bytes);

    // A directory left by an earlier run that was killed: start afresh.
    let _ = std::fs::remove_dir_all(&dir);
    let (v1, old_signature) = {
        let ks = Keystore::create(&dir, master()?)?;
        let key = ks.create_ed25519("acme", "passports")?;
        let (v1, signature) = ks.sign(&key, b"passport issued before rotation")?;
        let v2 = ks.rotate(&key)?;
        println!("created {v1}, signed with it, rotated to {v2}");
        (v1, signature)
    };
    println!(
        "store on disk: {} ({} bytes, sealed)",
        dir.join(STORE_FILE).display(),
        std::fs::metadata(dir.join(STORE_FILE)).map_or(0, |m| m.len())
    );

    // A new process would do exactly this.
    let ks = Keystore::open(&dir, master()?)?;
    match Keystore::open(&dir, master()?) {
        Err(e @ KmsError::StoreInUse { .. }) => println!("a second open is refused: {e}"),
        other => return Err(unexpected("a second open", other.map(|_| ()))),
    }
    ks.verify(&v1, b"passport issued before rotation", &old_signature)?;
    println!("reopened: the v1 signature still verifies under {v1}");
    let (head, signature) = ks.sign(&v1, b"passport issued after reopening")?;
    ks.verify(&head, b"passport issued after reopening", &signature)?;
    println!(
        "the head {head} signs; versions: {}",
        ks.attest(&v1)?.versions.len()
    );

    drop(ks);

    match Keystore::create(&dir, master()?) {
        Err(e @ KmsError::StoreExists { .. }) => println!("creating over it is refused: {e}"),
        other => return Err(unexpected("creating over the store", other.map(|_| ()))),
    }
    let wrong = SealKey::from_bytes("store-master", 1, &[0x43u8; 32])?;
    match Keystore::open(&dir, wrong) {
        Err(e @ KmsError::Seal(_)) => println!("a wrong master key is refused: {e}"),
        other => return Err(unexpected("a wrong master key", other.map(|_| ()))),
    }

    // Master-key rotation: v2 seals from now on, `rewrap` re-seals the rest.
    let next = || SealKey::from_bytes("store-master", 2, &[0x44u8; 32]);
    let ks = Keystore::open_with_keyring(&dir, Keyring::new([master()?, next()?])?)?;
    let report = ks.rewrap()?;
    println!(
        "rewrap: {} of {} records re-sealed under store-master v2",
        report.resealed, report.records
    );
    drop(ks);
    let ks = Keystore::open(&dir, next()?)?;
    ks.verify(&v1, b"passport issued before rotation", &old_signature)?;
    println!("reopened with v2 alone; v1's old signature still verifies");
    drop(ks);
    match Keystore::open(&dir, master()?) {
        Err(e @ KmsError::Seal(_)) => println!("the retired master key v1 is refused: {e}"),
        other => return Err(unexpected("the retired master key", other.map(|_| ()))),
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn unexpected(what: &str, got: Result<(), KmsError>) -> KmsError {
    KmsError::Internal {
        reason: format!("{what} was not refused as it must be: {got:?}"),
    }
}
