//! Batch verification of one chunk (docs/DESIGN.md §3.3): prechecks per item, items
//! grouped by public key, one random linear combination of the cofactored
//! equations (or several smaller ones when failures are frequent), and exact
//! per-item verdicts when a combination fails.
//!
//! Invariant: the verdict written for item `i` equals `verify(items[i])`,
//! whatever else is in the batch. Rules 1–3 and `k` are computed by the same
//! code as single verification ([`super::decode::prepare`]); an item reaches
//! a combination only if it passed them, and an item is reported invalid
//! only after its own equation failed ([`super::equation::check_one`]). An
//! item is reported valid either by its own equation or by a combination
//! that holds (a weighted search's, `search.rs`, included). A combination
//! containing an invalid item holds with probability at most 2^-128
//! (docs/DESIGN.md §3.2 rule 4 being cofactored). An item lies in at most
//! `log2(n) + 1` of the nested groups bisection forms, each with one
//! combination (a right half's is the whole's less the left's: the same
//! random sum, not a new one), and in at most one weighted search per
//! group, which tests at most `n` candidates; so the chance it is wrongly
//! reported valid is at most `(n + 1)·(log2(n) + 1)` times 2^-128.

use std::collections::HashMap;

use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::IsIdentity;

use super::coefficients;
use super::decode::{prepare, prepare_terms, Prepared};
use super::equation::{check_one, combination, Entry};
use super::error::SignatureError;
use super::policy::{self, Plan, Resolve, PER_ITEM_BELOW};
use super::search;
use super::verifying_key::ItemKey;
use super::BatchItem;

/// One verdict slot per item.
pub(crate) type Verdict = Result<(), SignatureError>;

/// The items of a chunk that passed rules 1–3, grouped by public key.
struct Grouped {
    /// Distinct public keys, decoded, in order of first appearance.
    keys: Vec<EdwardsPoint>,
    /// Items that passed rules 1–3, in batch order.
    entries: Vec<Entry>,
}

