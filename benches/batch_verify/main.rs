//! Batch verification, ours beside its peers on the same inputs in the same
//! groups. Every implementation produces a verdict per item, the way its
//! users get one: the all-or-nothing batch APIs (ed25519-dalek
//! `verify_batch`, ed25519-zebra `batch::Verifier`) fall back to checking
//! each item on its own when the batch fails.
//!
//! * `keys/{distinct,16,1}/N` for N ∈ {1, 8, 64, 256, 1024}, all valid, on
//!   the calling thread (one thread; `verify_batch` never splits): ours, dalek `verify_batch`, looped dalek `verify_strict`, zebra
//!   `batch::Verifier`; at N = 1 also our single `verify`.
//! * `invalid/{0,1,100}%/{distinct,1}/256`, on the calling thread (1% is 3
//!   items of 256): the same four plus
//!   our `verify` in a loop. Invalid items are honest signatures over a
//!   message changed afterwards, spread evenly through the batch.
//! * At N = 1 and in the `invalid/` groups, aws-lc-rs's single
//!   verification in a loop (`awslc/verify_loop`): what a per-request
//!   verifier such as jsonwebtoken on aws-lc pays per token.
//! * `forged/{0,1,5,50}%/distinct/{16,32,64,128}` (`by_forged_share`):
//!   batches of N drawn from 3,200 items with that share forged at random
//!   places, ours beside aws-lc-rs, with the cost model's expectation.
//! * `threads/{1,2}/{distinct,16}/1024`: everything runs inside a rayon
//!   pool of that many threads (every one pays the hand-off into the pool).
//!   With two threads every implementation, ours included, is split in two
//!   halves with `rayon::join` (the split the actor makes for two idle
//!   threads; `verify_batch` itself never splits).
//!
//! Public keys repeat across iterations, as they do at a gateway, so ours
//! finds them in its key cache after the first iteration; dalek's
//! `VerifyingKey` is decoded once, outside the timed loop, the same way.
//! zebra's API takes key bytes and decodes each distinct key inside
//! `Verifier::verify` (and again in each single check of its fallback), so
//! with distinct keys it pays one decode per key per iteration; that is how
//! its users call it. The peers' argument vectors are built inside the
//! timed loop (a few µs per 1024 items).
//!
//! Ours keeps its failure-share estimate across iterations and groups, so
//! the `invalid/` groups show its steady state under a constant share (for
//! 100 % invalid: per-item checks). The first batch of a sudden flood costs
//! more: bisection until its first group of four comes back all invalid.
//!
//! Run: `cargo bench --bench batch_verify`. Results: `docs/PERFORMANCE.md`.

use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion, Throughput};
use ed25519_dalek::{Signer, SigningKey};
use kms::core::ed25519::{
    curve_backend, expected_cost_per_signature_us, verify, verify_batch, BatchItem,
};
use rand::SeedableRng;

/// Which public keys the items are signed under.
#[derive(Clone, Copy)]
enum Keys {
    Distinct,
    Sixteen,
    One,
}

impl Keys {
    fn name(self) -> &'static str {
        match self {
            Keys::Distinct => "distinct",
            Keys::Sixteen => "16",
            Keys::One => "1",
        }
    }

    fn key_of(self, item: usize) -> usize {
        match self {
            Keys::Distinct => item,
            Keys::Sixteen => item % 16,
            Keys::One => 0,
        }
    }
}

/// `n` signatures, `invalid` of them over a message changed after signing.
struct Inputs {
    public_keys: Vec<[u8; 32]>,
    messages: Vec<Vec<u8>>,
    signatures: Vec<[u8; 64]>,
    dalek_keys: Vec<ed25519_dalek::VerifyingKey>,
    dalek_signatures: Vec<ed25519_dalek::Signature>,
    zebra_keys: Vec<ed25519_zebra::VerificationKeyBytes>,
    zebra_signatures: Vec<ed25519_zebra::Signature>,
}

fn signing_key(k: usize) -> SigningKey {
    let mut seed = [0u8; 32];
    seed[..8].copy_from_slice(&(k as u64 + 1).to_le_bytes());
    SigningKey::from_bytes(&seed)
}

fn inputs(n: usize, keys: Keys, invalid: usize) -> Inputs {
    let mut i = Inputs {
        public_keys: Vec::new(),
        messages: Vec::new(),
        signatures: Vec::new(),
        dalek_keys: Vec::new(),
        dalek_signatures: Vec::new(),
        zebra_keys: Vec::new(),
        zebra_signatures: Vec::new(),
    };
    let forged = |item: usize| invalid > 0 && (item * invalid) % n < invalid;
    for item in 0..n {
        let key = signing_key(keys.key_of(item));
        let mut message =
            format!("token {item}: a typical claims set of about a hundred bytes, signed once")
                .into_bytes();
        let signature = key.sign(&message);
        if forged(item) {
            message[0] ^= 1;
        }
        i.public_keys.push(key.verifying_key().to_bytes());
        i.signatures.push(signature.to_bytes());
        i.dalek_keys.push(key.verifying_key());
        i.dalek_signatures.push(signature);
        i.zebra_keys.push(key.verifying_key().to_bytes().into());
        i.zebra_signatures
            .push(ed25519_zebra::Signature::from_bytes(&signature.to_bytes()));
        i.messages.push(message);
    }
    let count = (0..n).filter(|&item| forged(item)).count();
    assert_eq!(count, invalid, "forged items");
    i
}

