//! A verify batch, run on a pool thread (or on the actor's task, the inline
//! path, or a leading caller's): resolve key ids, one `verify_batch`, one
//! answer per request on its own reply channel. And [`verify_one`], the
//! same for one request verified on its caller's task (the caller path).
//!
//! Requests whose origin has been failing (`origins.rs`) are set apart:
//! the others are verified as one batch first, then each set-apart request
//! alone (a batch of one, which kms-core verifies as `verify` does and
//! which leaves its failure estimate alone), so a forger's signatures
//! neither fail nor shrink the combinations of the clean requests. Every
//! verdict of a request that carries an origin is recorded in the origin
//! table. A batch whose requests carry no origin is one batch.
//!
//! Failure paths, in order: a request whose key id is unknown gets that
//! error and does not enter the batch; a request whose caller has gone is
//! skipped; if anything in the batch panics (or the verifier returns the
//! wrong number of verdicts), every request not yet answered gets
//! [`KmsError::Internal`]. Every request gets exactly one answer: a
//! [`Reply`] sends at most once, so the fallback cannot answer twice.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use kms_core::ed25519::{verify_batch, BatchItem, SignatureError, VerifyingKey};
use kms_core::{Keystore, KmsError};

use crate::dispatch::origins::OriginTable;
use crate::dispatch::request::{VerifyBy, VerifyCall, VerifyRequest};
use crate::origin::Origin;

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

/// What verifies batches: the batch verifier, and the origin table that
/// sets failing origins' requests apart and records every verdict.
pub(crate) struct Verifying {
    pub(crate) verifier: Verifier,
    pub(crate) origins: OriginTable,
}

impl std::fmt::Debug for Verifying {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifying")
            .field("origins", &self.origins)
            .finish_non_exhaustive()
    }
}

/// Verifies `requests` (module docs: clean ones as one batch, then each
/// set-apart one alone) and answers each.
pub(crate) fn run(requests: Vec<VerifyRequest>, keystore: &Keystore, verifying: &Verifying) {
    let verifier = &verifying.verifier;
    let mut apart = verifying
        .origins
        .set_apart(requests.iter().map(|r| r.origin))
        .into_iter();
    let (set_apart, clean): (Vec<_>, Vec<_>) = requests
        .into_iter()
        .partition(|_| apart.next().unwrap_or(false));
    let mut verdicts = Vec::new();
    run_with(clean, keystore, |items| verifier(items), &mut verdicts);
    for request in set_apart {
        run_with(
            vec![request],
            keystore,
            |items| verifier(items),
            &mut verdicts,
        );
    }
    verifying.origins.record(&verdicts);
}

