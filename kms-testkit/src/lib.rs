//! kms-testkit: what the workspace's tests, benches and examples share, in
//! one crate they depend on (not published).
//!
//! * [`etcd`]: an etcd cluster of real `etcd` processes on loopback ports
//!   the cluster picks, started, killed, restarted and stopped by its
//!   owner (the fleet example, the facade's and the gateway's etcd tests,
//!   the fleet bench).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod etcd;
