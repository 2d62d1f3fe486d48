//! What the fleet's nodes do meanwhile: each rotates the signing key from
//! time to time, and each issues tokens that the other nodes verify.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kms::actor::TokenKeys;
use kms::core::{KeyId, KmsError};
use kms::jose::{CompactJws, Validation};
use serde_json::json;

use crate::node::Node;

/// How long a verifier waits for a token's key version to reach the node
/// that verifies it before it counts the version as lost. Longer than an
/// etcd leader election and a watch restart's backoff together.
const ARRIVAL_LIMIT: Duration = Duration::from_secs(10);

/// One rotation that returned `Ok`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rotation {
    /// The version it made.
    pub(crate) version: u32,
    /// When the `rotate` call began.
    pub(crate) started: Instant,
    /// The version's public key, as the rotating node made it.
    pub(crate) public_key: [u8; 32],
}

/// What one node's rotations came to.
#[derive(Debug, Default)]
pub(crate) struct Rotations {
    pub(crate) made: Vec<Rotation>,
    /// `Conflict`: lost every attempt to other nodes; nothing written.
    pub(crate) conflicts: u64,
    /// `Unavailable`: etcd did not answer in time; the commit may or may
    /// not have landed.
    pub(crate) unknown: u64,
    /// Any other error (a failure of the run).
    pub(crate) errors: Vec<String>,
}

/// Rotates `node`'s signing key every `every` (±50 %, so the nodes do not
/// rotate in step) until `deadline`. Blocking.
pub(crate) fn rotate(node: &Node, every: Duration, deadline: Instant) -> Rotations {
    let mut out = Rotations::default();
    loop {
        let pause = every.mul_f64(0.5 + rand::random::<f64>());
        std::thread::sleep(pause);
        if Instant::now() >= deadline {
            return out;
        }
        let started = Instant::now();
        match node.keystore.rotate(&node.key) {
            Ok(head) => {
                node.scan();
                match node.keystore.public_key(&head) {
                    Ok(public_key) => out.made.push(Rotation {
                        version: head.version(),
                        started,
                        public_key,
                    }),
                    Err(e) => out.errors.push(format!("{head} after its rotation: {e}")),
                }
            }
            Err(KmsError::Conflict { .. }) => out.conflicts += 1,
            Err(KmsError::Unavailable { .. }) => out.unknown += 1,
            Err(e) => out.errors.push(e.to_string()),
        }
    }
}

/// Verdicts of the cross-node verification (counts).
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    /// Valid tokens accepted, with their claims, by another node.
    pub(crate) accepted: AtomicU64,
    /// Forged tokens (one signature character changed) refused.
    pub(crate) refused: AtomicU64,
    /// Any other outcome: a valid token refused, a forged one accepted, a
    /// signing failure.
    pub(crate) wrong: AtomicU64,
    /// Tokens whose key version never reached the verifying node.
    pub(crate) never_arrived: AtomicU64,
}

impl Verdicts {
    fn count(counter: &AtomicU64) {
        // Relaxed: counts read after every task has been joined.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A counter's value.
    pub(crate) fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

/// Until `deadline`: issues a token on node `from` and verifies it, and a
/// forged copy, on each other node in turn (once the token's key version
/// has reached it).
pub(crate) async fn cross_verify(
    nodes: Arc<Vec<Arc<Node>>>,
    from: usize,
    lane: usize,
    deadline: Instant,
    verdicts: Arc<Verdicts>,
) {
    let validation = Validation::default();
    let mut n = 0usize;
    while Instant::now() < deadline {
        n += 1;
        let to = (from + 1 + n % (nodes.len() - 1)) % nodes.len();
        let sub = format!("node{from}-lane{lane}-{n}");
        let exp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs()
            + 300;
        let signer = &nodes[from];
        let token = match signer
            .client()
            .sign_jwt(&signer.key, &json!({ "sub": sub, "exp": exp }))
            .await
        {
            Ok(token) => token,
            Err(e) => {
                eprintln!("fleet: node {from} could not sign: {e}");
                Verdicts::count(&verdicts.wrong);
                continue;
            }
        };
        let Some(version) = kid_version(&token) else {
            eprintln!("fleet: node {from} issued a token without a keystore kid");
            Verdicts::count(&verdicts.wrong);
            continue;
        };
        let verifier = &nodes[to];
        if !verifier.wait_for(version, ARRIVAL_LIMIT).await {
            eprintln!("fleet: v{version}, signed on node {from}, never reached node {to}");
            Verdicts::count(&verdicts.never_arrived);
            continue;
        }
        match verifier
            .client()
            .verify_jwt(&token, &TokenKeys::of(&verifier.key), &validation)
            .await
        {
            Ok(verified) if verified.claims.get("sub") == Some(&json!(sub)) => {
                Verdicts::count(&verdicts.accepted)
            }
            other => {
                eprintln!("fleet: node {to} answered {other:?} for a valid token of node {from}");
                Verdicts::count(&verdicts.wrong);
            }
        }
        match verifier
            .client()
            .verify_jwt(&forge(&token), &TokenKeys::of(&verifier.key), &validation)
            .await
        {
            Err(KmsError::InvalidToken { .. }) => Verdicts::count(&verdicts.refused),
            other => {
                eprintln!("fleet: node {to} answered {other:?} for a forged token");
                Verdicts::count(&verdicts.wrong);
            }
        }
    }
}

/// The key version a token's `kid` names.
fn kid_version(token: &str) -> Option<u32> {
    let jws = CompactJws::parse(token).ok()?;
    let kid: KeyId = jws.header().kid()?.parse().ok()?;
    Some(kid.version())
}

/// `token` with one character of its signature changed (not the last,
/// whose low bits base64url does not use).
fn forge(token: &str) -> String {
    let mut bytes = token.as_bytes().to_vec();
    let at = bytes.len() - 10;
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap_or_default()
}
