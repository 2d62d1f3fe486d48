//! The embedder's view (`.ci/embed-check` builds this outside the
//! repository, depending on kms-core, kms-bus and kms-actor by path): spawn
//! the actor, sign and verify through it, report the curve backend, and
//! time verification with it.

use std::time::Instant;

use kms_actor::{KmsActor, KmsConfig};
use kms_bus::Bus;
use kms_core::ed25519::{curve_backend, missed_curve_backend, verify, verify_batch, BatchItem};
use kms_core::Keystore;

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let bus = Bus::new();
    let handle = KmsActor::spawn(KmsConfig::default(), Keystore::new(), &bus).expect("spawn");
    let kms = handle.client();
    let key = kms.create_key("embed", "tokens").await.expect("create");
    let (signer, signature) = kms.sign(&key, &b"claims"[..]).await.expect("sign");
    kms.verify(&signer, &b"claims"[..], signature).await.expect("verify");
    assert!(kms.verify(&signer, &b"forged"[..], signature).await.is_err());

    // Timing: 64 signatures under 8 keys, as a batch and one by one.
    let ks = Keystore::new();
    let keys: Vec<_> = (0..8)
        .map(|i| ks.create_ed25519("embed", &format!("k{i}")).expect("key"))
        .collect();
    let signed: Vec<([u8; 32], Vec<u8>, [u8; 64])> = (0..64usize)
        .map(|i| {
            let message = format!("message {i}").into_bytes();
            let (id, sig) = ks.sign(&keys[i % 8], &message).expect("sign");
            (ks.public_key(&id).expect("public key"), message, sig)
        })
        .collect();
    let items: Vec<BatchItem<'_>> = signed
        .iter()
        .map(|(pk, m, s)| BatchItem::new(pk, m, s))
        .collect();
    let rounds = 200;
    let start = Instant::now();
    for _ in 0..rounds {
        assert!(verify_batch(&items).iter().all(Result::is_ok));
    }
    let batch_us = start.elapsed().as_secs_f64() * 1e6 / (rounds * items.len()) as f64;
    let start = Instant::now();
    for _ in 0..rounds / 4 {
        for (pk, m, s) in &signed {
            verify(pk, m, s).expect("valid");
        }
    }
    let single_us = start.elapsed().as_secs_f64() * 1e6 / (rounds / 4 * signed.len()) as f64;

    println!(
        "curve_backend={} handle={} missed={} batch64_us_per_sig={batch_us:.2} single_us={single_us:.2}",
        curve_backend(),
        handle.curve_backend(),
        missed_curve_backend().map_or("none", |b| b.name()),
    );
    handle.shutdown().await;
}
