//! The gateway's signing key and the `alg` of its tokens, from `--key`
//! and `--alg`: the key the purpose's signing pointer names (on a fleet,
//! one for all nodes), made with `--alg`'s algorithm if the store has
//! none; an explicit `--alg` must be the key's own algorithm.

use kms::core::{Alg, KeyId, Keystore};
use kms::jose::Algorithm;

use crate::config::{TokenSettings, ALG};

/// The signing key for `tokens` and the `alg` of Ed25519 tokens (the
/// actor's `token_alg`; an ML-DSA key's tokens are under its own name).
///
/// # Errors
/// The keystore's refusal naming `--key`; an explicit `--alg` whose
/// algorithm is not the existing key's, naming both (exit 1).
pub(crate) fn signing_key(
    keystore: &Keystore,
    tokens: &TokenSettings,
) -> Result<(KeyId, Algorithm), String> {
    let wanted = tokens
        .alg
        .and_then(Algorithm::key_alg)
        .unwrap_or(Alg::Ed25519);
    let key = keystore
        .signing_key_with(&tokens.tenant, &tokens.purpose, wanted)
        .map_err(|e| format!("{}: {e}", tokens.key_flag()))?;
    if let Some(alg) = tokens.alg {
        if alg.key_alg() != Some(key.alg()) {
            return Err(format!(
                "--alg {alg}: {} signs with {key}, an {} key; give --alg {} (or none), or another --key",
                tokens.key_flag(),
                key.alg(),
                Algorithm::for_ml_dsa_key(key.alg()).unwrap_or(ALG),
            ));
        }
    }
    let ed25519_alg = tokens.alg.filter(|alg| alg.is_ed25519()).unwrap_or(ALG);
    Ok((key, ed25519_alg))
}
