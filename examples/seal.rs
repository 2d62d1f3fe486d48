//! Sealing a secret: seal, open, tamper, and a rolled-back envelope refused.
//!
//! ```text
//! cargo run --example seal
//! ```
//!
//! Exits 0 when every step behaves as it must, 1 otherwise.

use std::process::ExitCode;

use kms::core::seal::{AntiRollback, Envelope, SealError, SealKey};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("seal example failed: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), String> {
    let key = SealKey::generate("backup-key").map_err(|e| e.to_string())?;
    let aad = b"kms:acme:tokens:ed25519 seed, export 2026-11-21";
    let secret = b"the 32-byte seed of a signing key";

    // Seal, and show what travels: the header is readable, the secret is not.
    let first = key.seal(aad, secret).map_err(|e| e.to_string())?;
    let bytes = first.to_bytes();
    println!(
        "sealed {} bytes into a {}-byte envelope: key {}@v{}, counter {}, created {}",
        secret.len(),
        bytes.len(),
        first.header.key_id,
        first.header.key_version,
        first.header.counter,
        first.header.created_at
    );

    // Open it from its bytes, with the same associated data.
    let opened = key
        .open(
            aad,
            &Envelope::from_bytes(&bytes).map_err(|e| e.to_string())?,
        )
        .map_err(|e| e.to_string())?;
    expect(&*opened == secret, "opened the secret")?;

    // Tamper: one bit of ciphertext, the header's counter, the context.
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let tampered = Envelope::from_bytes(&flipped).map_err(|e| e.to_string())?;
    expect(
        key.open(aad, &tampered).err() == Some(SealError::Authentication),
        "a flipped ciphertext bit is refused: Authentication",
    )?;
    let mut renumbered = first.clone();
    renumbered.header.counter += 10;
    expect(
        key.open(aad, &renumbered).err() == Some(SealError::Authentication),
        "a rewritten header counter is refused: Authentication",
    )?;
    expect(
        key.open(b"another context", &first).err() == Some(SealError::Authentication),
        "another associated data is refused: Authentication",
    )?;

    // Anti-rollback: after the newer envelope, the older one is refused.
    let second = key
        .seal(aad, b"the rotated seed, a newer secret")
        .map_err(|e| e.to_string())?;
    let policy = AntiRollback::new();
    policy.open(&key, aad, &second).map_err(|e| e.to_string())?;
    match policy.open(&key, aad, &first) {
        Err(e @ SealError::Rollback { .. }) => println!("ok: the older envelope is refused: {e}"),
        other => return Err(format!("rollback not refused: {other:?}")),
    }
    Ok(())
}

fn expect(ok: bool, what: &str) -> Result<(), String> {
    if ok {
        println!("ok: {what}");
        Ok(())
    } else {
        Err(format!("not as expected: {what}"))
    }
}
