//! What the main job sends: every embedded vector with the verdict it
//! must get, then tokens signed by the keystore, a share of them forged.

use bytes::Bytes;
use kms::actor::KmsClient;
use kms::core::{KeyId, Keystore};

use super::vectors;
use crate::config::JobConfig;

/// Distinct tokens signed up front and verified round-robin for the run.
pub(crate) const TOKEN_POOL: usize = 32_768;

/// What one request asks and what its verdict must be.
pub(crate) struct Job {
    /// What a mismatch line names: `<suite> <id>` or `token <i> (<kid>)`.
    pub(crate) label: String,
    pub(crate) target: Target,
    pub(crate) message: Bytes,
    pub(crate) signature: [u8; 64],
    /// The verdict the job must get.
    pub(crate) expect_valid: bool,
}

/// Whom a job's signature is verified against.
pub(crate) enum Target {
    /// A raw public key (32 bytes, as the vector gives it).
    PublicKey([u8; 32]),
    /// A key version of the keystore, by id.
    Key(KeyId),
}

/// Every fixed-length embedded vector (`vectors.rs`), with its required verdict.
/// (Wrong-length cases cannot be expressed through the API, which takes
/// exactly 32 and 64 bytes; all of them are expected invalid.)
pub(crate) fn vector_jobs() -> Result<Vec<Job>, String> {
    let (cases, expected) = vectors::embedded()?;
    let mut jobs = Vec::with_capacity(cases.len());
    for case in cases {
        let expect_valid = expected
            .for_case(&case)
            .ok_or_else(|| format!("no expected verdict for {} {}", case.suite, case.id))?;
        let Some((pk, sig)) = case.fixed() else {
            if expect_valid {
                return Err(format!(
                    "{} {} has a wrong length but is expected valid",
                    case.suite, case.id
                ));
            }
            continue;
        };
        jobs.push(Job {
            label: format!("{} {}", case.suite, case.id),
            target: Target::PublicKey(*pk),
            message: Bytes::from(case.message.clone()),
            signature: *sig,
            expect_valid,
        });
    }
    Ok(jobs)
}

/// Creates `options.keys` keys through the actor, signs [`TOKEN_POOL`]
/// tokens with the keystore on all cores, then rotates every second key
/// (the `passports` keys) through the actor, so their tokens verify under a
/// version that is no longer the head. A share `options.invalid_share` is
/// forged (one flipped bit in the signature or the claims).
pub(crate) async fn token_jobs(
    kms: &KmsClient,
    keystore: &Keystore,
    options: &JobConfig,
) -> Result<Vec<Job>, String> {
    let mut keys = Vec::with_capacity(options.keys);
    for i in 0..options.keys {
        let tenant = format!("tenant-{}", i / 2);
        let purpose = if i % 2 == 0 { "tokens" } else { "passports" };
        keys.push(
            kms.create_key(&tenant, purpose)
                .await
                .map_err(|e| e.to_string())?,
        );
    }
    let keystore = keystore.clone();
    // Forged when a hash of the index falls below this, out of 1 000 000.
    let forged_per_million = (options.invalid_share * 1_000_000.0).round() as usize;
    let count = TOKEN_POOL;
    let signer_keys = keys.clone();
    let jobs = tokio::task::spawn_blocking(move || {
        let keys = signer_keys;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = count.div_ceil(threads).max(1);
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..count)
                .step_by(chunk)
                .map(|start| {
                    let (keystore, keys) = (&keystore, &keys);
                    scope.spawn(move || {
                        (start..(start + chunk).min(count))
                            .map(|i| token(keystore, keys, i, forged_per_million))
                            .collect::<Result<Vec<Job>, String>>()
                    })
                })
                .collect();
            let mut jobs = Vec::with_capacity(count);
            for w in workers {
                jobs.extend(w.join().map_err(|_| "token signer panicked".to_owned())??);
            }
            Ok::<Vec<Job>, String>(jobs)
        })
    })
    .await
    .map_err(|e| e.to_string())??;
    for key in keys.iter().filter(|k| k.purpose() == "passports") {
        kms.rotate(key).await.map_err(|e| e.to_string())?;
    }
    Ok(jobs)
}

fn token(
    keystore: &Keystore,
    keys: &[KeyId],
    i: usize,
    forged_per_million: usize,
) -> Result<Job, String> {
    let key = &keys[i % keys.len()];
    let claims = format!(
        r#"{{"sub":"user-{i}","aud":"{}","iat":{},"scope":"read write"}}"#,
        key.purpose(),
        1_700_000_000 + i
    );
    let (signer, mut signature) = keystore
        .sign(key, claims.as_bytes())
        .map_err(|e| e.to_string())?;
    let mut message = claims.into_bytes();
    // Deterministic spread of forgeries: a multiplicative hash of i.
    let forged = (i.wrapping_mul(2_654_435_761) >> 7) % 1_000_000 < forged_per_million;
    if forged {
        if i.is_multiple_of(2) {
            signature[i % 64] ^= 1 << (i % 8);
        } else {
            let at = i % message.len();
            message[at] ^= 0x01;
        }
    }
    Ok(Job {
        label: format!("token {i} ({signer})"),
        target: Target::Key(signer),
        message: Bytes::from(message),
        signature,
        expect_valid: !forged,
    })
}
