//! [`Mirror`]: this node's copy of the records under the prefix, with the
//! etcd revision at which each last changed.
//!
//! Invariants:
//! * An entry changes only to a newer revision: a watch event, a conflict's
//!   fetch, a reload or a commit older than what the entry holds is
//!   ignored, so the sources may arrive in any order.
//! * A whole read (the load, a reload, a conflict's fetch of a group) sets
//!   a floor for what it read: a watch event at or below it is already
//!   reflected and is ignored, so a late event cannot bring back a record
//!   the read found removed. A removed record stays as an entry without a
//!   value.
//! * The resume point ([`Mirror::revision`]) moves only with what the
//!   watch delivered whole: the revision of the last event of a response
//!   (etcd cuts responses at revision boundaries), a progress
//!   notification's header, or a whole read of the prefix. A conflict's
//!   fetch or an own commit does not move it.
//! * A group (the records whose names agree up to the last `/`: one key's
//!   records; `index` alone; every signing pointer, `signing/…`) is marked
//!   pending when another writer changed
//!   it, and [`Mirror::changes`] reports every live record of each pending
//!   group. etcd delivers all events of one transaction in one watch
//!   response, and the storage applies a response under one lock, so a
//!   group is whole at every revision it is reported at.
//! * A commit compares the revisions of a group only while the group is
//!   not pending ([`Mirror::is_pending`]): then the revisions here are the
//!   ones of the state the keystore plans on. A commit to a pending group
//!   is a conflict without asking etcd (the keystore takes the news and
//!   plans again).

use std::collections::{BTreeMap, BTreeSet};

/// One record as this node last saw it.
#[derive(Debug, Clone)]
struct Entry {
    /// The etcd revision of the record's last change (its `mod_revision`),
    /// or the revision at which it was found absent.
    revision: i64,
    /// `None`: removed.
    value: Option<Vec<u8>>,
}

/// The records this node knows, and the groups it has not yet reported.
#[derive(Debug, Default)]
pub(crate) struct Mirror {
    records: BTreeMap<String, Entry>,
    pending: BTreeSet<String>,
    /// Per group (or record, for a name without a group): the revision of
    /// the last whole read of it (a conflict's fetch).
    floors: BTreeMap<String, i64>,
    /// The revision of the last whole read of the prefix.
    floor: i64,
    /// The resume point: the watch resumes after it.
    revision: i64,
    /// Whether a whole read has been made.
    loaded: bool,
}

/// Where a conflict's fetch looked: a group's prefix, or one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Every record whose name starts with the group (ends with `/`).
    Group(String),
    /// The one record of this name.
    Record(String),
}

impl Scope {
    /// What a conflict on `name` fetches: its group, or itself if it has
    /// none.
    pub(crate) fn of(name: &str) -> Scope {
        match group(name) {
            "" => Scope::Record(name.to_owned()),
            g => Scope::Group(g.to_owned()),
        }
    }

    fn contains(&self, name: &str) -> bool {
        match self {
            Scope::Group(g) => name.starts_with(g.as_str()),
            Scope::Record(n) => name == n,
        }
    }

    fn key(&self) -> &str {
        match self {
            Scope::Group(g) => g,
            Scope::Record(n) => n,
        }
    }
}

/// The group of record `name`: its name up to and including the last `/`,
/// or `""` for a name without one.
pub(crate) fn group(name: &str) -> &str {
    name.rfind('/').map_or("", |i| &name[..=i])
}

impl Mirror {
    /// A whole read of the prefix: `records` (name, value, mod revision)
    /// at store revision `revision`. The first makes the mirror, with
    /// nothing pending; a later one (a reload after a compaction, or a
    /// second load) merges: an entry newer than the read stays, one the
    /// read did not find and no newer than it is removed, and each group
    /// that changed is pending.
    pub(crate) fn read_all(&mut self, records: Vec<(String, Vec<u8>, i64)>, revision: i64) {
        let first = !self.loaded;
        self.merge_read(|_| true, records, revision);
        if first {
            self.pending.clear();
        }
        self.floor = self.floor.max(revision);
        self.revision = self.revision.max(revision);
        self.loaded = true;
    }

