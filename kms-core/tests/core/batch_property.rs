//! Property: `verify_batch(items)[i] == verify(items[i])` for random batches
//! mixing honest, tampered and torsion-crafted items (see `support`): mixes
//! with many invalid items (checked item by item), and larger batches with
//! none, one or a few (a failed combination searched by weights, then
//! bisected).

use crate::support;

use kms_core::ed25519::{verify, verify_batch, BatchItem, Component, SignatureError};
use proptest::prelude::*;
use support::{item_strategy, mostly_valid_item_strategy, Kind};

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn batch_verdict_equals_single_verdict(
        items in proptest::collection::vec(item_strategy(), 1..48)
    ) {
        let batch: Vec<BatchItem<'_>> = items
            .iter()
            .map(|(o, _)| o.item())
            .collect();
        let verdicts = verify_batch(&batch);
        prop_assert_eq!(verdicts.len(), batch.len());
        for ((item, kind), verdict) in items.iter().zip(&verdicts) {
            let single = verify(&item.public_key, &item.message, &item.signature);
            prop_assert_eq!(*verdict, single, "{:?}", kind);
            match kind {
                Kind::Honest | Kind::TorsionA(_) | Kind::TorsionR(_) => prop_assert_eq!(single, Ok(())),
                Kind::SPlusOrder => prop_assert_eq!(single, Err(SignatureError::NonCanonicalScalar)),
                Kind::SmallOrderR(_) => prop_assert!(matches!(
                    single,
                    Err(SignatureError::SmallOrder(Component::R)) | Err(SignatureError::NonCanonicalPoint(Component::R))
                )),
                Kind::SmallOrderA(_) => prop_assert!(single.is_err()),
                Kind::FlipMessageBit(_) => prop_assert!(single.is_err()),
                Kind::FlipSignatureBit(_) => prop_assert!(single.is_err()),
            }
        }
    }

    #[test]
    fn searched_batch_verdict_equals_single_verdict(
        items in proptest::collection::vec(mostly_valid_item_strategy(), 8..140)
    ) {
        let batch: Vec<BatchItem<'_>> = items.iter().map(|(o, _)| o.item()).collect();
        let verdicts = verify_batch(&batch);
        prop_assert_eq!(verdicts.len(), batch.len());
        for (i, ((item, kind), verdict)) in items.iter().zip(&verdicts).enumerate() {
            let single = verify(&item.public_key, &item.message, &item.signature);
            prop_assert_eq!(*verdict, single, "item {}: {:?}", i, kind);
        }
    }
}
