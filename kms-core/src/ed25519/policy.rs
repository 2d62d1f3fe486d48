//! Adaptive failure handling (docs/DESIGN.md §3.3): how large the combinations are
//! and how a failed one finds its invalid items (each item's own equation,
//! a weighted search for a single one, bisection), steered by how often
//! items have been failing lately.
//!
//! Invariant: nothing here affects a verdict, only the cost of reaching it.
//! Every path (one combination, smaller combinations, bisection, per-item
//! checks) reports an item invalid only when its own equation fails and
//! valid only when its own equation or a random combination containing it
//! holds.
//!
//! The cost model counts in units of one item's own equation
//! (`equation::check_one`, a variable-time double-scalar multiplication,
//! about 13 µs here). A combination of `p` points costs what curve25519-dalek's
//! multiscalar multiplication costs: Straus below [`PIPPENGER_FROM`] points
//! ([`STRAUS_FIXED`] + [`STRAUS_PER_POINT`] × `p`), Pippenger from there
//! ([`PIPPENGER_FIXED`] + [`PIPPENGER_PER_POINT`] × `max(p, 190)`, since
//! `equation::combination` pads such sums to 190 points). Decoding and
//! hashing cost the same on every path and are left out. The constants
//! were measured with the AVX-512 IFMA backend on this project's bench
//! machine (docs/PERFORMANCE.md); being off by a factor changes which path
//! runs near a crossover, never a verdict.
//!
//! The share of failing items is a process-wide exponentially weighted
//! average over the items that reached the equation, so when an attacker
//! sprays forged signatures, batches shrink (down to per-item checks), and
//! when the flood stops they grow back within a few batches.

use std::sync::atomic::{AtomicU32, Ordering};

/// One item's own equation, in µs (measured: our `verify` loop at 18.8 µs
/// per item, less 4.1 µs decoding `R` and 0.5 µs hashing, rounded).
const EQUATION_US: f64 = 13.0;
/// Straus: fixed cost, in single-equation units (10 µs measured).
const STRAUS_FIXED: f64 = 10.0 / EQUATION_US;
/// Straus: cost per point, in single-equation units (1.6 µs measured).
const STRAUS_PER_POINT: f64 = 1.6 / EQUATION_US;
/// Pippenger: fixed cost, in single-equation units (60 µs measured).
const PIPPENGER_FIXED: f64 = 60.0 / EQUATION_US;
/// Pippenger: cost per point, in single-equation units (1.12 µs measured).
const PIPPENGER_PER_POINT: f64 = 1.12 / EQUATION_US;
/// From this many points a sum runs as Pippenger (see
/// `equation::PAD_TO_PIPPENGER_FROM`).
const PIPPENGER_FROM: f64 = super::equation::PAD_TO_PIPPENGER_FROM as f64;
/// curve25519-dalek runs Pippenger from this many points (edwards.rs).
const DALEK_PIPPENGER_FROM: f64 = super::equation::DALEK_PIPPENGER_FROM as f64;
/// At or below this many items a failed group is resolved by each item's
/// own equation: bisecting further saves less than a combination costs.
pub(crate) const PER_ITEM_BELOW: usize = 4;
/// Smallest combination worth making when failures are frequent.
const SMALLEST_BATCH: usize = 8;
/// Items of memory in the failure average: a batch of this many items moves
/// the estimate halfway to what it observed.
const MEMORY_ITEMS: f64 = 256.0;
/// Fixed-point scale of [`INVALID_SHARE`].
const SCALE: f64 = (1u32 << 24) as f64;

/// Recent share of items failing their equation, times 2^24.
///
/// Relaxed loads and stores: the value only steers cost, no other memory is
/// published through it, and a lost update between two concurrent batches
/// only drops one observation from the average.
static INVALID_SHARE: AtomicU32 = AtomicU32::new(0);

/// How to check the items of one batch that passed rules 1–3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Combinations of at most this many items each.
    Combine(usize),
    /// Each item's own equation; no combination.
    PerItem,
}

/// The size of each of the combinations `n` items are checked in under
/// [`Plan::Combine`]`(size)`: as many as combinations of at most `size`
/// need, evened out (they differ by at most one item).
pub(crate) fn evened(n: usize, size: usize) -> usize {
    let chunks = n.div_ceil(size.max(1)).max(1);
    n.div_ceil(chunks).max(1)
}

/// The recent share of items failing their equation, in `[0, 1]`.
pub(crate) fn invalid_share() -> f64 {
    f64::from(INVALID_SHARE.load(Ordering::Relaxed)) / SCALE
}

