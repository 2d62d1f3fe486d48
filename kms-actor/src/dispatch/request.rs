//! [`Request`]: what travels on the request topic. Built only by
//! [`crate::KmsClient`]; each carries its own [`Reply`].

use std::sync::Arc;

use bytes::Bytes;
use kms_core::ed25519::VerifyingKey;
use kms_core::seal::{Envelope, SealKey};
use kms_core::{Attestation, KeyId, KeyPolicy};
use kms_jose::Algorithm;

use crate::dispatch::reply::Reply;
use crate::metrics::OpKind;
use crate::origin::Origin;

/// One request to the KMS actor, made by [`crate::KmsClient`], which also
/// waits for the answer. Crate-private, so nothing outside this crate can
/// subscribe to the request topic, read requests or replay them.
#[derive(Clone)]
pub(crate) struct Request {
    pub(crate) op: Op,
    /// Who asked, for the audit events (`crate::audit`); `None`: the
    /// client named no one.
    pub(crate) principal: Option<Arc<str>>,
}

impl std::fmt::Debug for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request")
            .field("op", &self.op.kind().label())
            .finish_non_exhaustive()
    }
}

/// The operations.
#[derive(Clone)]
pub(crate) enum Op {
    Verify(VerifyRequest),
    Sign {
        key: KeyId,
        message: Bytes,
        reply: Reply<(KeyId, [u8; 64])>,
    },
    /// Sign a JWT: `claims` is a serialized JSON object; the answer is the
    /// compact JWS, its `kid` the head version that signed it.
    SignJwt {
        key: KeyId,
        alg: Algorithm,
        claims: Vec<u8>,
        reply: Reply<String>,
    },
    CreateKey {
        tenant: String,
        purpose: String,
        alg: kms_core::Alg,
        reply: Reply<KeyId>,
    },
    Rotate {
        key: KeyId,
        reply: Reply<KeyId>,
    },
    Attest {
        key: KeyId,
        reply: Reply<Attestation>,
    },
    Policy {
        key: KeyId,
        reply: Reply<KeyPolicy>,
    },
    SetPolicy {
        key: KeyId,
        policy: KeyPolicy,
        reply: Reply<KeyPolicy>,
    },
    Trim {
        key: KeyId,
        below: u32,
        reply: Reply<u32>,
    },
    Destroy {
        key: KeyId,
        reply: Reply<()>,
    },
    Export {
        key: KeyId,
        to: Arc<SealKey>,
        reply: Reply<Envelope>,
    },
    Import {
        tenant: String,
        purpose: String,
        from: Arc<SealKey>,
        envelope: Envelope,
        reply: Reply<KeyId>,
    },
}

impl Op {
    /// Which operation this is (the metrics' `op` label, and the lane).
    pub(crate) fn kind(&self) -> OpKind {
        match self {
            Op::Verify(_) => OpKind::Verify,
            Op::Sign { .. } | Op::SignJwt { .. } => OpKind::Sign,
            Op::CreateKey { .. } => OpKind::CreateKey,
            Op::Rotate { .. } => OpKind::Rotate,
            Op::Attest { .. } => OpKind::Attest,
            Op::Policy { .. } => OpKind::Policy,
            Op::SetPolicy { .. } => OpKind::SetPolicy,
            Op::Trim { .. } => OpKind::Trim,
            Op::Destroy { .. } => OpKind::Destroy,
            Op::Export { .. } => OpKind::Export,
            Op::Import { .. } => OpKind::Import,
        }
    }
}

/// A verify request: what to verify, and where the verdict goes.
#[derive(Clone)]
pub(crate) struct VerifyRequest {
    pub(crate) by: VerifyBy,
    pub(crate) message: Bytes,
    pub(crate) signature: [u8; 64],
    pub(crate) reply: Reply<()>,
    /// Where it comes from, if the caller said (`crate::Origin`).
    pub(crate) origin: Option<Origin>,
}

/// A verify call as its caller holds it, before it has a reply handle:
/// verified on the caller's task, or made a [`VerifyRequest`].
pub(crate) struct VerifyCall {
    pub(crate) by: VerifyBy,
    pub(crate) message: Bytes,
    pub(crate) signature: [u8; 64],
    pub(crate) origin: Option<Origin>,
}

impl VerifyCall {
    /// The request that carries this call, answered on `reply`.
    pub(crate) fn with_reply(self, reply: Reply<()>) -> VerifyRequest {
        VerifyRequest {
            by: self.by,
            message: self.message,
            signature: self.signature,
            reply,
            origin: self.origin,
        }
    }
}

/// Which public key a verify request names.
#[derive(Clone)]
pub(crate) enum VerifyBy {
    /// A raw 32-byte public key from outside.
    PublicKey([u8; 32]),
    /// A key version in the keystore.
    Key(KeyId),
    /// A key decoded and checked already (a trusted external JWK's).
    Verifying(VerifyingKey),
}
