//! Batch verification (DESIGN §3.3): prechecks per item, one random linear
//! combination of the cofactored equations, and exact per-item verdicts when
//! the combination fails.
//!
//! Invariant: `verify_batch(items)[i] == verify(items[i])` for every `i`,
//! whatever else is in the batch. Rules 1–3 and `k` are computed by the same
//! code as single verification ([`super::decode::prepare`]); an item reaches
//! the combined equation only if it passed them, and an item is reported
//! invalid only after its own equation failed ([`super::equation::check_one`]).
//! An item is reported valid either by its own equation or by a combination
//! that holds. A combination containing an invalid item holds with
//! probability at most 2^-128 (DESIGN §3.2 rule 4 being cofactored); an item
//! lies in at most `2·log2(n) + 1` of the combinations bisection checks, so
//! the chance it is wrongly reported valid is at most that many times 2^-128.

use curve25519_dalek::scalar::Scalar;

use super::coefficients;
use super::decode::{prepare, Prepared};
use super::equation::{check_one, combination_holds};
use super::error::SignatureError;
use super::BatchItem;

/// At or below this many items, a failed combination is resolved by checking
/// each item's own equation rather than bisecting further: below it the
/// multiscalar call saves less than the extra combination costs.
const PER_ITEM_BELOW: usize = 4;

/// See [`super::verify_batch`].
pub(crate) fn verify_batch(items: &[BatchItem<'_>]) -> Vec<Result<(), SignatureError>> {
    let mut verdicts = Vec::with_capacity(items.len());
    let mut prepared = Vec::with_capacity(items.len());
    let mut positions = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match prepare(item.public_key, item.message, item.signature) {
            Ok(p) => {
                prepared.push(p);
                positions.push(i);
                verdicts.push(Ok(()));
            }
            Err(e) => verdicts.push(Err(e)),
        }
    }
    let mut equation_verdicts = vec![Ok(()); prepared.len()];
    match prepared.len() {
        0 => {}
        1 => equation_verdicts[0] = check_one(&prepared[0]),
        n => match coefficients::draw(n) {
            Some(z) => resolve_unknown(&prepared, &z, &mut equation_verdicts),
            None => check_each(&prepared, &mut equation_verdicts),
        },
    }
    for (pos, verdict) in positions.into_iter().zip(equation_verdicts) {
        verdicts[pos] = verdict;
    }
    verdicts
}

/// Verdicts for `items` when nothing is known about them yet.
fn resolve_unknown(items: &[Prepared], z: &[Scalar], out: &mut [Result<(), SignatureError>]) {
    if items.len() <= PER_ITEM_BELOW {
        check_each(items, out);
    } else if !combination_holds(items, z) {
        resolve_failed(items, z, out);
    }
}

/// Verdicts for `items` whose combination is known to fail: bisect, and
/// when the left half's combination holds the right half must hold an
/// invalid item (its combination equals the whole minus the left), so it is
/// not checked as a whole again.
fn resolve_failed(items: &[Prepared], z: &[Scalar], out: &mut [Result<(), SignatureError>]) {
    if items.len() <= PER_ITEM_BELOW {
        check_each(items, out);
        return;
    }
    let mid = items.len() / 2;
    let (left, right) = items.split_at(mid);
    let (z_left, z_right) = z.split_at(mid);
    let (out_left, out_right) = out.split_at_mut(mid);
    if left.len() > PER_ITEM_BELOW && combination_holds(left, z_left) {
        resolve_failed(right, z_right, out_right);
    } else {
        resolve_failed(left, z_left, out_left);
        resolve_unknown(right, z_right, out_right);
    }
}

/// Each item's own equation.
fn check_each(items: &[Prepared], out: &mut [Result<(), SignatureError>]) {
    for (p, o) in items.iter().zip(out.iter_mut()) {
        *o = check_one(p);
    }
}