/// Records that `invalid` of `checked` items failed their own equation.
pub(crate) fn record(checked: usize, invalid: usize) {
    if checked == 0 {
        return;
    }
    let next = updated_share(invalid_share(), checked, invalid);
    INVALID_SHARE.store((next * SCALE) as u32, Ordering::Relaxed);
}

/// The average after observing `invalid` failures in `checked` items.
fn updated_share(previous: f64, checked: usize, invalid: usize) -> f64 {
    let observed = invalid as f64 / checked as f64;
    let weight = checked as f64 / (checked as f64 + MEMORY_ITEMS);
    (previous + (observed - previous) * weight).clamp(0.0, 1.0)
}

/// The plan for `n` items at the current failure share.
pub(crate) fn plan(n: usize) -> Plan {
    plan_for(n, invalid_share())
}

/// The plan for `n` items when a share `f` of items fails: the combination
/// size with the lowest expected cost per item, or per-item checks when no
/// size beats one equation per item. Assumes distinct keys (two points per
/// item), the case least favourable to combining.
pub(crate) fn plan_for(n: usize, f: f64) -> Plan {
    if n <= 1 {
        return Plan::PerItem;
    }
    let mut best = (1.0, Plan::PerItem);
    let mut size = n;
    loop {
        let cost = expected_cost_per_item(size, f, 2.0);
        if cost < best.0 {
            best = (cost, Plan::Combine(size));
        }
        if size <= SMALLEST_BATCH {
            break;
        }
        size = size.div_ceil(2).max(SMALLEST_BATCH);
    }
    best.1
}

/// Hashing the message and decoding `R` (µs per item; measured as
/// [`EQUATION_US`] was): paid by every item that reaches the equation, on
/// every path.
const PREPARE_US: f64 = 4.6;

/// The model's expected cost (µs per signature, on the machine its
/// constants were measured on: docs/PERFORMANCE.md, "Batch verification")
/// of verifying batches of `n` items with distinct keys of which a share
/// `f` fails its equation, in the steady state (the failure average at
/// `f`): the plan the model picks (`plan_for`), its combinations and their
/// resolution, and each item's hashing and decoding. Benches print it
/// beside what they measure (`benches/batch_verify/main.rs`).
pub fn expected_cost_per_signature_us(n: usize, f: f64) -> f64 {
    let units = match plan_for(n, f) {
        Plan::PerItem => 1.0,
        Plan::Combine(size) => {
            let size = evened(n, size);
            if size <= PER_ITEM_BELOW {
                1.0
            } else {
                expected_cost_per_item(size, f, 2.0)
            }
        }
    };
    units * EQUATION_US + PREPARE_US
}

/// How a failed combination finds its invalid items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resolve {
    /// Each item's own equation.
    EachItem,
    /// Bisection: the left half's combination at each level.
    Bisect,
    /// A weighted search for its one invalid item (`search.rs`), then
    /// bisection if it finds several.
    WeightedThenBisect,
}

/// The cheapest way to resolve a failed combination of `m` items under
/// `keys` distinct keys when a share `f` of items fails (at least one item
/// is invalid; `f·m` are expected, at least one). The weighted search
/// costs one combination of the same points and one equation, and saves
/// the bisection when exactly one item is invalid: with `λ = f·m` (a
/// Poisson count, at least one since the combination failed), with
/// probability `λe^-λ / (1 - e^-λ)` (1 as `λ → 0`).
pub(crate) fn resolve(m: usize, keys: usize, f: f64) -> Resolve {
    if m <= PER_ITEM_BELOW {
        return Resolve::EachItem;
    }
    let m_f = m as f64;
    let points_per_item = (m_f + keys as f64) / m_f;
    cheapest_resolve(m_f, (f * m_f).max(1.0), f, points_per_item).1
}

/// The probability that exactly one item is invalid when at least one is,
/// for a Poisson count of mean `lambda`.
fn one_invalid_given_failure(lambda: f64) -> f64 {
    if lambda < 1e-9 {
        1.0
    } else {
        lambda * (-lambda).exp() / -(-lambda).exp_m1()
    }
}

/// Cost of a weighted search in a failed group of `m` items: one
/// combination of the group's points and the equation of the item it
/// names (its `m` point additions are negligible).
fn weighted_search_cost(m: f64, points_per_item: f64) -> f64 {
    combination_cost(points_per_item * m + 1.0) + 1.0
}