/// [`run`] with the batch verifier passed in, so the failure paths (a
/// verifier that panics or miscounts) are tested on this same code. Pushes
/// onto `verdicts`, for each request with an origin that got a verdict,
/// the origin and whether its signature failed.
fn run_with(
    requests: Vec<VerifyRequest>,
    keystore: &Keystore,
    verifier: impl FnOnce(&[BatchItem<'_>]) -> Verdicts,
    verdicts: &mut Vec<(Origin, bool)>,
) {
    if requests.is_empty() {
        return;
    }
    // `answer` only borrows the requests, so after a panic they are still
    // here for the fallback.
    let answered = catch_unwind(AssertUnwindSafe(|| {
        answer(&requests, keystore, verifier, verdicts)
    }));
    let failure = match answered {
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

/// Verifies one request on the calling thread with `verifier`, as a batch
/// of one would: the caller's own answer (the caller path, `coalesce.rs`).
///
/// # Errors
/// The key's error ([`KmsError::UnknownKey`], [`KmsError::UnknownVersion`]),
/// [`KmsError::InvalidSignature`], or [`KmsError::Internal`] if the
/// verifier panics or returns other than one verdict.
pub(crate) fn verify_one(
    request: &VerifyCall,
    keystore: &Keystore,
    verifying: &Verifying,
) -> Result<(), KmsError> {
    let verdict = catch_unwind(AssertUnwindSafe(|| {
        let key = resolve(&request.by, keystore)?;
        let verdicts = (verifying.verifier)(&[key.item(&request.message, &request.signature)]);
        match verdicts.as_slice() {
            [verdict] => {
                if let Some(origin) = request.origin {
                    verifying.origins.record(&[(origin, verdict.is_err())]);
                }
                (*verdict).map_err(KmsError::from)
            }
            _ => Err(KmsError::Internal {
                reason: format!(
                    "the verifier returned {} verdicts for 1 item",
                    verdicts.len()
                ),
            }),
        }
    }));
    verdict.unwrap_or_else(|_| {
        Err(KmsError::Internal {
            reason: "the verification panicked".to_owned(),
        })
    })
}

/// The public key a request names, in the form the batch takes it.
enum Resolved {
    /// Raw bytes from the caller (decoded in the batch, or found in
    /// kms-core's key cache).
    Bytes([u8; 32]),
    /// A keystore version's key, decoded when the version was made, or a
    /// trusted JWK's, decoded when its set was loaded.
    Key(VerifyingKey),
}

impl Resolved {
    fn item<'a>(&'a self, message: &'a [u8], signature: &'a [u8; 64]) -> BatchItem<'a> {
        match self {
            Resolved::Bytes(bytes) => BatchItem::new(bytes, message, signature),
            Resolved::Key(key) => BatchItem::with_verifying_key(key, message, signature),
        }
    }
}

/// The public key a request names: a keystore key's decoded point, so no
/// key is decoded twice and none goes through the process-wide cache.
///
/// # Errors
/// [`KmsError::UnknownKey`], [`KmsError::UnknownVersion`] for a key id
/// the keystore does not hold.
fn resolve(by: &VerifyBy, keystore: &Keystore) -> Result<Resolved, KmsError> {
    match by {
        VerifyBy::PublicKey(pk) => Ok(Resolved::Bytes(*pk)),
        VerifyBy::Key(key) => keystore.verifying_key(key).map(Resolved::Key),
        VerifyBy::Verifying(key) => Ok(Resolved::Key(*key)),
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
    recorded: &mut Vec<(Origin, bool)>,
) -> Result<(), String> {
    let mut ready = Vec::with_capacity(requests.len());
    for request in requests {
        if request.reply.is_abandoned() {
            continue;
        }
        let key = match resolve(&request.by, keystore) {
            Ok(key) => key,
            Err(e) => {
                request.reply.send(Err(e));
                continue;
            }
        };
        ready.push((key, request));
    }
    let items: Vec<BatchItem<'_>> = ready
        .iter()
        .map(|(key, r)| key.item(&r.message, &r.signature))
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
        if let Some(origin) = request.origin {
            recorded.push((origin, verdict.is_err()));
        }
        request.reply.send(verdict.map_err(KmsError::from));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::reply::Reply;
    use crate::dispatch::request::VerifyBy;

    fn request(reply: Reply<()>) -> VerifyRequest {
        VerifyRequest {
            by: VerifyBy::PublicKey([1; 32]),
            message: bytes::Bytes::from_static(b"m"),
            signature: [0; 64],
            reply,
            origin: None,
        }
    }

    #[test]
    fn a_panicking_batch_answers_every_request_internal() {
        let (replies, answers): (Vec<_>, Vec<_>) = (0..5).map(|_| Reply::new()).unzip();
        let requests = replies.into_iter().map(request).collect();
        run_with(
            requests,
            &Keystore::new(),
            |_| panic!("injected verifier fault"),
            &mut Vec::new(),
        );
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
        run_with(
            requests,
            &Keystore::new(),
            |_| vec![Ok(())],
            &mut Vec::new(),
        );
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
        run_with(
            requests,
            &ks,
            |items| {
                seen = items.len();
                verify_batch(items)
            },
            &mut Vec::new(),
        );
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

    /// A failing origin's requests are verified alone, after one batch of
    /// the others (a clean origin's, and requests without an origin), and
    /// every request gets its own verdict.
    #[test]
    fn a_failing_origins_requests_are_verified_apart_after_the_others() {
        use std::sync::Mutex;

        let ks = Keystore::new();
        let key = ks.create_ed25519("acme", "tokens").expect("create");
        let (key, signature) = ks.sign(&key, b"m").expect("sign");
        let (clean, forger) = (Origin::new("clean"), Origin::new("forger"));
        let sizes = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&sizes);
        let verifying = Verifying {
            verifier: Arc::new(move |items: &[BatchItem<'_>]| {
                seen.lock().expect("sizes").push(items.len());
                verify_batch(items)
            }),
            origins: OriginTable::new(64, "t"),
        };
        verifying.origins.record(
            &[(forger, true); 4]
                .into_iter()
                .chain([(clean, false)])
                .collect::<Vec<_>>(),
        );
        let mut answers = Vec::new();
        let mut requests = Vec::new();
        for i in 0..20 {
            let (reply, answer) = Reply::new();
            let forged = i % 5 == 0;
            requests.push(VerifyRequest {
                by: VerifyBy::Key(key.clone()),
                message: bytes::Bytes::from_static(if forged { b"x" } else { b"m" }),
                signature,
                reply,
                origin: match i % 5 {
                    0 => Some(forger),
                    1 => None,
                    _ => Some(clean),
                },
            });
            answers.push((forged, answer));
        }
        run(requests, &ks, &verifying);
        assert_eq!(*sizes.lock().expect("sizes"), [16, 1, 1, 1, 1]);
        for (forged, mut answer) in answers {
            match answer.try_recv() {
                Ok(Ok(())) => assert!(!forged),
                Ok(Err(KmsError::InvalidSignature(_))) => assert!(forged),
                other => panic!("{other:?}"),
            }
        }
    }
}
