//! A verify batch, run on a pool thread: resolve key ids, one
//! `verify_batch`, one answer per request on its own reply channel.
//!
//! Failure paths, in order: a request whose key id is unknown gets that
//! error and does not enter the batch; a request whose caller has gone is
//! skipped; if anything in the batch panics (or the verifier returns the
//! wrong number of verdicts), every request not yet answered gets
//! [`KmsError::Internal`]. Every request gets exactly one answer: a
//! [`Reply`] sends at most once, so the fallback cannot answer twice.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use kms_core::ed25519::{verify_batch, BatchItem, SignatureError};
use kms_core::{Keystore, KmsError};

use crate::request::{VerifyBy, VerifyRequest};

/// One verdict per item, in order: `kms_core::ed25519::verify_batch`'s shape.
pub(crate) type Verdicts = Vec<Result<(), SignatureError>>;

/// The batch verifier a pool job calls: `kms_core::ed25519::verify_batch`,
/// except in this crate's fault-injection tests, which pass one that blocks
/// or panics on cue.
pub(crate) type Verifier = Arc<dyn Fn(&[BatchItem<'_>]) -> Verdicts + Send + Sync>;

/// The production verifier.
pub(crate) fn default_verifier() -> Verifier {
    Arc::new(verify_batch)
}

/// Verifies `requests` as one batch with `verifier` and answers each.
pub(crate) fn run(requests: Vec<VerifyRequest>, keystore: &Keystore, verifier: &Verifier) {
    run_with(requests, keystore, |items| verifier(items));
}

/// [`run`] with the batch verifier passed in, so the failure paths (a
/// verifier that panics or miscounts) are tested on this same code.
fn run_with(
    requests: Vec<VerifyRequest>,
    keystore: &Keystore,
    verifier: impl FnOnce(&[BatchItem<'_>]) -> Verdicts,
) {
    // `answer` only borrows the requests, so after a panic they are still
    // here for the fallback.
    let failure = match catch_unwind(AssertUnwindSafe(|| answer(&requests, keystore, verifier))) {
        Ok(Ok(())) => return,
        Ok(Err(reason)) => reason,
        Err(_) => "the verify batch panicked".to_owned(),
    };
    for request in &requests {
        request.reply.send(Err(KmsError::Internal {
            reason: failure.clone(),
        }));
    }
}

/// Resolves keys, verifies, and answers every request.
///
/// # Errors
/// A reason, with nothing answered from the verdicts, when the verifier
/// returns a number of verdicts other than one per item.
fn answer(
    requests: &[VerifyRequest],
    keystore: &Keystore,
    verifier: impl FnOnce(&[BatchItem<'_>]) -> Verdicts,
) -> Result<(), String> {
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
    let items: Vec<BatchItem<'_>> = ready
        .iter()
        .map(|(public_key, r)| BatchItem {
            public_key,
            message: &r.message,
            signature: &r.signature,
        })
        .collect();
    let verdicts = verifier(&items);
    if verdicts.len() != ready.len() {
        return Err(format!(
            "the verifier returned {} verdicts for {} items",
            verdicts.len(),
            ready.len()
        ));
    }
    for ((_, request), verdict) in ready.iter().zip(verdicts) {
        request.reply.send(verdict.map_err(KmsError::from));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reply::Reply;
    use crate::request::VerifyBy;

    fn request(reply: Reply<()>) -> VerifyRequest {
        VerifyRequest {
            by: VerifyBy::PublicKey([1; 32]),
            message: bytes::Bytes::from_static(b"m"),
            signature: [0; 64],
            reply,
        }
    }

    #[test]
    fn a_panicking_batch_answers_every_request_internal() {
        let (replies, answers): (Vec<_>, Vec<_>) = (0..5).map(|_| Reply::new()).unzip();
        let requests = replies.into_iter().map(request).collect();
        run_with(requests, &Keystore::new(), |_| {
            panic!("injected verifier fault")
        });
        for mut answer in answers {
            match answer.try_recv() {
                Ok(Err(KmsError::Internal { reason })) => assert!(reason.contains("panicked")),
                other => panic!("expected Internal, got {other:?}"),
            }
        }
    }

    #[test]
    fn a_miscounting_verifier_answers_internal_not_dropped() {
        let (replies, answers): (Vec<_>, Vec<_>) = (0..3).map(|_| Reply::new()).unzip();
        let requests = replies.into_iter().map(request).collect();
        run_with(requests, &Keystore::new(), |_| vec![Ok(())]);
        for mut answer in answers {
            assert!(matches!(
                answer.try_recv(),
                Ok(Err(KmsError::Internal { .. }))
            ));
        }
    }

    #[test]
    fn unknown_keys_are_answered_alone_and_abandoned_requests_skipped() {
        let ks = Keystore::new();
        let stranger = Keystore::new()
            .create_ed25519("acme", "tokens")
            .expect("create");
        let (unknown, mut unknown_answer) = Reply::new();
        let (abandoned, abandoned_answer) = Reply::new();
        drop(abandoned_answer);
        let (kept, mut kept_answer) = Reply::new();
        let mut requests = vec![request(unknown), request(abandoned), request(kept)];
        requests[0].by = VerifyBy::Key(stranger);
        let mut seen = 0;
        run_with(requests, &ks, |items| {
            seen = items.len();
            verify_batch(items)
        });
        assert_eq!(
            seen, 1,
            "only the live request with a known key is verified"
        );
        assert!(matches!(
            unknown_answer.try_recv(),
            Ok(Err(KmsError::UnknownKey { .. }))
        ));
        assert!(matches!(
            kept_answer.try_recv(),
            Ok(Err(KmsError::InvalidSignature(_)))
        ));
    }
}
