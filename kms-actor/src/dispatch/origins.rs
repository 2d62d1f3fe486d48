//! [`OriginTable`]: a bounded, decaying record of how often each origin's
//! signatures fail (`crate::Origin`), and the rule that keeps a failing
//! origin's requests out of other origins' batches (`batch.rs`).
//!
//! Why: one invalid signature fails the whole combination it is in, and
//! the share of failures kms-core sizes its combinations by is
//! process-wide (kms-core's `policy.rs`): an attacker's forgeries, mixed
//! into everyone's batches, both fail them and shrink them. Verified
//! alone, a request costs one single verification and leaves that share
//! alone (a batch of one is checked as `verify` checks it). So a request
//! whose origin's decayed failure share exceeds [`SET_APART_SHARE`] (1/8,
//! with at least half a failure left after decay) is verified alone,
//! after the clean requests of its dispatch. 1/8 is where kms-core's cost
//! model stops combining: a batch failing that often costs as much as
//! its items checked one by one (at 64 items, 0.92 of a single
//! verification per item at 12 %, 1 from 15 %). An origin failing less
//! often (a client whose tokens are sometimes forged by someone else, a
//! broken client) costs less in batches, which the model sizes for the
//! share it brings, than alone.
//!
//! The record (invariants):
//! * A fixed table of slots (a power of two, allocated once, never grown),
//!   each an origin's hash and its decayed counts of failures and of
//!   verdicts; an origin lives in one of the [`PROBE`] slots from its hash.
//!   Counts halve every [`HALF_LIFE`]: the "decay period".
//! * Every origin that gets a verdict is recorded, clean ones too: a clean
//!   origin that holds a record keeps its batches whatever other origins
//!   do. A new origin takes an empty slot, or a stale one (less than
//!   [`STALE_BELOW`] verdicts left after decay: nothing heard for about
//!   three decay periods), never a live one: a flood of new origins cannot
//!   evict a failing origin's record.
//! * An origin that finds no slot is untracked, and every untracked
//!   origin shares one overflow record: while the untracked origins' own
//!   failure share is above the threshold (the overflow record is hot),
//!   every untracked origin is set apart; a verdict of a failing untracked
//!   origin counts as an overflow (`kms_origin_table_overflows_total`).
//!   Chosen over a count-min sketch: it needs no second structure, never
//!   sets apart a tracked clean origin, and is exact about whom it sets
//!   apart (all untracked origins, only while they fail); a sketch sized
//!   for the same memory saturates under the same flood of new origins
//!   and then sets apart clean origins at random.
//!
//! One lock, taken once to sort a batch and once to record its verdicts;
//! never while a signature is verified.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use metrics::{Counter, Gauge};

use crate::metrics::{ORIGINS_TRACKED, ORIGIN_TABLE_OVERFLOWS_TOTAL, VERIFY_SET_APART_TOTAL};
use crate::origin::Origin;

/// How long a record's counts take to halve (the decay period).
pub(crate) const HALF_LIFE: Duration = Duration::from_secs(10);

/// The failure share (failures over verdicts, both decayed) above which an
/// origin's requests are set apart (module docs: where kms-core's cost
/// model stops combining).
pub(crate) const SET_APART_SHARE: f32 = 1.0 / 8.0;

/// Fewest decayed failures that set an origin apart: one failure, less
/// than one decay period ago.
const MIN_FAILURES: f32 = 0.5;

/// A record with fewer decayed verdicts than this is stale: one verdict
/// three decay periods ago leaves 1/8.
const STALE_BELOW: f32 = 0.125;

/// Slots an origin may live in, from its hash on.
pub(crate) const PROBE: usize = 8;

/// See the module docs.
pub(crate) struct OriginTable {
    table: Mutex<Table>,
    /// Time zero of the records' timestamps.
    epoch: Instant,
    set_apart: Counter,
    tracked: Gauge,
    overflows: Counter,
}

struct Table {
    slots: Box<[Slot]>,
    /// Slots holding a record.
    tracked: usize,
    /// The overflow record, shared by every untracked origin.
    untracked: Record,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    /// The origin's hash; 0: empty (an origin hashing to 0 is taken as 1).
    key: u64,
    record: Record,
}

/// Decayed counts, as of `at`.
#[derive(Clone, Copy, Default)]
struct Record {
    failures: f32,
    verdicts: f32,
    /// Milliseconds since the table's epoch.
    at: u64,
}

impl Record {
    /// The counts decayed to `now` (ms since the epoch).
    fn at(self, now: u64) -> Record {
        let elapsed = now.saturating_sub(self.at) as f32;
        let factor = (-elapsed / HALF_LIFE.as_millis() as f32).exp2();
        Record {
            failures: self.failures * factor,
            verdicts: self.verdicts * factor,
            at: now,
        }
    }

