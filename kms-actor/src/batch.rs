//! A verify batch, run on a pool thread: resolve key ids, one
//! `verify_batch`, one answer per request on its own reply channel.
//!
//! Failure paths, in order: a request whose key id is unknown gets that
//! error and does not enter the batch; a request whose caller has gone is
//! skipped; if `verify_batch` panics, every request in the batch gets
//! [`KmsError::Internal`]. Every request gets exactly one answer.

use std::panic::{catch_unwind, AssertUnwindSafe};

use kms_core::ed25519::{verify_batch, BatchItem};
use kms_core::{Keystore, KmsError};

use crate::request::{VerifyBy, VerifyRequest};

/// Verifies `requests` as one batch and answers each.
pub(crate) fn run(requests: Vec<VerifyRequest>, keystore: &Keystore) {
    let mut ready = Vec::with_capacity(requests.len());
    for request in requests {
        if request.reply.is_abandoned() {
            continue;
        }
        let public_key = match &request.by {
            VerifyBy::PublicKey(pk) => *pk,
            VerifyBy::Key(key) => match keystore.public_key(key) {
                Ok(pk) => pk,
                Err(e) => {
                    request.reply.send(Err(e));
                    continue;
                }
            },
        };
        ready.push((public_key, request));
    }
    let verdicts = catch_unwind(AssertUnwindSafe(|| {
        let items: Vec<BatchItem<'_>> = ready
            .iter()
            .map(|(public_key, r)| BatchItem {
                public_key,
                message: &r.message,
                signature: &r.signature,
            })
            .collect();
        verify_batch(&items)
    }));
    match verdicts {
        Ok(verdicts) => {
            for ((_, request), verdict) in ready.iter().zip(verdicts) {
                request.reply.send(verdict.map_err(KmsError::from));
            }
        }
        Err(_) => {
            for (_, request) in &ready {
                request.reply.send(Err(KmsError::Internal {
                    reason: "the verify batch panicked".to_owned(),
                }));
            }
        }
    }
}
