//! kms-testkit: what the workspace's tests, benches and examples share, in
//! one crate they depend on (not published).
//!
//! * [`etcd`]: an etcd cluster of real `etcd` processes on loopback ports
//!   the cluster picks, started, killed, restarted and stopped by its
//!   owner (the fleet example, the facade's and the gateway's etcd tests,
//!   the fleet bench).
//! * [`softhsm`]: a SoftHSM2 token store in a temporary directory, its
//!   tokens and AES keys made with `softhsm2-util` and `pkcs11-tool` (the
//!   PKCS#11 root's tests, the gateway's).
//! * [`moto`]: moto's AWS server on a loopback port (the AWS KMS root's
//!   tests, the gateway's).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod etcd;
pub mod moto;
pub mod softhsm;
