//! The metrics a fleet node reports (through the `metrics` facade).

/// Histogram, seconds: from a version's creation on one node to the
/// moment this node applied it (the version's `created_at` is stamped
/// just before its commit, so this includes the commit).
pub const PROPAGATION: &str = "kms_etcd_propagation_seconds";
/// Counter: times the watch was started again (a lost connection, a
/// member gone, a compaction).
pub const WATCH_RESTARTS: &str = "kms_etcd_watch_restarts_total";
/// Counter: commits that lost a race to another node (each is planned
/// again on the other's result).
pub const CONFLICTS: &str = "kms_etcd_conflicts_total";
/// Counter: commits that landed.
pub const COMMITS: &str = "kms_etcd_commits_total";
/// Gauge, seconds: how long this node has been without a live watch (0
/// while following): how stale its keys may be.
pub const STALENESS: &str = "kms_etcd_staleness_seconds";

/// Registers the units and help texts with the installed recorder.
pub fn describe_metrics() {
    metrics::describe_histogram!(
        PROPAGATION,
        metrics::Unit::Seconds,
        "from a key version's creation on one node to its application on this one"
    );
    metrics::describe_counter!(
        WATCH_RESTARTS,
        metrics::Unit::Count,
        "times the etcd watch was started again"
    );
    metrics::describe_counter!(
        CONFLICTS,
        metrics::Unit::Count,
        "commits that lost a race to another node and were planned again"
    );
    metrics::describe_counter!(COMMITS, metrics::Unit::Count, "commits that landed in etcd");
    metrics::describe_gauge!(
        STALENESS,
        metrics::Unit::Seconds,
        "how long this node has been without a live etcd watch (0 while following)"
    );
}
