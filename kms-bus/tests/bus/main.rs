//! kms-bus's integration tests outside the delivery contract, in one binary:
//! the auto traits of its types, its metrics, the topic registry. The
//! contract suite (`contract/`) runs once per backend, as the binaries
//! `classic.rs` and `soa.rs`.

mod auto_traits;
mod metrics;
mod registry;