    fn add(&mut self, now: u64, failed: bool) {
        *self = self.at(now);
        self.verdicts += 1.0;
        if failed {
            self.failures += 1.0;
        }
    }

    fn set_apart(self, now: u64) -> bool {
        let r = self.at(now);
        r.failures >= MIN_FAILURES && r.failures > r.verdicts * SET_APART_SHARE
    }

    fn stale(self, now: u64) -> bool {
        self.at(now).verdicts < STALE_BELOW
    }
}

impl std::fmt::Debug for OriginTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let table = self.lock();
        f.debug_struct("OriginTable")
            .field("slots", &table.slots.len())
            .field("tracked", &table.tracked)
            .finish_non_exhaustive()
    }
}

impl OriginTable {
    /// A table of at least `slots` slots (rounded up to a power of two, at
    /// least [`PROBE`]), its metrics labelled with `topic`.
    pub(crate) fn new(slots: usize, topic: &str) -> Self {
        let slots = slots.max(PROBE).next_power_of_two();
        let t = || topic.to_owned();
        OriginTable {
            table: Mutex::new(Table {
                slots: vec![Slot::default(); slots].into_boxed_slice(),
                tracked: 0,
                untracked: Record::default(),
            }),
            epoch: Instant::now(),
            set_apart: metrics::counter!(VERIFY_SET_APART_TOTAL, "topic" => t()),
            tracked: metrics::gauge!(ORIGINS_TRACKED, "topic" => t()),
            overflows: metrics::counter!(ORIGIN_TABLE_OVERFLOWS_TOTAL, "topic" => t()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every change under the lock leaves a valid table (counts and
        // keys written whole), so poisoning is ignored.
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Whether each of `origins` is set apart now (in order; `None`, no
    /// origin: never), counting those that are. One lock for all; none,
    /// and an empty answer (read as all `false`), when no request carries
    /// an origin.
    pub(crate) fn set_apart(
        &self,
        origins: impl Iterator<Item = Option<Origin>> + Clone,
    ) -> Vec<bool> {
        if origins.clone().all(|origin| origin.is_none()) {
            return Vec::new();
        }
        let now = self.now();
        let table = self.lock();
        let apart: Vec<bool> = origins
            .map(|origin| origin.is_some_and(|o| table.set_apart(key(o), now)))
            .collect();
        drop(table);
        let n = apart.iter().filter(|&&a| a).count();
        if n > 0 {
            self.set_apart.increment(n as u64);
        }
        apart
    }

    /// Records verdicts: for each origin, whether its request failed. No
    /// lock when there are none.
    pub(crate) fn record(&self, verdicts: &[(Origin, bool)]) {
        if verdicts.is_empty() {
            return;
        }
        let now = self.now();
        let mut table = self.lock();
        let mut overflows = 0;
        for &(origin, failed) in verdicts {
            if !table.record(key(origin), failed, now) && failed {
                overflows += 1;
            }
        }
        let tracked = table.tracked;
        drop(table);
        self.tracked.set(tracked as f64);
        if overflows > 0 {
            self.overflows.increment(overflows);
        }
    }
}

/// An origin's key in the table (never 0, the empty slot's).
fn key(origin: Origin) -> u64 {
    origin.hash().max(1)
}

impl Table {
    /// The slots `key` may live in.
    fn window(&self, key: u64) -> impl Iterator<Item = usize> {
        let mask = self.slots.len() - 1;
        // The low bits of a SipHash output are as good as any.
        let start = (key as usize) & mask;
        (0..PROBE).map(move |i| (start + i) & mask)
    }

    fn find(&self, key: u64) -> Option<usize> {
        self.window(key).find(|&i| self.slots[i].key == key)
    }

    /// Whether `key`'s requests are set apart: by its record, or, when it
    /// has none and would find no slot (untracked), by the overflow
    /// record. A new origin that would find a slot is clean.
    fn set_apart(&self, key: u64, now: u64) -> bool {
        match self.find(key) {
            Some(i) => self.slots[i].record.set_apart(now),
            None if self.free_slot(key, now).is_some() => false,
            None => self.untracked.set_apart(now),
        }
    }

    /// The slot a new origin `key` would take: an empty one first, else
    /// the stalest stale one; `None`: every slot of its window is live.
    fn free_slot(&self, key: u64, now: u64) -> Option<usize> {
        self.window(key)
            .find(|&i| self.slots[i].key == 0)
            .or_else(|| {
                self.window(key)
                    .filter(|&i| self.slots[i].record.stale(now))
                    .min_by(|&a, &b| {
                        let (a, b) = (self.slots[a].record.at(now), self.slots[b].record.at(now));
                        a.verdicts.total_cmp(&b.verdicts)
                    })
            })
    }

    /// Records one verdict; `false` when the origin found no slot (its
    /// verdict went to the overflow record).
    fn record(&mut self, key: u64, failed: bool, now: u64) -> bool {
        if let Some(i) = self.find(key) {
            self.slots[i].record.add(now, failed);
            return true;
        }
        match self.free_slot(key, now) {
            Some(i) => {
                if self.slots[i].key == 0 {
                    self.tracked += 1;
                }
                let mut record = Record {
                    at: now,
                    ..Record::default()
                };
                record.add(now, failed);
                self.slots[i] = Slot { key, record };
                true
            }
            None => {
                self.untracked.add(now, failed);
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(i: u64) -> Origin {
        Origin::new(("test origin", i))
    }

    fn apart(table: &OriginTable, o: Origin) -> bool {
        table.set_apart(std::iter::once(Some(o)))[0]
    }

    #[test]
    fn an_origin_is_set_apart_when_its_share_of_failures_is_high() {
        let table = OriginTable::new(64, "t");
        let (clean, failing, once) = (origin(1), origin(2), origin(3));
        table.record(&(0..100).map(|_| (clean, false)).collect::<Vec<_>>());
        table.record(&(0..20).map(|i| (failing, i % 2 == 0)).collect::<Vec<_>>());
        table.record(&(0..10).map(|i| (once, i == 0)).collect::<Vec<_>>());
        assert!(!apart(&table, clean));
        assert!(apart(&table, failing), "half of its signatures fail");
        assert!(!apart(&table, once), "1 in 10: under 1/8");
        let fifth = origin(5);
        table.record(&(0..1000).map(|i| (fifth, i % 5 == 0)).collect::<Vec<_>>());
        assert!(apart(&table, fifth), "1 in 5: over 1/8");
        assert!(
            !apart(&table, origin(4)),
            "unknown, nothing untracked failing"
        );
        assert_eq!(
            table.set_apart([None, Some(failing)].into_iter()),
            [false, true]
        );
    }

    #[test]
    fn counts_halve_every_decay_period_and_stale_records_make_room() {
        let mut r = Record::default();
        r.add(0, true);
        r.add(0, false);
        let later = r.at(HALF_LIFE.as_millis() as u64);
        assert!((later.failures - 0.5).abs() < 1e-4 && (later.verdicts - 1.0).abs() < 1e-4);
        assert!(r.set_apart(0));
        assert!(
            !r.set_apart(2 * HALF_LIFE.as_millis() as u64),
            "a quarter failure left"
        );
        // Two verdicts: a quarter left after two periods, 1/16 after five.
        assert!(!r.stale(2 * HALF_LIFE.as_millis() as u64));
        assert!(r.stale(5 * HALF_LIFE.as_millis() as u64));
    }

    /// 10 × the table's size of new origins, each sending one forgery
    /// within one decay period, leave a tracked failing origin's record in
    /// place and a tracked clean origin outside the set apart; the
    /// untracked ones are set apart while their shared record is hot, and
    /// each of their failures is an overflow.
    #[test]
    fn a_flood_of_new_failing_origins_evicts_no_live_record() {
        const SLOTS: usize = 256;
        let table = OriginTable::new(SLOTS, "t");
        let (clean, failing) = (origin(1), origin(2));
        table.record(&(0..50).map(|_| (clean, false)).collect::<Vec<_>>());
        table.record(&(0..10).map(|_| (failing, true)).collect::<Vec<_>>());
        assert!(apart(&table, failing) && !apart(&table, clean));
        let flood = (0..10 * SLOTS as u64).map(|i| (origin(1_000 + i), true));
        table.record(&flood.collect::<Vec<_>>());
        let t = table.lock();
        assert!(
            t.find(key(clean)).is_some(),
            "the clean origin is still tracked"
        );
        assert!(
            t.find(key(failing)).is_some(),
            "the failing origin is still tracked"
        );
        assert!(t.tracked <= SLOTS);
        let untracked = (0..10 * SLOTS as u64)
            .map(|i| origin(1_000 + i))
            .filter(|&o| t.find(key(o)).is_none())
            .count();
        assert!(untracked >= 9 * SLOTS, "{untracked} untracked");
        drop(t);
        assert!(apart(&table, failing), "its record kept its failures");
        assert!(
            !apart(&table, clean),
            "a tracked clean origin keeps its batches"
        );
        let now = table.now();
        let untracked = (0..)
            .map(|i| origin(2_000_000 + i))
            .find(|&o| table.lock().free_slot(key(o), now).is_none())
            .expect("a full window");
        assert!(
            apart(&table, untracked),
            "an untracked origin while untracked origins fail"
        );
    }
}