impl Inputs {
    fn items(&self) -> Vec<BatchItem<'_>> {
        (0..self.messages.len())
            .map(|k| BatchItem::new(&self.public_keys[k], &self.messages[k], &self.signatures[k]))
            .collect()
    }

    fn len(&self) -> usize {
        self.messages.len()
    }

    /// Valid items among `range`, by ed25519-dalek `verify_batch`, falling
    /// back to `verify_strict` per item when the batch fails.
    fn dalek_batch(&self, range: std::ops::Range<usize>) -> usize {
        let messages: Vec<&[u8]> = self.messages[range.clone()]
            .iter()
            .map(Vec::as_slice)
            .collect();
        let signatures = &self.dalek_signatures[range.clone()];
        let keys = &self.dalek_keys[range.clone()];
        if ed25519_dalek::verify_batch(&messages, signatures, keys).is_ok() {
            range.len()
        } else {
            self.strict_loop(range)
        }
    }

    /// Valid items among `range` by looped ed25519-dalek `verify_strict`.
    fn strict_loop(&self, range: std::ops::Range<usize>) -> usize {
        range
            .filter(|&k| {
                self.dalek_keys[k]
                    .verify_strict(&self.messages[k], &self.dalek_signatures[k])
                    .is_ok()
            })
            .count()
    }

    /// Valid items among `range` by ed25519-zebra `batch::Verifier`, falling
    /// back to each item's own check when the batch fails.
    fn zebra_batch(&self, range: std::ops::Range<usize>) -> usize {
        let items: Vec<ed25519_zebra::batch::Item> = range
            .clone()
            .map(|k| {
                (
                    self.zebra_keys[k],
                    self.zebra_signatures[k],
                    &self.messages[k],
                )
                    .into()
            })
            .collect();
        let mut verifier = ed25519_zebra::batch::Verifier::new();
        for item in items.iter().cloned() {
            verifier.queue(item);
        }
        if verifier.verify(rand::rng()).is_ok() {
            items.len()
        } else {
            items
                .into_iter()
                .filter(|item| item.clone().verify_single().is_ok())
                .count()
        }
    }
}

