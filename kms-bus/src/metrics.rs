//! The bus's metrics (docs/DESIGN.md §7), through the `metrics` facade, one set of
//! handles per topic, labelled `topic=<name>`:
//!
//! | name | kind | counts |
//! |---|---|---|
//! | `kms_bus_published_total` | counter | messages published (the ring's sequence count, see below) |
//! | `kms_bus_rejected_total` | counter | messages a full `Reject`/`Wait` ring refused (not the retries of `publish_wait`) |
//! | `kms_bus_lagged_total` | counter | messages subscribers missed on a `Lag` topic, summed over subscribers |
//!
//! Handles are taken when the topic is created, from the recorder installed
//! then. A `metrics` handle call is not inlined across crates (~1 ns), which
//! per message cost the bus 8–10 % (`benches/bus/main.rs`). So the published
//! count is not incremented per message: the ring's sequence count already
//! is that number, and it is pushed with `absolute` every
//! [`PUBLISHED_STRIDE`] messages, after every batch, and whenever a
//! subscriber catches up and parks. The counter is exact whenever the
//! topic is idle and at most `PUBLISHED_STRIDE - 1` behind under load. The
//! other two count rare events where they happen.

use metrics::{Counter, Unit};

/// `kms_bus_published_total{topic}`: messages published (counter).
pub const PUBLISHED_TOTAL: &str = "kms_bus_published_total";
/// How often (in messages) a single publish pushes the sequence count to
/// `kms_bus_published_total`.
pub(crate) const PUBLISHED_STRIDE: u64 = 64;

/// `kms_bus_rejected_total{topic}`: messages refused by a full ring (counter).
pub const REJECTED_TOTAL: &str = "kms_bus_rejected_total";
/// `kms_bus_lagged_total{topic}`: messages missed by lagging subscribers,
/// summed over subscribers (counter).
pub const LAGGED_TOTAL: &str = "kms_bus_lagged_total";

/// Registers units and help texts of the bus's metrics with the installed
/// recorder.
pub fn describe_metrics() {
    metrics::describe_counter!(PUBLISHED_TOTAL, Unit::Count, "Messages published, by topic");
    metrics::describe_counter!(
        REJECTED_TOTAL,
        Unit::Count,
        "Messages refused by a full Reject or Wait ring, by topic"
    );
    metrics::describe_counter!(
        LAGGED_TOTAL,
        Unit::Count,
        "Messages missed by lagging subscribers (summed over subscribers), by topic"
    );
}

/// One topic's handles.
pub(crate) struct TopicMetrics {
    pub(crate) published: Counter,
    pub(crate) rejected: Counter,
    pub(crate) lagged: Counter,
}

impl TopicMetrics {
    pub(crate) fn new(topic: &str) -> Self {
        let topic = topic.to_owned();
        TopicMetrics {
            published: metrics::counter!(PUBLISHED_TOTAL, "topic" => topic.clone()),
            rejected: metrics::counter!(REJECTED_TOTAL, "topic" => topic.clone()),
            lagged: metrics::counter!(LAGGED_TOTAL, "topic" => topic),
        }
    }
}
