//! `kms_core::seal` beside the bare AEAD it wraps, on the same inputs in the
//! same group: `XChaCha20Poly1305` from the `chacha20poly1305` crate with a
//! fresh random nonce per call (as ours draws one) and the same associated
//! data. Ours also builds and authenticates the header, counts, and
//! returns the plaintext in a zeroizing buffer.
//!
//! * `seal/{32B,64KiB}/{ours,bare}` and `open/{32B,64KiB}/{ours,bare}`.
//!
//! Targets: ≤ 1.3 × the bare AEAD at 32 bytes, ≤ 1.05 × at 64 KiB.
//! Run: `cargo bench --bench seal`. Results: `docs/PERFORMANCE.md`.

use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use criterion::{Criterion, Throughput};
use kms::core::seal::SealKey;

const AAD: &[u8] = b"kms:acme:tokens:ed25519:seed";

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let key_bytes = [7u8; 32];
    let ours = SealKey::from_bytes("master", 1, &key_bytes).expect("key");
    let bare = XChaCha20Poly1305::new(&key_bytes.into());
    for (name, len) in [("32B", 32usize), ("64KiB", 64 << 10)] {
        let plaintext = vec![0x5au8; len];
        let mut group = c.benchmark_group(format!("seal/{name}"));
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function("ours", |b| {
            b.iter(|| ours.seal(AAD, &plaintext).expect("seal"))
        });
        group.bench_function("bare", |b| {
            b.iter(|| {
                let nonce = XNonce::generate();
                let ct = bare
                    .encrypt(
                        &nonce,
                        Payload {
                            msg: &plaintext,
                            aad: AAD,
                        },
                    )
                    .expect("encrypt");
                (nonce, ct)
            })
        });
        group.finish();

        let envelope = ours.seal(AAD, &plaintext).expect("seal");
        let nonce = XNonce::generate();
        let ciphertext = bare
            .encrypt(
                &nonce,
                Payload {
                    msg: &plaintext,
                    aad: AAD,
                },
            )
            .expect("encrypt");
        let mut group = c.benchmark_group(format!("open/{name}"));
        group.throughput(Throughput::Bytes(len as u64));
        group.bench_function("ours", |b| {
            b.iter(|| ours.open(AAD, &envelope).expect("open"))
        });
        group.bench_function("bare", |b| {
            b.iter(|| {
                bare.decrypt(
                    &nonce,
                    Payload {
                        msg: &ciphertext,
                        aad: AAD,
                    },
                )
                .expect("decrypt")
            })
        });
        group.finish();
    }
    c.final_summary();
}
