//! ML-DSA tokens through the actor (feature `ml-dsa`): a key made with
//! its algorithm signs tokens under its parameter set's name, they verify
//! (before and after a rotation, not once the policy refuses the version),
//! the JWK Set publishes `AKP` keys that verify them outside the actor, and
//! a token under another `alg` is refused.
#![cfg(feature = "ml-dsa")]

use std::time::{SystemTime, UNIX_EPOCH};

use kms_actor::{JwtSigner, KmsActor, KmsConfig};
use kms_bus::Bus;
use kms_core::{Alg, Keystore};
use kms_jose::{Algorithm, CompactJws, JwkSet, TrustedJwkSet, Validation};
use serde_json::json;

use crate::support::code;

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn keys() -> kms_actor::TokenKeys {
    kms_actor::TokenKeys::keystore("gateway", "tokens")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ml_dsa_tokens_are_issued_published_and_verified() {
    let handle =
        KmsActor::spawn(KmsConfig::default(), Keystore::new(), &Bus::new()).expect("spawn");
    let kms = handle.client();
    let validation = Validation::default();
    for (alg, name) in [
        (Alg::MlDsa44, Algorithm::MlDsa44),
        (Alg::MlDsa65, Algorithm::MlDsa65),
        (Alg::MlDsa87, Algorithm::MlDsa87),
    ] {
        let key = kms
            .create_key_of("gateway", "tokens", alg)
            .await
            .expect("create");
        assert_eq!(key.alg(), alg);
        let claims = json!({"sub": "alice", "exp": now() + 600});
        let first = kms.sign_jwt(&key, &claims).await.expect("sign");
        let jws = CompactJws::parse(&first).expect("parses");
        assert_eq!(jws.header().alg(), name);
        assert_eq!(jws.header().kid(), Some(key.to_string().as_str()));
        assert_eq!(jws.signature().len(), alg.signature_len());
        let v2 = kms.rotate(&key).await.expect("rotate");
        let second = kms.sign_jwt(&key, &claims).await.expect("sign");
        for (token, kid) in [(&first, &key), (&second, &v2)] {
            let got = kms
                .verify_jwt(token, &keys(), &validation)
                .await
                .expect("verifies");
            assert_eq!(got.signer, JwtSigner::Key(kid.clone()));
        }
        // The published set verifies them outside the actor.
        let jwks: JwkSet = kms.jwks(&key).await.expect("jwks");
        assert!(jwks
            .keys
            .iter()
            .all(|k| k.kty() == "AKP" && k.alg() == name.as_str()));
        let trusted =
            TrustedJwkSet::from_json(serde_json::to_string(&jwks).expect("json").as_bytes())
                .expect("loads");
        for token in [&first, &second] {
            let jws = CompactJws::parse(token).expect("parses");
            let kid = jws.header().kid().expect("kid");
            let key = trusted
                .keys
                .iter()
                .find(|k| k.kid == kid)
                .expect("published");
            jws.verify_with(&key.key).expect("verifies outside");
        }
        // A flipped signature byte, and an Ed25519 `alg` under this kid.
        let (input, signature) = first.rsplit_once('.').expect("parts");
        let flipped = if signature.starts_with('A') { "B" } else { "A" };
        let forged = format!("{input}.{flipped}{}", &signature[1..]);
        assert_eq!(
            code(kms.verify_jwt(&forged, &keys(), &validation).await),
            "jose.invalid_signature"
        );
        let ed_header = kms_jose::Header::new(Algorithm::EdDSA, Some(key.to_string()));
        let renamed = kms_jose::sign_compact(&ed_header, &claims, |_| [0; 64]).expect("token");
        assert_eq!(
            code(kms.verify_jwt(&renamed, &keys(), &validation).await),
            "jose.alg_mismatch"
        );
        // The same kid with another algorithm's name names no key.
        let relabelled_kid = key.to_string().replace(alg.as_str(), "ed25519");
        let header = kms_jose::Header::new(Algorithm::EdDSA, Some(relabelled_kid));
        let forged = kms_jose::sign_compact(&header, &claims, |_| [0; 64]).expect("token");
        assert_eq!(
            code(kms.verify_jwt(&forged, &keys(), &validation).await),
            "jose.unknown_kid"
        );
        // Once the policy refuses v1, its token is refused.
        let mut policy = kms.policy(&key).await.expect("policy");
        policy.min_verify_version = 2;
        kms.set_policy(&key, policy).await.expect("set");
        assert_eq!(
            code(kms.verify_jwt(&first, &keys(), &validation).await),
            "kms.version_disallowed"
        );
        kms.verify_jwt(&second, &keys(), &validation)
            .await
            .expect("v2 still verifies");
        kms.destroy(&key).await.expect("destroy");
    }
    handle.shutdown().await;
}
