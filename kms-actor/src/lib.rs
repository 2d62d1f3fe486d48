//! kms-actor: the KMS actor on the in-process bus (docs/DESIGN.md §5).
//!
//! [`KmsActor::spawn`] subscribes to the request topic (`"kms.requests"` by
//! default) and returns a [`KmsHandle`]; other actors hold a [`KmsClient`]
//! and call `verify`, `verify_with_public_key`, `sign`, `create_key`,
//! `rotate` and `attest`. Verify requests are drained from the topic after
//! each wake and verified as batches with `kms_core::ed25519::verify_batch`
//! on a dedicated, named `rayon::ThreadPool` (`kms-verify-<i>`), split into
//! one job per idle thread; each answer is sent from the thread that
//! verified it on the request's own reply channel. A request made while the
//! node is quiet is verified on its caller's task without being published
//! (`KmsConfig::verify_on_caller_when_idle`); a lone request that is
//! published anyway (another caller was verifying, or a run of them had
//! reached its limit) is verified on the actor's task when the pool is idle
//! (`KmsConfig::inline_when_idle`): no parked thread is woken either way.
//!
//! Why batch: one multiscalar multiplication over a batch costs less per
//! signature than verifying one at a time, and at low load nothing waits,
//! because a batch goes out as soon as a pool thread is idle.
//!
//! Contract: every request gets exactly one answer — a result or a typed
//! [`kms_core::KmsError`] — and a caller never hangs.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), kms_core::KmsError> {
//! use kms_actor::{KmsActor, KmsConfig};
//! use kms_bus::Bus;
//! use kms_core::Keystore;
//!
//! let bus = Bus::new();
//! let handle = KmsActor::spawn(KmsConfig::default().with_threads(1), Keystore::new(), &bus)?;
//! let kms = handle.client();
//! let key = kms.create_key("acme", "tokens").await?;
//! let (signer, signature) = kms.sign(&key, &b"token"[..]).await?;
//! kms.verify(&signer, &b"token"[..], signature).await?;
//! assert!(kms.verify(&signer, &b"forged"[..], signature).await.is_err());
//! handle.shutdown().await;
//! # Ok(())
//! # }
//! ```
//!
//! Coalescing ([`crate::KmsConfig`]'s `target_batch`, `max_batch`,
//! `max_wait`): a batch goes out at once when a pool thread is idle, grows
//! toward `target_batch` while every thread is busy, and no request is held
//! past `max_wait`. Sign, rotate, attest and create travel on a separate
//! priority topic and never wait behind verify batches (at most behind one
//! short verification that the actor makes on its own task when a request
//! arrives alone on a quiet node). Metrics (docs/DESIGN.md §7)
//! go through the `metrics` facade ([`metrics`] lists them); each
//! coalescing decision is a `tracing` event (target `kms_actor::coalesce`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod actor;
mod audit;
mod client;
mod config;
mod dispatch;
mod for_origin;
mod handle;
pub mod metrics;
mod ops;
mod origin;
#[cfg(feature = "tower")]
mod retry;
mod shared;
mod stats;
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod test_hooks;
mod token;
mod writer;

pub use actor::KmsActor;
pub use audit::AUDIT_TARGET;
pub use client::KmsClient;
pub use config::{
    KmsConfig, DEFAULT_REQUEST_TOPIC, MAX_AUTO_ROTATE_CHECK, MAX_BATCH_LIMIT, MAX_COMBINE_LIMIT,
    MAX_ORIGIN_TABLE, MAX_WAIT_LIMIT, MIN_ORIGIN_TABLE,
};
pub use for_origin::ForOrigin;
pub use handle::KmsHandle;
pub use origin::Origin;
#[cfg(feature = "tower")]
pub use retry::RetryPolicy;
pub use stats::KmsStats;
pub use token::{IssuerKeys, JwksRefetch, JwtSigner, TokenKeys, VerifiedJwt};
