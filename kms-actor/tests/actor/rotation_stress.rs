//! Rotation under load through the actor (docs/DESIGN.md §3.1): one task rotates a
//! key continuously while eight clients sign with the head and verify both
//! their newest signature and older ones (made by versions that are no
//! longer the head), plus a forged copy of each. Runs for 3 s of wall
//! clock; the assertion is on verdicts, never on speed: zero wrong
//! verdicts, every version ever handed out still verifying at the end, and
//! the head never going backwards for any client.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kms_actor::{KmsActor, KmsConfig};
use kms_bus::Bus;
use kms_core::{KeyId, Keystore, KmsError};

const RUN_FOR: Duration = Duration::from_secs(3);
const CLIENTS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuous_rotation_with_eight_clients_gives_no_wrong_verdict() {
    let handle = KmsActor::spawn(
        KmsConfig::default().with_threads(2),
        Keystore::new(),
        &Bus::new(),
    )
    .expect("spawn");
    let kms = handle.client();
    let key = kms.create_key("acme", "passports").await.expect("create");
    let stop = Arc::new(AtomicBool::new(false));

    let rotator = {
        let (kms, key, stop) = (kms.clone(), key.clone(), Arc::clone(&stop));
        tokio::spawn(async move {
            let mut head = 1;
            while !stop.load(Ordering::Relaxed) {
                match kms.rotate(&key).await {
                    Ok(id) => {
                        assert_eq!(id.version(), head + 1, "rotations are sequential");
                        head = id.version();
                    }
                    Err(e) if e.is_retryable() => tokio::task::yield_now().await,
                    Err(e) => panic!("rotate failed: {e:?}"),
                }
            }
            head
        })
    };

    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let (kms, key, stop) = (kms.clone(), key.clone(), Arc::clone(&stop));
        clients.push(tokio::spawn(async move {
            let mut kept: Vec<(KeyId, Vec<u8>, [u8; 64])> = Vec::new();
            let (mut verdicts, mut last_head) = (0u64, 0u32);
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let message = format!("client {client} passport {i}").into_bytes();
                let (id, signature) = match kms.sign(&key, message.clone()).await {
                    Ok(signed) => signed,
                    Err(e) if e.is_retryable() => continue,
                    Err(e) => panic!("sign failed: {e:?}"),
                };
                assert!(id.version() >= last_head, "head went backwards");
                last_head = id.version();
                kept.push((id, message, signature));
                // The newest signature, and one older one picked by i.
                let older = (i as usize * 7919) % kept.len();
                for index in [kept.len() - 1, older] {
                    let (id, message, signature) = &kept[index];
                    verdicts += check(&kms, id, message, *signature, true).await;
                    let mut forged = *signature;
                    forged[(i % 64) as usize] ^= 0x10;
                    verdicts += check(&kms, id, message, forged, false).await;
                }
            }
            (kept, verdicts)
        }));
    }

    tokio::time::sleep(RUN_FOR).await;
    stop.store(true, Ordering::Relaxed);
    let head = rotator.await.expect("rotator");
    let mut total = 0;
    let started = Instant::now();
    for client in clients {
        let (kept, verdicts) = client.await.expect("client");
        assert!(verdicts > 0, "each client verified something");
        total += verdicts;
        // After the run, every version ever handed out still verifies.
        for (id, message, signature) in kept {
            assert!(id.version() <= head);
            assert_eq!(check(&kms, &id, &message, signature, true).await, 1);
        }
    }
    assert!(head > 1, "the key was rotated during the run");
    eprintln!(
        "{total} verdicts under {} rotations; final check took {:?}",
        head - 1,
        started.elapsed()
    );
    handle.shutdown().await;
}

/// Verifies through the actor, retrying retryable refusals; panics on a
/// wrong verdict, returns 1 (one verdict checked).
async fn check(
    kms: &kms_actor::KmsClient,
    id: &KeyId,
    message: &[u8],
    signature: [u8; 64],
    valid: bool,
) -> u64 {
    loop {
        match kms.verify(id, message.to_vec(), signature).await {
            Ok(()) if valid => return 1,
            Err(KmsError::InvalidSignature(_)) if !valid => return 1,
            Err(e) if e.is_retryable() => tokio::task::yield_now().await,
            other => panic!("{id}: expected valid = {valid}, got {other:?}"),
        }
    }
}