    /// Whether a whole read of the prefix has been made.
    pub(crate) fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// A whole read at store revision `revision` of the records `in_scope`
    /// accepts: `records` (name, value, mod revision) are set where newer;
    /// a live record in scope, no newer than the read, that the read did
    /// not find is removed.
    fn merge_read(
        &mut self,
        in_scope: impl Fn(&str) -> bool,
        records: Vec<(String, Vec<u8>, i64)>,
        revision: i64,
    ) {
        let found: BTreeSet<String> = records.iter().map(|(n, _, _)| n.clone()).collect();
        for (name, value, rev) in records {
            self.set(&name, Some(value), rev);
        }
        let gone: Vec<String> = self
            .records
            .iter()
            .filter(|(n, e)| {
                in_scope(n) && e.value.is_some() && e.revision <= revision && !found.contains(*n)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in gone {
            self.set(&name, None, revision);
        }
    }

    /// The resume point: the newest revision whose events have all
    /// reached this mirror.
    pub(crate) fn revision(&self) -> i64 {
        self.revision
    }

    /// The watch has delivered everything up to `revision` (the last
    /// event of a response, or a progress notification's header).
    pub(crate) fn seen(&mut self, revision: i64) {
        self.revision = self.revision.max(revision);
    }

    /// A change another writer made (a watch event): record `name` set to
    /// `value` (`None`: removed) at `revision`. Returns whether it was new
    /// to this mirror (and its group is now pending).
    pub(crate) fn event(&mut self, name: &str, value: Option<Vec<u8>>, revision: i64) -> bool {
        let floor = [group(name), name]
            .iter()
            .filter_map(|k| self.floors.get(*k))
            .fold(self.floor, |a, b| a.max(*b));
        revision > floor && self.set(name, value, revision)
    }

    /// Sets `name` to `value` at `revision` if that is newer than its
    /// entry; marks its group pending if so.
    fn set(&mut self, name: &str, value: Option<Vec<u8>>, revision: i64) -> bool {
        if self
            .records
            .get(name)
            .is_some_and(|e| e.revision >= revision)
        {
            return false;
        }
        self.records
            .insert(name.to_owned(), Entry { revision, value });
        self.pending.insert(group(name).to_owned());
        true
    }

    /// What a conflict's fetch found in `scope` at store revision
    /// `revision`: `records` (name, value, mod revision); what the mirror
    /// holds in the scope, no newer than the fetch, and the fetch did not
    /// find was removed.
    pub(crate) fn fetched(
        &mut self,
        scope: &Scope,
        records: Vec<(String, Vec<u8>, i64)>,
        revision: i64,
    ) {
        self.merge_read(|n| scope.contains(n), records, revision);
        let floor = self.floors.entry(scope.key().to_owned()).or_insert(0);
        *floor = (*floor).max(revision);
    }

    /// This node's own commit landed at `revision`: each `(name, value)`
    /// now holds `value` (`None`: removed). Not pending: the keystore has
    /// it already.
    pub(crate) fn committed<'a>(
        &mut self,
        writes: impl IntoIterator<Item = (&'a str, Option<&'a [u8]>)>,
        revision: i64,
    ) {
        for (name, value) in writes {
            let entry = self.records.entry(name.to_owned()).or_insert(Entry {
                revision: 0,
                value: None,
            });
            if entry.revision < revision {
                *entry = Entry {
                    revision,
                    value: value.map(<[u8]>::to_vec),
                };
            }
        }
    }

    /// Whether another writer's change to `name`'s group is here but not
    /// yet reported: a commit to it would build on an older state than
    /// the compared revisions, so it must not go out.
    pub(crate) fn is_pending(&self, name: &str) -> bool {
        self.pending.contains(group(name))
    }

    /// The `mod_revision` record `name` must still have for a commit that
    /// builds on what this node knows: its revision, or 0 (absent) if it
    /// is unknown or removed.
    pub(crate) fn expected(&self, name: &str) -> i64 {
        match self.records.get(name) {
            Some(Entry {
                revision,
                value: Some(_),
            }) => *revision,
            _ => 0,
        }
    }

    /// Every live record of every pending group, and nothing pending
    /// afterwards (see [`kms_core::storage::Storage::changes`]).
    pub(crate) fn changes(&mut self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        for g in std::mem::take(&mut self.pending) {
            let in_group = self
                .records
                .range(g.clone()..)
                .take_while(|(n, _)| n.starts_with(g.as_str()))
                .filter(|(n, _)| group(n) == g);
            for (name, entry) in in_group {
                if let Some(value) = &entry.value {
                    out.push((name.clone(), value.clone()));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, value: &[u8], rev: i64) -> (String, Vec<u8>, i64) {
        (name.to_owned(), value.to_vec(), rev)
    }

    #[test]
    fn groups() {
        assert_eq!(group("keys/t/p/u/v1"), "keys/t/p/u/");
        assert_eq!(group("index"), "");
        assert_eq!(Scope::of("index"), Scope::Record("index".into()));
        assert_eq!(
            Scope::of("keys/t/p/u/head"),
            Scope::Group("keys/t/p/u/".into())
        );
    }

    #[test]
    fn an_event_reports_its_whole_group_once() {
        let mut m = Mirror::default();
        m.read_all(
            vec![
                rec("index", b"i1", 3),
                rec("keys/t/p/a/head", b"h1", 3),
                rec("keys/t/p/a/v1", b"a1", 3),
                rec("keys/t/p/b/head", b"b", 2),
            ],
            3,
        );
        assert!(m.changes().is_empty());
        assert!(m.event("keys/t/p/a/v2", Some(b"a2".to_vec()), 5));
        assert!(m.event("keys/t/p/a/head", Some(b"h2".to_vec()), 5));
        let mut got = m.changes();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("keys/t/p/a/head".to_owned(), b"h2".to_vec()),
                ("keys/t/p/a/v1".to_owned(), b"a1".to_vec()),
                ("keys/t/p/a/v2".to_owned(), b"a2".to_vec()),
            ]
        );
        assert!(m.changes().is_empty());
        // The index's group is the index alone.
        assert!(m.event("index", Some(b"i2".to_vec()), 6));
        assert_eq!(m.changes(), vec![("index".to_owned(), b"i2".to_vec())]);
    }

    #[test]
    fn older_news_is_ignored_and_removals_stick() {
        let mut m = Mirror::default();
        m.read_all(vec![rec("keys/t/p/a/v1", b"a1", 3)], 3);
        // A conflict's fetch at revision 9 found v1 gone and the head at 9.
        m.fetched(
            &Scope::Group("keys/t/p/a/".into()),
            vec![rec("keys/t/p/a/head", b"h9", 9)],
            9,
        );
        assert_eq!(m.expected("keys/t/p/a/v1"), 0);
        assert_eq!(m.expected("keys/t/p/a/head"), 9);
        // The watch then delivers the older events: ignored.
        assert!(!m.event("keys/t/p/a/v1", Some(b"a1'".to_vec()), 7));
        assert!(!m.event("keys/t/p/a/head", Some(b"h7".to_vec()), 7));
        assert_eq!(
            m.changes(),
            vec![("keys/t/p/a/head".to_owned(), b"h9".to_vec())]
        );
        // An own commit is not pending, and is what the next one compares.
        m.committed([("keys/t/p/a/head", Some(&b"h10"[..]))], 10);
        assert!(m.changes().is_empty());
        assert_eq!(m.expected("keys/t/p/a/head"), 10);
        // Its watch event arrives later: already known.
        assert!(!m.event("keys/t/p/a/head", Some(b"h10".to_vec()), 10));
    }

    #[test]
    fn a_fetch_sets_a_floor_for_late_events() {
        let mut m = Mirror::default();
        m.read_all(vec![rec("keys/t/p/a/head", b"h3", 3)], 3);
        // Another node rotated (v4 at 5) then destroyed (v4 removed at 6);
        // a conflict's fetch at 6 sees the tombstone head only.
        m.fetched(
            &Scope::Group("keys/t/p/a/".into()),
            vec![rec("keys/t/p/a/head", b"h6", 6)],
            6,
        );
        // The watch's late events must not bring v4 back.
        assert!(!m.event("keys/t/p/a/v4", Some(b"v4".to_vec()), 5));
        assert!(!m.event("keys/t/p/a/v4", None, 6));
        assert_eq!(
            m.changes(),
            vec![("keys/t/p/a/head".to_owned(), b"h6".to_vec())]
        );
        // The fetch did not move the resume point.
        assert_eq!(m.revision(), 3);
    }

    #[test]
    fn a_reload_keeps_what_is_newer_than_it() {
        let mut m = Mirror::default();
        m.read_all(vec![rec("keys/t/p/a/head", b"h", 2)], 2);
        // An own commit at 9 lands before a reload read at 7 is applied.
        m.committed(
            [
                ("keys/t/p/b/head", Some(&b"b9"[..])),
                ("index", Some(&b"i9"[..])),
            ],
            9,
        );
        m.read_all(vec![rec("keys/t/p/a/head", b"h", 2)], 7);
        assert_eq!(m.expected("keys/t/p/b/head"), 9);
        assert_eq!(m.expected("index"), 9);
        assert!(m.changes().is_empty());
    }

    #[test]
    fn a_reload_marks_what_differs() {
        let mut m = Mirror::default();
        m.read_all(
            vec![
                rec("keys/t/p/a/head", b"h", 2),
                rec("keys/t/p/b/head", b"b", 2),
            ],
            2,
        );
        m.read_all(
            vec![
                rec("keys/t/p/a/head", b"h", 2),
                rec("keys/t/p/b/head", b"b2", 20),
            ],
            20,
        );
        assert_eq!(m.revision(), 20);
        assert_eq!(
            m.changes(),
            vec![("keys/t/p/b/head".to_owned(), b"b2".to_vec())]
        );
    }
}
