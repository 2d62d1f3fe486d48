//! A durable rotate (`Keystore::rotate` on a store made by
//! `Keystore::create`: one commit of the new version and the key's head,
//! fsynced) on a store of 10 keys beside one of 10,000 keys, in the same
//! group, so the ratio shows how a write's cost grows with the store.
//!
//! * `durable_rotate/{10_keys,10000_keys}`.
//!
//! Target: 10,000 keys ≤ 1.5 × 10 keys (a write commits its own key's
//! records only, where a one-file store such as format 1 rewrites every
//! key on every write). Setup creates the stores, one commit per key, in
//! the system's temporary directory (a real disk).
//! Run: `cargo bench --bench store`. Results: `docs/PERFORMANCE.md`.

use std::time::{Duration, Instant};

use criterion::Criterion;
use kms::core::seal::SealKey;
use kms::core::{KeyId, Keystore};

fn store(keys: usize) -> (tempfile::TempDir, Keystore, Vec<KeyId>) {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("temp dir");
    let master = SealKey::from_bytes("bench-master", 1, &[3; 32]).expect("key");
    let ks = Keystore::create(dir.path(), master).expect("create");
    let ids: Vec<KeyId> = (0..keys)
        .map(|i| ks.create_ed25519("acme", &format!("k{i}")).expect("create"))
        .collect();
    eprintln!(
        "store of {keys} keys made in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    (dir, ks, ids)
}

fn main() {
    let mut c = Criterion::default()
        .sample_size(30)
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let small = store(10);
    let large = store(10_000);
    let mut group = c.benchmark_group("durable_rotate");
    for (name, (_dir, ks, ids)) in [("10_keys", &small), ("10000_keys", &large)] {
        let mut next = 0;
        group.bench_function(name, |b| {
            b.iter(|| {
                // The first ten keys in turn, the same in both stores.
                next = (next + 1) % 10;
                ks.rotate(&ids[next]).expect("rotate")
            })
        });
    }
    group.finish();
}
