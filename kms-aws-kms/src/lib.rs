//! kms-aws-kms: an AWS KMS root of trust ([`AwsKmsRoot`]) for
//! `kms_core::Keystore::create_under` and `open_under`.
//!
//! The store's 32-byte master key is wrapped by a symmetric KMS key with
//! `Encrypt` and unwrapped with `Decrypt` (AWS KMS API Reference; the
//! `SYMMETRIC_DEFAULT` algorithm, recorded as [`MECHANISM`]), with the
//! encryption context `{"kms-store": <the store's identity, 32 hex
//! digits>}`, so a wrapped key copied to another store's record does not
//! decrypt. The KMS key never leaves AWS KMS; the ciphertext blob is what
//! the store records.
//!
//! Invariants:
//! * region and credentials come from the SDK's standard chain
//!   (environment, shared profile, web identity, instance role), resolved
//!   once when the root is made; an endpoint URL, when given, replaces the
//!   region's (VPC endpoints, emulators);
//! * calls block their caller on a runtime of the root's own, driven from a
//!   thread of its own for the call, so a caller inside an async runtime
//!   blocks its worker but never trips tokio's nested-runtime check; each
//!   call is bounded by [`CALL_TIMEOUT`]; dropping the root shuts the
//!   runtime down without blocking;
//! * the unwrapped key is copied into a buffer wiped on drop. The SDK's
//!   own request and response buffers (the plaintext key in `Encrypt`'s
//!   body and `Decrypt`'s answer) are not wiped: that is outside this
//!   crate's reach.

#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

use std::fmt;
use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::BehaviorVersion;
use aws_sdk_kms::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::Client;
use kms_core::root::{
    MasterKeyBytes, MasterKeyRoot, RootKind, StoreId, WrappedKey, MASTER_KEY_LEN,
};
use kms_core::KmsError;
use zeroize::Zeroizing;

/// The mechanism name recorded beside a wrapped key: KMS's symmetric
/// encryption algorithm.
pub const MECHANISM: &str = "SYMMETRIC_DEFAULT";

/// The encryption context's key; its value is the store's identity.
pub const CONTEXT_KEY: &str = "kms-store";

/// The most one call may take, retries included.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The most a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// A store's master key wrapped by an AWS KMS key.
pub struct AwsKmsRoot {
    key: String,
    endpoint: Option<String>,
    client: Client,
    /// Taken only by `Drop`.
    runtime: Option<tokio::runtime::Runtime>,
}

/// Runs `future` to completion on `runtime`, from a thread of its own.
///
/// # Errors
/// [`KmsError::Internal`] if that thread panicked.
fn block_on<F>(runtime: &tokio::runtime::Runtime, future: F) -> Result<F::Output, KmsError>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    std::thread::scope(|scope| {
        scope
            .spawn(|| runtime.block_on(future))
            .join()
            .map_err(|_| KmsError::Internal {
                reason: "the AWS SDK's call panicked".to_owned(),
            })
    })
}