/// The cheapest way to resolve a failed group of `m` items holding
/// `invalid` invalid ones (expected), and its cost: each item's equation,
/// bisection, or a weighted search first and bisection when it finds
/// several. On a tie, the simpler way (in that order).
fn cheapest_resolve(m: f64, invalid: f64, f: f64, points_per_item: f64) -> (f64, Resolve) {
    let bisect = bisection_cost(m, invalid, points_per_item);
    let weighted = weighted_search_cost(m, points_per_item)
        + (1.0 - one_invalid_given_failure(f * m)) * bisect;
    [
        (bisect, Resolve::Bisect),
        (weighted, Resolve::WeightedThenBisect),
    ]
    .into_iter()
    .fold((m, Resolve::EachItem), |best, way| {
        if way.0 < best.0 {
            way
        } else {
            best
        }
    })
}

/// Cost of one combination of `points` points.
fn combination_cost(points: f64) -> f64 {
    if points < PIPPENGER_FROM {
        STRAUS_FIXED + STRAUS_PER_POINT * points
    } else {
        PIPPENGER_FIXED + PIPPENGER_PER_POINT * points.max(DALEK_PIPPENGER_FROM)
    }
}

/// Expected cost per item of combinations of `size` items when a share `f`
/// fails: the combination, plus resolving it when it fails.
fn expected_cost_per_item(size: usize, f: f64, points_per_item: f64) -> f64 {
    let s = size as f64;
    let p_fail = 1.0 - (1.0 - f).powf(s);
    let resolve = if p_fail > 0.0 {
        let invalid_given_fail = (f * s / p_fail).max(1.0);
        cheapest_resolve(s, invalid_given_fail, f, points_per_item).0
    } else {
        0.0
    };
    (combination_cost(points_per_item * s + 1.0) + p_fail * resolve) / s
}

/// Cost of bisecting a failed group of `m` items holding `invalid` invalid
/// ones: at each level every failed group checks its left half (the right
/// half's combination is the group's less the left's), until groups are
/// small enough to check item by item.
fn bisection_cost(m: f64, invalid: f64, points_per_item: f64) -> f64 {
    let mut cost = 0.0;
    let mut group = m;
    let mut failed_groups: f64 = 1.0;
    while group > PER_ITEM_BELOW as f64 {
        cost += failed_groups * combination_cost(points_per_item * group / 2.0 + 1.0);
        group /= 2.0;
        failed_groups = (failed_groups * 2.0).min(invalid);
    }
    cost + failed_groups * group
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_calm_batch_is_one_combination() {
        for n in [8, 64, 256, 1024, 4096] {
            assert_eq!(plan_for(n, 0.0), Plan::Combine(n), "n = {n}");
        }
    }

    #[test]
    fn batches_shrink_as_failures_grow_and_end_per_item() {
        let mut last = usize::MAX;
        for f in [0.0, 0.001, 0.01, 0.02] {
            match plan_for(1024, f) {
                Plan::Combine(size) => {
                    assert!(size <= last, "f = {f}: {size} > {last}");
                    last = size;
                }
                Plan::PerItem => panic!("f = {f}: per item too early"),
            }
        }
        assert!(last < 1024);
        assert_eq!(plan_for(1024, 0.2), Plan::PerItem);
        assert_eq!(plan_for(1024, 0.5), Plan::PerItem);
        assert_eq!(plan_for(1024, 1.0), Plan::PerItem);
    }

    #[test]
    fn one_bad_item_is_bisected_a_flood_is_checked_per_item() {
        assert_ne!(resolve(256, 256, 0.0), Resolve::EachItem);
        assert_ne!(resolve(256, 1, 0.004), Resolve::EachItem);
        assert_eq!(resolve(256, 256, 0.5), Resolve::EachItem);
        assert_eq!(resolve(PER_ITEM_BELOW, 1, 0.0), Resolve::EachItem);
    }

    #[test]
    fn a_likely_single_bad_item_is_searched_for_by_weights() {
        let weighted = Resolve::WeightedThenBisect;
        for m in [8, 16, 64, 256] {
            assert_eq!(resolve(m, m, 0.0), weighted, "m = {m}");
        }
        assert_eq!(resolve(64, 64, 0.005), weighted);
        assert_ne!(resolve(256, 256, 0.05), weighted, "~13 expected");
        assert_ne!(resolve(PER_ITEM_BELOW, 1, 0.0), weighted);
        assert!((one_invalid_given_failure(0.0) - 1.0).abs() < 1e-12);
        assert!((one_invalid_given_failure(1.0) - 0.5820).abs() < 1e-3);
    }

    #[test]
    fn the_average_moves_toward_what_it_observes() {
        let up = updated_share(0.0, 256, 256);
        assert!((up - 0.5).abs() < 1e-9);
        let down = updated_share(1.0, 256, 0);
        assert!((down - 0.5).abs() < 1e-9);
        assert!(updated_share(0.3, 10, 10) > 0.3);
        assert!(updated_share(0.3, 10, 0) < 0.3);
    }
}
