//! Two nodes of a fleet on one etcd cluster, in one process (each with
//! its own connection, mirror and watch, as separate processes would
//! have): a key created on the first reaches the second, a signature made
//! on either verifies on the other, and a rotation on the second becomes
//! the first's signing head. Exits 1 if any step misbehaves.
//!
//! Needs a running etcd (Debian: `apt-get install etcd-server`, then
//! `etcd --data-dir "$(mktemp -d)"`), whose client URLs are the first
//! argument (default `http://127.0.0.1:2379`). Each run uses a fresh
//! prefix (`/kms-example-<pid>-<ns>`), so runs do not meet; the records
//! stay in etcd.
//!
//! Run: `cargo run --manifest-path kms-etcd/Cargo.toml --example two_nodes
//! -- http://127.0.0.1:2379`.

use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kms_core::seal::{Keyring, SealKey};
use kms_core::{KeyId, Keystore};
use kms_etcd::{EtcdConfig, Follower};

/// The example fleet's master key (a real fleet's is 32 random bytes in a
/// secret file on every node).
const MASTER: [u8; 32] = [0x42; 32];

/// How long a change may take to reach the other node.
const REACH: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("two_nodes: {e}");
            ExitCode::from(1)
        }
    }
}

fn run() -> Result<(), String> {
    let endpoints = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:2379".to_owned());
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?;
    let prefix = format!("/kms-example-{}-{}", std::process::id(), started.as_nanos());
    let config = EtcdConfig::new(endpoints.split(',').map(str::trim))
        .with_prefix(prefix.clone())
        // The fleet's first start: a node may start the store.
        .with_create(true);
    // Every node holds the fleet's master key, each reading it from its
    // secret file; the example's are fixed bytes.
    let node = |name: &str| -> Result<(Keystore, Follower), String> {
        let master = SealKey::from_bytes("fleet-master", 1, &MASTER).map_err(|e| e.to_string())?;
        kms_etcd::open(config.clone(), Keyring::from(master))
            .map_err(|e| format!("node {name}: {e}"))
    };
    let (a, _follow_a) = node("a")?;
    let (b, _follow_b) = node("b")?;
    println!("two_nodes: two nodes on {endpoints}, prefix {prefix}");

    let key = a
        .create_ed25519("acme", "tokens")
        .map_err(|e| e.to_string())?;
    wait(|| head(&b, &key) == Some(1), "b sees the key a created")?;
    let (signer, signature) = a.sign(&key, b"signed on a").map_err(|e| e.to_string())?;
    b.verify(&signer, b"signed on a", &signature)
        .map_err(|e| format!("b verifies a's signature: {e}"))?;
    println!("two_nodes: {key} created on a, a's signature verifies on b");

    let v2 = b.rotate(&key).map_err(|e| e.to_string())?;
    wait(|| head(&a, &key) == Some(2), "a sees b's rotation")?;
    let (signer, signature) = a.sign(&key, b"after").map_err(|e| e.to_string())?;
    if signer != v2 {
        return Err(format!("a signed with {signer}, not the rotated head {v2}"));
    }
    b.verify(&signer, b"after", &signature)
        .map_err(|e| format!("b verifies a's new signature: {e}"))?;
    println!("two_nodes: rotated on b to {v2}; a signs with it");
    Ok(())
}

/// The signing head's version of `key` on `keystore`, if it knows the key.
fn head(keystore: &Keystore, key: &KeyId) -> Option<u32> {
    keystore.attest(key).ok().map(|a| a.head.version())
}

/// Waits until `done` holds, at most [`REACH`].
fn wait(mut done: impl FnMut() -> bool, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + REACH;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!("not within {REACH:?}: {what}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}
