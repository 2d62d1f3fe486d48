//! [`ForOrigin`]: a client's verify calls for requests from one
//! [`Origin`], so the coalescing policy can keep a failing origin's
//! requests out of other origins' batches (`dispatch/origins.rs`).
//! Borrowed from the client: no clone per request.

use bytes::Bytes;
use kms_core::{KeyId, KmsError};
use kms_jose::Validation;

use crate::client::KmsClient;
use crate::dispatch::request::VerifyBy;
use crate::origin::Origin;
use crate::token::{TokenKeys, VerifiedJwt};

/// [`KmsClient`]'s verify calls for requests from one origin
/// ([`KmsClient::for_origin`]). The verdicts are the client's own; only
/// which batch a request joins depends on its origin.
#[derive(Debug, Clone, Copy)]
pub struct ForOrigin<'a> {
    client: &'a KmsClient,
    origin: Origin,
}

impl KmsClient {
    /// This client's verify calls for requests from `origin` (a client's
    /// address, [`Origin::from_ip`], or any key the embedder chooses,
    /// [`Origin::new`]): while that origin's signatures keep failing, its
    /// requests are verified alone, after the others of their batch, so
    /// that a forger does not shrink or fail other origins' batches
    /// (`KmsConfig::origin_table`).
    pub fn for_origin(&self, origin: Origin) -> ForOrigin<'_> {
        ForOrigin {
            client: self,
            origin,
        }
    }
}

impl ForOrigin<'_> {
    /// [`KmsClient::verify_with_public_key`] for a request from this origin.
    ///
    /// # Errors
    /// As [`KmsClient::verify_with_public_key`].
    pub async fn verify_with_public_key(
        &self,
        public_key: [u8; 32],
        message: impl Into<Bytes>,
        signature: [u8; 64],
    ) -> Result<(), KmsError> {
        let by = VerifyBy::PublicKey(public_key);
        self.client
            .verify_by(by, message.into(), signature, Some(self.origin))
            .await
    }

    /// [`KmsClient::verify`] for a request from this origin.
    ///
    /// # Errors
    /// As [`KmsClient::verify`].
    pub async fn verify(
        &self,
        key: &KeyId,
        message: impl Into<Bytes>,
        signature: [u8; 64],
    ) -> Result<(), KmsError> {
        let by = VerifyBy::Key(key.clone());
        self.client
            .verify_by(by, message.into(), signature, Some(self.origin))
            .await
    }

    /// [`KmsClient::verify_jwt`] for a token from this origin.
    ///
    /// # Errors
    /// As [`KmsClient::verify_jwt`].
    pub async fn verify_jwt(
        &self,
        token: &str,
        keys: &TokenKeys,
        validation: &Validation,
    ) -> Result<VerifiedJwt, KmsError> {
        self.client
            .verify_jwt_from(token, keys, validation, Some(self.origin))
            .await
    }
}
