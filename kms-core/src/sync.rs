//! The synchronisation primitives the keystore uses, switched to loom's
//! models in loom builds (`RUSTFLAGS="--cfg kms_loom"`, see `loom-tests/`),
//! so the rotation model of docs/DESIGN.md §6 runs on the shipped keystore code.
//! Not `cfg(loom)`: tokio reads that name itself.

#[cfg(kms_loom)]
pub(crate) use loom::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
#[cfg(not(kms_loom))]
pub(crate) use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};