/// Valid items among `items` by aws-lc-rs's single verification, one call
/// per item with the key as bytes (`UnparsedPublicKey`), as jsonwebtoken's
/// `aws_lc_rs` backend verifies each EdDSA token: the per-request peer's
/// real cost.
fn awslc_loop(items: &[BatchItem<'_>]) -> usize {
    items
        .iter()
        .filter(|i| {
            aws_lc_rs::signature::UnparsedPublicKey::new(
                &aws_lc_rs::signature::ED25519,
                i.public_key(),
            )
            .verify(i.message(), i.signature())
            .is_ok()
        })
        .count()
}

fn ours_batch(items: &[BatchItem<'_>]) -> usize {
    verify_batch(items).iter().filter(|v| v.is_ok()).count()
}

fn ours_loop(items: &[BatchItem<'_>]) -> usize {
    items
        .iter()
        .filter(|i| verify(i.public_key(), i.message(), i.signature()).is_ok())
        .count()
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(move |i| format!("bench-{threads}-{i}"))
        .build()
        .expect("rayon pool")
}

/// Measures the four implementations on `inputs`, on the calling thread
/// (`pool` = `None`) or inside `pool`; `valid` is the number of valid items
/// every one must report.
fn peers(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    inputs: &Inputs,
    pool: Option<&rayon::ThreadPool>,
    valid: usize,
    with_loop: bool,
) {
    let items = inputs.items();
    let n = inputs.len();
    let split = pool.is_some_and(|p| p.current_num_threads() > 1) && n > 1;
    let on_pool = |f: &(dyn Fn() + Sync)| match pool {
        Some(pool) => pool.install(f),
        None => f(),
    };
    let halves = |f: &(dyn Fn(std::ops::Range<usize>) -> usize + Sync)| {
        if split {
            let (a, b) = rayon::join(|| f(0..n / 2), || f(n / 2..n));
            a + b
        } else {
            f(0..n)
        }
    };
    group.bench_function("ours/verify_batch", |b| {
        b.iter(|| on_pool(&|| assert_eq!(halves(&|r| ours_batch(&items[r])), valid)))
    });
    group.bench_function("dalek/verify_batch", |b| {
        b.iter(|| on_pool(&|| assert_eq!(halves(&|r| inputs.dalek_batch(r)), valid)))
    });
    group.bench_function("dalek/verify_strict_loop", |b| {
        b.iter(|| on_pool(&|| assert_eq!(halves(&|r| inputs.strict_loop(r)), valid)))
    });
    group.bench_function("zebra/batch_verifier", |b| {
        b.iter(|| on_pool(&|| assert_eq!(halves(&|r| inputs.zebra_batch(r)), valid)))
    });
    if with_loop {
        group.bench_function("ours/verify_loop", |b| {
            b.iter(|| on_pool(&|| assert_eq!(ours_loop(&items), valid)))
        });
        group.bench_function("awslc/verify_loop", |b| {
            b.iter(|| on_pool(&|| assert_eq!(awslc_loop(&items), valid)))
        });
    }
}

fn configure(group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>, n: usize) {
    group
        .throughput(Throughput::Elements(n as u64))
        .sample_size(20)
        .warm_up_time(Duration::from_millis(800))
        .measurement_time(Duration::from_secs(2));
}

fn by_keys(c: &mut Criterion) {
    for keys in [Keys::Distinct, Keys::Sixteen, Keys::One] {
        for n in [1usize, 8, 64, 256, 1024] {
            let inputs = inputs(n, keys, 0);
            let mut group = c.benchmark_group(format!("keys/{}/{n}", keys.name()));
            configure(&mut group, n);
            peers(&mut group, &inputs, None, n, n == 1);
            group.finish();
        }
    }
}

fn by_invalid_share(c: &mut Criterion) {
    let n = 256;
    for keys in [Keys::Distinct, Keys::One] {
        for (label, invalid) in [("0%", 0), ("1%", 3), ("100%", n)] {
            let inputs = inputs(n, keys, invalid);
            let mut group = c.benchmark_group(format!("invalid/{label}/{}/{n}", keys.name()));
            configure(&mut group, n);
            peers(&mut group, &inputs, None, n - invalid, true);
            group.finish();
        }
    }
}

/// `forged/{0,1,5,50}%/distinct/N` for N ∈ {16, 32, 64, 128}: 3,200
/// items (25 to 200 batches of N), that share of them forged at places
/// drawn once from a fixed seed, so a batch holds none, one or several as
/// chance has it; each iteration verifies every batch. Ours in batches of
/// N beside aws-lc-rs's single verification of the same items, and the
/// cost model's expected µs per signature printed before each group
/// (`kms_core::ed25519::expected_cost_per_signature_us`).
fn by_forged_share(c: &mut Criterion) {
    const TOTAL: usize = 3200;
    for (label, share) in [("0%", 0.0), ("1%", 0.01), ("5%", 0.05), ("50%", 0.5)] {
        let forged = (TOTAL as f64 * share) as usize;
        let inputs = scattered(TOTAL, forged);
        let items = inputs.items();
        let valid = TOTAL - forged;
        for n in [16usize, 32, 64, 128] {
            println!(
                "forged/{label}/distinct/{n}: model {:.1} µs per signature",
                expected_cost_per_signature_us(n, share)
            );
            let mut group = c.benchmark_group(format!("forged/{label}/distinct/{n}"));
            configure(&mut group, TOTAL);
            group.bench_function("ours/verify_batch", |b| {
                b.iter(|| {
                    let ok: usize = items.chunks(n).map(ours_batch).sum();
                    assert_eq!(ok, valid);
                })
            });
            group.bench_function("awslc/verify_loop", |b| {
                b.iter(|| assert_eq!(awslc_loop(&items), valid))
            });
            group.finish();
        }
    }
}

/// `n` signatures under distinct keys, `forged` of them (at places drawn
/// from a fixed seed) over a message changed after signing.
fn scattered(n: usize, forged: usize) -> Inputs {
    let mut inputs = inputs(n, Keys::Distinct, 0);
    let mut rng = rand::rngs::StdRng::seed_from_u64(48);
    for item in rand::seq::index::sample(&mut rng, n, forged) {
        inputs.messages[item][0] ^= 1;
    }
    inputs
}

fn by_threads(c: &mut Criterion) {
    let n = 1024;
    for keys in [Keys::Distinct, Keys::Sixteen] {
        let inputs = inputs(n, keys, 0);
        for threads in [1, 2] {
            let pool = pool(threads);
            let mut group = c.benchmark_group(format!("threads/{threads}/{}/{n}", keys.name()));
            configure(&mut group, n);
            peers(&mut group, &inputs, Some(&pool), n, false);
            group.finish();
        }
    }
}

fn main() {
    println!("curve25519-dalek backend: {}", curve_backend());
    let mut c = Criterion::default().configure_from_args();
    by_keys(&mut c);
    by_invalid_share(&mut c);
    by_forged_share(&mut c);
    by_threads(&mut c);
    c.final_summary();
}