/// Writes `verify(items[i])` into `out[i]` for every item of a chunk, as
/// `plan` says (combinations of at most `Plan::Combine`'s size, evened out,
/// or each item's own equation), and records in [`policy`] how many items
/// failed their equation. `items` and `out` have the same length.
pub(crate) fn verify_chunk(items: &[BatchItem<'_>], out: &mut [Verdict], plan: Plan) {
    debug_assert_eq!(items.len(), out.len());
    let grouped = prepare_all(items, out);
    let checked = grouped.entries.len();
    let mut evidence = Evidence::default();
    match plan {
        Plan::PerItem => check_each(&grouped.keys, &grouped.entries, out, &mut evidence),
        Plan::Combine(size) => {
            for part in grouped.entries.chunks(policy::evened(checked, size)) {
                combine(&grouped.keys, part, out, &mut evidence);
            }
        }
    }
    // Every `Equation` verdict comes from `check_each`, which counts it.
    policy::record(checked, evidence.invalid);
}

/// Rules 1–3 and `k` for every item; failures go straight to `out`. A key
/// is looked up in the key cache (or decoded) once per chunk: later items
/// under the same key reuse its number and skip the key's checks, which it
/// already passed.
fn prepare_all(items: &[BatchItem<'_>], out: &mut [Verdict]) -> Grouped {
    let mut keys = Vec::new();
    let mut key_numbers: HashMap<&[u8; 32], usize> = HashMap::new();
    let mut entries = Vec::with_capacity(items.len());
    // The previous item's key and number: runs of one key skip the hash.
    let mut last: Option<(&[u8; 32], usize)> = None;
    for (position, item) in items.iter().enumerate() {
        let bytes = item.public_key();
        let known = match last {
            Some((previous, key)) if previous == bytes => Some(key),
            _ => key_numbers.get(bytes).copied(),
        };
        let prepared = match known {
            Some(key) => {
                prepare_terms(bytes, item.message(), item.signature()).map(|terms| (key, terms))
            }
            None => prepare_item(item).map(|p| {
                keys.push(p.a);
                key_numbers.insert(bytes, keys.len() - 1);
                (keys.len() - 1, p.terms)
            }),
        };
        match prepared {
            Ok((key, terms)) => {
                last = Some((bytes, key));
                entries.push(Entry {
                    position,
                    key,
                    terms,
                });
                out[position] = Ok(());
            }
            Err(e) => out[position] = Err(e),
        }
    }
    Grouped { keys, entries }
}

/// Rules 1–3 and `k` for an item whose key this chunk has not seen: a
/// [`VerifyingKey`](super::VerifyingKey)'s point as is, raw bytes through
/// [`prepare`] (the key cache, or decoding).
fn prepare_item(item: &BatchItem<'_>) -> Result<Prepared, SignatureError> {
    match item.key() {
        ItemKey::Bytes(bytes) => prepare(bytes, item.message(), item.signature()),
        ItemKey::Verifying(key) => prepare_terms(key.as_bytes(), item.message(), item.signature())
            .map(|terms| Prepared {
                a: *key.point(),
                terms,
            }),
    }
}

/// What the chunk's checks have learned so far: items shown valid (by a
/// combination that held or their own equation) and items shown invalid. With the process-wide share it decides between
/// bisection and per-item checks, so the first batch of a flood switches to
/// per-item checks after its first small group comes back all invalid,
/// instead of bisecting every item down to a group of four.
#[derive(Default)]
struct Evidence {
    valid: usize,
    invalid: usize,
}

impl Evidence {
    /// The failure share to plan with: the larger of the recent
    /// process-wide share and the share seen in this batch.
    fn share(&self) -> f64 {
        let seen = self.valid + self.invalid;
        let local = if seen == 0 {
            0.0
        } else {
            self.invalid as f64 / seen as f64
        };
        policy::invalid_share().max(local)
    }
}

/// Verdicts for `entries` (all currently `Ok` in `out`) by one combination,
/// resolved when it fails.
fn combine(keys: &[EdwardsPoint], entries: &[Entry], out: &mut [Verdict], evidence: &mut Evidence) {
    if entries.len() <= PER_ITEM_BELOW {
        // Checked each on its own (see `resolve_unknown`): no coefficients
        // to draw. Batches of 2–4 are the idle actor's usual case.
        check_each(keys, entries, out, evidence);
        return;
    }
    match coefficients::draw(entries.len()) {
        Some(z) => resolve_unknown(keys, entries, &z, out, evidence),
        // No randomness: each item on its own needs none.
        None => check_each(keys, entries, out, evidence),
    }
}

/// Verdicts for `entries` when nothing is known about them yet.
fn resolve_unknown(
    keys: &[EdwardsPoint],
    entries: &[Entry],
    z: &[Scalar],
    out: &mut [Verdict],
    evidence: &mut Evidence,
) {
    if entries.len() <= PER_ITEM_BELOW {
        check_each(keys, entries, out, evidence);
        return;
    }
    let sum = combination(keys, entries, z);
    if sum.is_identity() {
        evidence.valid += entries.len();
    } else {
        resolve_failed(keys, entries, z, sum, out, evidence);
    }
}

/// Verdicts for `entries` whose combination under `z` is `sum`, known not
/// to be the identity (at least one item is invalid): per-item checks when
/// the cost model says a flood is likelier than a few bad items; else the
/// weighted search for a single bad item when the model says one is
/// likely ([`search::locate_one`]), then bisection. Bisection computes the
/// left half's combination only: the right half's is `sum` less the
/// left's (the combination is linear, `equation::combination`).
fn resolve_failed(
    keys: &[EdwardsPoint],
    entries: &[Entry],
    z: &[Scalar],
    sum: EdwardsPoint,
    out: &mut [Verdict],
    evidence: &mut Evidence,
) {
    let resolve = if entries.len() <= PER_ITEM_BELOW {
        Resolve::EachItem
    } else {
        policy::resolve(
            entries.len(),
            distinct_keys(keys, entries),
            evidence.share(),
        )
    };
    if resolve == Resolve::EachItem {
        check_each(keys, entries, out, evidence);
        return;
    }
    if resolve == Resolve::WeightedThenBisect {
        let found = search::locate_one(keys, entries, z, &sum);
        metrics::counter!(
            super::WEIGHTED_SEARCHES_TOTAL,
            "outcome" => if found.is_some() { "one" } else { "several" }
        )
        .increment(1);
        if let Some(j) = found {
            let bad = &entries[j];
            let verdict = check_one(&keys[bad.key], &bad.terms);
            if verdict.is_err() {
                // The others' weighted combination held: valid.
                evidence.valid += entries.len() - 1;
                evidence.invalid += 1;
                out[bad.position] = verdict;
                return;
            }
            // Its own equation holds, so the search was fooled (probability
            // at most 2^-128): bisection decides, as below.
        }
    }
    metrics::counter!(super::BISECTIONS_TOTAL).increment(1);
    let mid = entries.len() / 2;
    let (left, right) = entries.split_at(mid);
    let (z_left, z_right) = z.split_at(mid);
    if left.len() <= PER_ITEM_BELOW {
        let invalid_before = evidence.invalid;
        check_each(keys, left, out, evidence);
        if evidence.invalid == invalid_before {
            // The left half is valid: the right half holds the failure.
            resolve_failed(keys, right, z_right, sum, out, evidence);
        } else {
            resolve_unknown(keys, right, z_right, out, evidence);
        }
        return;
    }
    let left_sum = combination(keys, left, z_left);
    let right_sum = sum - left_sum;
    if left_sum.is_identity() {
        evidence.valid += left.len();
    } else {
        resolve_failed(keys, left, z_left, left_sum, out, evidence);
    }
    if right_sum.is_identity() {
        evidence.valid += right.len();
    } else {
        resolve_failed(keys, right, z_right, right_sum, out, evidence);
    }
}

/// How many distinct keys `entries` use.
fn distinct_keys(keys: &[EdwardsPoint], entries: &[Entry]) -> usize {
    let mut seen = vec![false; keys.len()];
    entries
        .iter()
        .filter(|e| !std::mem::replace(&mut seen[e.key], true))
        .count()
}

/// Each entry's own equation.
fn check_each(
    keys: &[EdwardsPoint],
    entries: &[Entry],
    out: &mut [Verdict],
    evidence: &mut Evidence,
) {
    for e in entries {
        let verdict = check_one(&keys[e.key], &e.terms);
        if verdict.is_ok() {
            evidence.valid += 1;
        } else {
            evidence.invalid += 1;
        }
        out[e.position] = verdict;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ed25519::{verify, VerifyingKey};
    use ed25519_dalek::{Signer, SigningKey};

    /// `n` items under three keys; items at `forged` signed over another
    /// message.
    fn owned(n: usize, forged: &[usize]) -> Vec<([u8; 32], Vec<u8>, [u8; 64])> {
        (0..n)
            .map(|i| {
                let key = SigningKey::from_bytes(&[(i % 3) as u8 + 1; 32]);
                let message = format!("item {i}").into_bytes();
                let signed = if forged.contains(&i) {
                    b"something else".to_vec()
                } else {
                    message.clone()
                };
                let signature = key.sign(&signed).to_bytes();
                (key.verifying_key().to_bytes(), message, signature)
            })
            .collect()
    }

    fn borrowed(owned: &[([u8; 32], Vec<u8>, [u8; 64])]) -> Vec<BatchItem<'_>> {
        owned
            .iter()
            .map(|(public_key, message, signature)| BatchItem::new(public_key, message, signature))
            .collect()
    }

    /// Items under decoded keys get the verdicts the same items under raw
    /// bytes get, mixed in one chunk with raw ones under the same keys.
    #[test]
    fn decoded_keys_give_the_verdicts_raw_bytes_give() {
        let owned = owned(100, &[3, 50, 51]);
        let decoded: Vec<VerifyingKey> = owned
            .iter()
            .map(|(pk, ..)| VerifyingKey::from_bytes(pk).expect("valid key"))
            .collect();
        let items: Vec<BatchItem<'_>> = owned
            .iter()
            .zip(&decoded)
            .enumerate()
            .map(|(i, ((pk, message, signature), key))| {
                if i % 2 == 0 {
                    BatchItem::with_verifying_key(key, message, signature)
                } else {
                    BatchItem::new(pk, message, signature)
                }
            })
            .collect();
        for plan in [Plan::Combine(100), Plan::Combine(8), Plan::PerItem] {
            let mut out = vec![Err(SignatureError::Equation); items.len()];
            verify_chunk(&items, &mut out, plan);
            for (i, ((pk, message, signature), verdict)) in owned.iter().zip(&out).enumerate() {
                assert_eq!(
                    *verdict,
                    verify(pk, message, signature),
                    "{plan:?}, item {i}"
                );
            }
        }
        assert_eq!(
            crate::ed25519::verify_batch(&items[..1]),
            vec![verify(&owned[0].0, &owned[0].1, &owned[0].2)]
        );
    }

    /// Every plan gives every item its single verdict, forged items
    /// included, whether the combination holds or bisection must find them.
    #[test]
    fn every_plan_gives_the_single_verdicts() {
        for forged in [&[][..], &[0], &[77], &[0, 77, 199], &[5, 6, 7, 8, 9, 150]] {
            let owned = owned(200, forged);
            let items = borrowed(&owned);
            for plan in [
                Plan::Combine(200),
                Plan::Combine(64),
                Plan::Combine(8),
                Plan::PerItem,
            ] {
                let mut out = vec![Err(SignatureError::Equation); items.len()];
                verify_chunk(&items, &mut out, plan);
                for (i, (item, verdict)) in items.iter().zip(&out).enumerate() {
                    let single = verify(item.public_key(), item.message(), item.signature());
                    assert_eq!(*verdict, single, "{plan:?}, item {i}");
                    assert_eq!(verdict.is_ok(), !forged.contains(&i), "{plan:?}, item {i}");
                }
            }
        }
    }

    /// The grouped combination itself holds for honest items under shared
    /// keys, at sizes on both sides of the padding range, and fails with
    /// one forged item in it.
    #[test]
    fn the_grouped_combination_holds_exactly_for_honest_batches() {
        for n in [5, 60, 150, 200] {
            for forged in [None, Some(n / 2)] {
                let owned = owned(n, forged.as_slice());
                let items = borrowed(&owned);
                let mut out = vec![Ok(()); n];
                let grouped = prepare_all(&items, &mut out);
                assert_eq!(grouped.keys.len(), 3);
                let z = coefficients::draw(n).expect("OS random source");
                assert_eq!(
                    combination(&grouped.keys, &grouped.entries, &z).is_identity(),
                    forged.is_none(),
                    "n = {n}, forged = {forged:?}"
                );
            }
        }
    }

    /// The weighted search names the one invalid item of a failed
    /// combination wherever it sits, and names none when two are invalid.
    #[test]
    fn a_weighted_search_names_the_one_invalid_item_and_no_other() {
        for n in [5, 16, 64, 200] {
            for forged in [vec![0], vec![n / 2], vec![n - 1], vec![1, n - 2]] {
                let owned = owned(n, &forged);
                let items = borrowed(&owned);
                let mut out = vec![Ok(()); n];
                let grouped = prepare_all(&items, &mut out);
                let z = coefficients::draw(n).expect("OS random source");
                let sum = combination(&grouped.keys, &grouped.entries, &z);
                assert!(!sum.is_identity(), "n = {n}, forged = {forged:?}");
                let found = search::locate_one(&grouped.keys, &grouped.entries, &z, &sum);
                let expected = match forged[..] {
                    [one] => Some(one),
                    _ => None,
                };
                assert_eq!(found, expected, "n = {n}, forged = {forged:?}");
            }
        }
    }
}
