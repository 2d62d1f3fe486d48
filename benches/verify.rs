//! Ed25519 verification, ours beside ed25519-dalek, on the same inputs in
//! the same groups:
//! * `single`: our `verify` vs dalek `VerifyingKey::verify_strict`;
//! * `batch/N` (N = 64, 256, distinct keys): our `verify_batch` vs dalek
//!   `verify_batch` (with keys decoded beforehand, and with
//!   `VerifyingKey::from_bytes` inside the timed loop, which is what a
//!   verifier handed key bytes must do) vs dalek `verify_strict` in a loop.
//!
//! Run: `cargo bench --bench verify`. Results: `docs/PERFORMANCE.md`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use kms::core::ed25519::{verify, verify_batch, BatchItem};

struct Inputs {
    public_keys: Vec<[u8; 32]>,
    messages: Vec<Vec<u8>>,
    signatures: Vec<[u8; 64]>,
    dalek_keys: Vec<VerifyingKey>,
    dalek_signatures: Vec<Signature>,
}

/// `n` honest signatures under `n` distinct keys; deterministic seeds.
fn inputs(n: usize) -> Inputs {
    let mut i = Inputs {
        public_keys: Vec::new(),
        messages: Vec::new(),
        signatures: Vec::new(),
        dalek_keys: Vec::new(),
        dalek_signatures: Vec::new(),
    };
    for k in 0..n {
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&(k as u64 + 1).to_le_bytes());
        let key = SigningKey::from_bytes(&seed);
        let message =
            format!("token {k}: a typical claims set of about a hundred bytes, signed once")
                .into_bytes();
        let signature = key.sign(&message);
        i.public_keys.push(key.verifying_key().to_bytes());
        i.signatures.push(signature.to_bytes());
        i.dalek_keys.push(key.verifying_key());
        i.dalek_signatures.push(signature);
        i.messages.push(message);
    }
    i
}

fn single(c: &mut Criterion) {
    let i = inputs(1);
    let mut group = c.benchmark_group("single");
    group.throughput(Throughput::Elements(1));
    group.bench_function("ours/verify", |b| {
        b.iter(|| verify(&i.public_keys[0], &i.messages[0], &i.signatures[0]))
    });
    group.bench_function("dalek/verify_strict", |b| {
        b.iter(|| i.dalek_keys[0].verify_strict(&i.messages[0], &i.dalek_signatures[0]))
    });
    group.finish();
}

fn batch(c: &mut Criterion) {
    for n in [64usize, 256] {
        let i = inputs(n);
        let items: Vec<BatchItem<'_>> = (0..n)
            .map(|k| BatchItem {
                public_key: &i.public_keys[k],
                message: &i.messages[k],
                signature: &i.signatures[k],
            })
            .collect();
        let messages: Vec<&[u8]> = i.messages.iter().map(Vec::as_slice).collect();
        let mut group = c.benchmark_group(format!("batch/{n}"));
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(
            BenchmarkId::new("ours", "verify_batch"),
            &items,
            |b, items| {
                b.iter(|| {
                    let verdicts = verify_batch(items);
                    assert!(verdicts.iter().all(Result::is_ok));
                })
            },
        );
        group.bench_function(BenchmarkId::new("dalek", "verify_batch"), |b| {
            b.iter(|| {
                ed25519_dalek::verify_batch(&messages, &i.dalek_signatures, &i.dalek_keys)
                    .expect("valid batch")
            })
        });
        // Our API takes key bytes, so this variant decodes them inside the
        // timed loop too, as `verify_batch` from bytes must.
        group.bench_function(BenchmarkId::new("dalek", "verify_batch_from_bytes"), |b| {
            b.iter(|| {
                let keys: Vec<VerifyingKey> = i
                    .public_keys
                    .iter()
                    .map(|pk| VerifyingKey::from_bytes(pk).expect("valid key"))
                    .collect();
                ed25519_dalek::verify_batch(&messages, &i.dalek_signatures, &keys)
                    .expect("valid batch")
            })
        });
        group.bench_function(BenchmarkId::new("dalek", "verify_strict_loop"), |b| {
            b.iter(|| {
                for k in 0..n {
                    i.dalek_keys[k]
                        .verify_strict(&i.messages[k], &i.dalek_signatures[k])
                        .expect("valid");
                }
            })
        });
        group.finish();
    }
}

criterion_group!(benches, single, batch);
criterion_main!(benches);