impl AwsKmsRoot {
    /// The root of the KMS key `key` (a key id, key ARN, alias name
    /// `alias/…` or alias ARN), reached at `endpoint` if given (else the
    /// region's), with the region and credentials of the SDK's standard
    /// chain. Nothing is sent until the root is used.
    ///
    /// # Errors
    /// [`KmsError::Root`] if the root's runtime cannot start;
    /// [`KmsError::Internal`] if loading the SDK's configuration panicked.
    pub fn new(key: &str, endpoint: Option<&str>) -> Result<AwsKmsRoot, KmsError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| KmsError::Root {
                root: describe(key, endpoint),
                reason: format!("cannot start the SDK's runtime: {e}"),
            })?;
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .retry_config(RetryConfig::standard().with_max_attempts(2))
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(CONNECT_TIMEOUT)
                    .operation_timeout(CALL_TIMEOUT)
                    .build(),
            );
        if let Some(endpoint) = endpoint {
            loader = loader.endpoint_url(endpoint);
        }
        let config = block_on(&runtime, loader.load())?;
        Ok(AwsKmsRoot {
            key: key.to_owned(),
            endpoint: endpoint.map(str::to_owned),
            client: Client::new(&config),
            runtime: Some(runtime),
        })
    }

    /// Runs one SDK call on the root's runtime.
    fn call<F>(&self, future: F) -> Result<F::Output, KmsError>
    where
        F: std::future::Future + Send,
        F::Output: Send,
    {
        let runtime = self
            .runtime
            .as_ref()
            .ok_or_else(|| self.failed("the root's runtime is gone"))?;
        block_on(runtime, future)
    }

    fn failed(&self, reason: impl Into<String>) -> KmsError {
        KmsError::Root {
            root: self.describe(),
            reason: reason.into(),
        }
    }

    /// A failed call in words: KMS's error code and message, or why the
    /// endpoint was not reached.
    fn reason<E: ProvideErrorMetadata + std::error::Error + 'static>(
        &self,
        what: &str,
        e: &SdkError<E>,
    ) -> KmsError {
        let why = match e {
            SdkError::ServiceError(service) => {
                let err = service.err();
                let code = err.code().unwrap_or("an error");
                let message = err.message().unwrap_or_default();
                match code {
                    "InvalidCiphertextException" | "IncorrectKeyException" => format!(
                        "cannot unwrap this store's master key (another KMS key, or another \
                         store's record?): {code}"
                    ),
                    "NotFoundException" => format!("no such KMS key ({code}: {message})"),
                    _ => format!("KMS answered {code}: {message}"),
                }
            }
            SdkError::DispatchFailure(_) | SdkError::TimeoutError(_) => {
                format!(
                    "cannot reach {}: {}",
                    self.endpoint_shown(),
                    source_chain(e)
                )
            }
            other => source_chain(other),
        };
        self.failed(format!("{what}: {why}"))
    }

    fn endpoint_shown(&self) -> String {
        match &self.endpoint {
            Some(endpoint) => endpoint.clone(),
            None => "the region's KMS endpoint".to_owned(),
        }
    }
}

/// An error and its sources, joined.
fn source_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The root in words.
fn describe(key: &str, endpoint: Option<&str>) -> String {
    match endpoint {
        Some(endpoint) => format!("AWS KMS key {key} (endpoint {endpoint})"),
        None => format!("AWS KMS key {key}"),
    }
}

impl MasterKeyRoot for AwsKmsRoot {
    fn kind(&self) -> RootKind {
        RootKind::AwsKms
    }

    fn describe(&self) -> String {
        describe(&self.key, self.endpoint.as_deref())
    }

    fn wrap(&self, store: &StoreId, key: &MasterKeyBytes) -> Result<Option<WrappedKey>, KmsError> {
        let call = self
            .client
            .encrypt()
            .key_id(&self.key)
            .plaintext(Blob::new(key.to_vec()))
            .encryption_context(CONTEXT_KEY, store.to_string())
            .send();
        let output = self
            .call(call)?
            .map_err(|e| self.reason("cannot wrap the master key", &e))?;
        let blob = output
            .ciphertext_blob()
            .ok_or_else(|| self.failed("Encrypt answered no ciphertext"))?;
        Ok(Some(WrappedKey {
            mechanism: MECHANISM.to_owned(),
            bytes: blob.as_ref().to_vec(),
        }))
    }

    fn unwrap(
        &self,
        store: &StoreId,
        wrapped: Option<&WrappedKey>,
    ) -> Result<MasterKeyBytes, KmsError> {
        let wrapped = wrapped.ok_or_else(|| self.failed("the store records no wrapped key"))?;
        if wrapped.mechanism != MECHANISM {
            return Err(self.failed(format!(
                "the key was wrapped with {}, not {MECHANISM}",
                wrapped.mechanism
            )));
        }
        let call = self
            .client
            .decrypt()
            .key_id(&self.key)
            .ciphertext_blob(Blob::new(wrapped.bytes.clone()))
            .encryption_context(CONTEXT_KEY, store.to_string())
            .send();
        let output = self
            .call(call)?
            .map_err(|e| self.reason("cannot unwrap the master key", &e))?;
        let plaintext = output
            .plaintext()
            .ok_or_else(|| self.failed("Decrypt answered no plaintext"))?;
        if plaintext.as_ref().len() != MASTER_KEY_LEN {
            return Err(self.failed("the unwrapped key is not 32 bytes"));
        }
        let mut key = Zeroizing::new([0u8; MASTER_KEY_LEN]);
        key.copy_from_slice(plaintext.as_ref());
        Ok(key)
    }
}

impl Drop for AwsKmsRoot {
    fn drop(&mut self) {
        // Without blocking: a drop inside an async runtime must not wait.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl fmt::Debug for AwsKmsRoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsKmsRoot")
            .field("key", &self.key)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}
