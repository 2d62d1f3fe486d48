//! Crash test of the durable keystore: a child process (this same binary,
//! told by an environment variable) rotates a key over and over, printing
//! `acked <version>` after each `rotate` returns; the parent kills it with
//! SIGKILL at a random moment, reopens the store, and checks that it holds
//! the last acknowledged state or a later one, never an older or a corrupt
//! store. Repeated until 200 rotations have been acknowledged in all.
//!
//! Run alone: `cargo test -p kms-core --test crash`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kms_core::seal::SealKey;
use kms_core::{KeyId, Keystore};

const ROTATIONS: u32 = 200;
const CHILD_DIR: &str = "KMS_CRASH_CHILD_DIR";
const CHILD_KEY: &str = "KMS_CRASH_CHILD_KEY";

fn master() -> SealKey {
    SealKey::from_bytes("crash-master", 1, &[9u8; 32]).expect("master key")
}

fn main() {
    match (std::env::var(CHILD_DIR), std::env::var(CHILD_KEY)) {
        (Ok(dir), Ok(key)) => child(Path::new(&dir), &key),
        _ => parent(),
    }
}

/// Rotates until the head passes `1 + ROTATIONS`, acknowledging each.
fn child(dir: &Path, key: &str) {
    let key: KeyId = key.parse().expect("key id");
    let ks = Keystore::open(dir, master()).expect("child: open");
    let mut out = std::io::stdout().lock();
    loop {
        let head = ks.rotate(&key).expect("child: rotate").version();
        writeln!(out, "acked {head}")
            .and_then(|()| out.flush())
            .expect("child: ack");
        if head > ROTATIONS {
            return;
        }
    }
}

fn random_below(n: u32) -> u32 {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("random");
    u32::from_le_bytes(bytes) % n
}

fn parent() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Keystore::create(dir.path(), master()).expect("create the store");
    let key = store
        .create_ed25519("acme", "crash")
        .expect("create the key");
    let v1_public_key = store.public_key(&key).expect("public key");
    drop(store);
    let exe = std::env::current_exe().expect("own path");
    let (mut acked, mut head, mut kills) = (1u32, 1u32, 0u32);
    while acked <= ROTATIONS {
        let mut child = Command::new(&exe)
            .env(CHILD_DIR, dir.path())
            .env(CHILD_KEY, key.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the child");
        let stdout = child.stdout.take().expect("child stdout");
        let reader = std::thread::spawn(move || {
            let mut newest = 0u32;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(v) = line.strip_prefix("acked ") {
                    newest = newest.max(v.parse().expect("ack"));
                }
            }
            newest
        });
        std::thread::sleep(Duration::from_micros(u64::from(random_below(30_000))));
        // SIGKILL on Unix: no destructor, no flush, no chance to finish a
        // write.
        if child.kill().is_ok() {
            kills += 1;
        }
        child.wait().expect("reap the child");
        // The pipe closes when the child dies, so every ack it printed is in.
        acked = acked.max(reader.join().expect("reader"));

        let ks = Keystore::open(dir.path(), master())
            .unwrap_or_else(|e| panic!("after kill {kills}: the store does not open: {e}"));
        let attestation = ks.attest(&key).expect("attest");
        let now = attestation.head.version();
        assert!(
            now >= acked,
            "after kill {kills}: head v{now} is older than the acknowledged v{acked}"
        );
        assert!(
            now >= head,
            "after kill {kills}: head went back from v{head} to v{now}"
        );
        assert_eq!(
            attestation.versions.len(),
            now as usize,
            "whole versions 1..=head"
        );
        let (signer, signature) = ks.sign(&key, b"after the crash").expect("sign");
        assert_eq!(signer.version(), now);
        assert_eq!(
            attestation.versions[0].public_key, v1_public_key,
            "after kill {kills}: version 1 changed"
        );
        ks.verify(&signer, b"after the crash", &signature)
            .expect("verify");
        head = now;
    }
    println!(
        "crash test: {kills} SIGKILLs, {head} versions, every acknowledged rotation kept ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
}
