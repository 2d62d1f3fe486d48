//! Loom models of the bus and of key rotation, on the code that ships.
//!
//! `kms-bus` takes every atomic, lock and cell from its `sync` module, and
//! `kms-core`'s keystore its locks and `Arc`s from its own; both switch to
//! loom's under `cfg(kms_loom)` (not `cfg(loom)`, which tokio
//! reads itself). The models live in `tests/` (`bus.rs`, `keystore.rs`)
//! and compile only under that
//! cfg. Run them with:
//!
//! ```text
//! RUSTFLAGS="--cfg kms_loom" LOOM_MAX_PREEMPTIONS=2 \
//!     CARGO_TARGET_DIR=target/loom cargo test -p loom-tests --release
//! ```
//!
//! (`.ci/run` does exactly this; the separate target directory keeps the
//! loom build from invalidating the normal one.) Without the cfg this crate
//! is empty and its tests compile to nothing.
