//! Differential test against ed25519-zebra (ZIP-215 rules; dev-dependency
//! only): on every input that passes our prechecks (docs/DESIGN.md §3.2 rules 1–3),
//! our verdict equals zebra's. ZIP-215 accepts non-canonical encodings and
//! small-order points that we reject, so inputs failing our prechecks are
//! only checked against our own single `verify`.
//!
//! Batches here exercise what the batch path adds: keys shared by many
//! items (one `A` term each), sizes around the padding thresholds, batches
//! split in two halves verified on two threads (as the actor splits a
//! batch for idle pool threads) and whole, and batches mixing honest,
//! tampered and torsion-crafted items.

use crate::support;

use kms_core::ed25519::{verify, verify_batch, BatchItem, SignatureError};
use proptest::prelude::*;
use support::{build, kind, Owned};

/// Zebra's single verification under ZIP-215.
fn zebra_accepts(o: &Owned) -> bool {
    let signature = ed25519_zebra::Signature::from_bytes(&o.signature);
    ed25519_zebra::VerificationKey::try_from(o.public_key)
        .and_then(|vk| vk.verify(&signature, &o.message))
        .is_ok()
}

/// Passed rules 1–3: only the equation decided the verdict.
fn passed_prechecks(verdict: &Result<(), SignatureError>) -> bool {
    matches!(verdict, Ok(()) | Err(SignatureError::Equation))
}

fn check(items: &[Owned], verdicts: &[Result<(), SignatureError>]) -> Result<(), TestCaseError> {
    prop_assert_eq!(verdicts.len(), items.len());
    for (i, (o, verdict)) in items.iter().zip(verdicts).enumerate() {
        let single = verify(&o.public_key, &o.message, &o.signature);
        prop_assert_eq!(*verdict, single, "item {}: batch vs single", i);
        if passed_prechecks(verdict) {
            prop_assert_eq!(
                verdict.is_ok(),
                zebra_accepts(o),
                "item {}: ours vs zebra",
                i
            );
        }
    }
    Ok(())
}

/// Items under a handful of keys: the key seed is one of `keys` values.
fn batch_strategy(max: usize) -> impl Strategy<Value = Vec<Owned>> {
    (1u8..=6).prop_flat_map(move |keys| {
        proptest::collection::vec(
            (
                0..keys,
                proptest::collection::vec(any::<u8>(), 0..48),
                kind(),
            ),
            1..max,
        )
        .prop_map(|items| {
            items
                .into_iter()
                .map(|(key, message, kind)| build([key; 32], message, &kind))
                .collect()
        })
    })
}

/// `verify_batch` of each half of `batch` on its own thread, verdicts in
/// order: what the actor does with a batch for two idle threads.
fn split_in_two(batch: &[BatchItem<'_>]) -> Vec<Result<(), SignatureError>> {
    let (first, second) = batch.split_at(batch.len() / 2);
    std::thread::scope(|s| {
        let first = s.spawn(|| verify_batch(first));
        let mut verdicts = verify_batch(second);
        let mut out = first.join().expect("first half");
        out.append(&mut verdicts);
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Shared keys, sizes up to 300 (through the padded-Pippenger range),
    /// split across two threads.
    #[test]
    fn shared_keys_split_in_two_match_single_and_zebra(items in batch_strategy(300)) {
        let batch: Vec<BatchItem<'_>> = items.iter().map(Owned::item).collect();
        let verdicts = split_in_two(&batch);
        check(&items, &verdicts)?;
    }

    /// The same as one batch on the calling thread.
    #[test]
    fn shared_keys_on_the_calling_thread_match_single_and_zebra(items in batch_strategy(200)) {
        let batch: Vec<BatchItem<'_>> = items.iter().map(Owned::item).collect();
        let verdicts = verify_batch(&batch);
        check(&items, &verdicts)?;
    }

    /// Random bytes: almost all fail the prechecks, and those that pass
    /// (random points) must agree with zebra too.
    #[test]
    fn random_bytes_match_single_and_zebra(
        raw in proptest::collection::vec((any::<[u8; 32]>(), any::<[u8; 32]>(), any::<[u8; 32]>()), 1..40),
        message in proptest::collection::vec(any::<u8>(), 0..32),
    ) {
        let items: Vec<Owned> = raw
            .into_iter()
            .map(|(public_key, r, s)| {
                let mut signature = [0u8; 64];
                signature[..32].copy_from_slice(&r);
                signature[32..].copy_from_slice(&s);
                signature[63] &= 0x0f; // s below 2^252: often canonical
                Owned { public_key, message: message.clone(), signature }
            })
            .collect();
        let batch: Vec<BatchItem<'_>> = items.iter().map(Owned::item).collect();
        check(&items, &verify_batch(&batch))?;
    }
}

/// Fixed sizes whose sums fall in and around the padded range (144–189
/// points), with two forged items, whole and split in two.
#[test]
fn fixed_sizes_around_the_padding_match_single_and_zebra() {
    use support::Kind;
    for n in [60, 140, 160, 180, 190, 260] {
        let items: Vec<Owned> = (0..n)
            .map(|i| {
                let kind = if i == 3 || i == n - 2 {
                    Kind::FlipMessageBit(i)
                } else {
                    Kind::Honest
                };
                build([(i % 3) as u8; 32], format!("{n}/{i}").into_bytes(), &kind)
            })
            .collect();
        let batch: Vec<BatchItem<'_>> = items.iter().map(Owned::item).collect();
        check(&items, &verify_batch(&batch)).expect("calling thread");
        check(&items, &split_in_two(&batch)).expect("split in two");
    }
}

/// A forged flood followed by honest batches: every verdict stays exact
/// while the failure policy moves from per-item checks back to large
/// combinations.
#[test]
fn verdicts_stay_exact_through_a_flood_and_after() {
    use support::Kind;
    let honest: Vec<Owned> = (0..256u32)
        .map(|i| build([(i % 3) as u8; 32], i.to_le_bytes().to_vec(), &Kind::Honest))
        .collect();
    let forged: Vec<Owned> = (0..256u32)
        .map(|i| {
            build(
                [(i % 3) as u8; 32],
                i.to_le_bytes().to_vec(),
                &Kind::FlipMessageBit(i as usize),
            )
        })
        .collect();
    for round in 0..6 {
        let items = if round < 3 { &forged } else { &honest };
        let batch: Vec<BatchItem<'_>> = items.iter().map(Owned::item).collect();
        let verdicts = split_in_two(&batch);
        let expected = if round < 3 {
            Err(SignatureError::Equation)
        } else {
            Ok(())
        };
        assert!(
            verdicts.iter().all(|v| *v == expected),
            "round {round}: {:?}",
            verdicts.iter().filter(|v| **v != expected).count()
        );
    }
}
