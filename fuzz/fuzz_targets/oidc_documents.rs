//! What an identity provider's server sends (kms-oidc): the discovery
//! document (`jwks_uri_from_discovery`) and the fetched JWK Set
//! (`TrustedJwkSet::from_fetched_json`, RSA and EC keys included) never
//! panic on any bytes; a `jwks_uri` found may be fetched (https, or http
//! to loopback); a fetched set's keys have unique `kid`s and verify only
//! the algorithms of their type.
#![no_main]

use std::collections::HashSet;

use kms_jose::{Algorithm, TrustedJwkSet};
use libfuzzer_sys::fuzz_target;

const ISSUER: &str = "https://idp.example";

fuzz_target!(|data: &[u8]| {
    let url = kms_oidc::Url::parse("https://idp.example/.well-known/openid-configuration")
        .expect("url");
    if let Ok(uri) = kms_oidc::jwks_uri_from_discovery(data, ISSUER, &url) {
        assert!(kms_oidc::check_url(uri.as_str()).is_ok(), "{uri}");
    }
    let Ok(set) = TrustedJwkSet::from_fetched_json(data) else {
        return;
    };
    let mut kids = HashSet::new();
    for key in &set.keys {
        assert!(kids.insert(key.kid.clone()), "kid {:?} twice", key.kid);
        // Never `none`-like: a key verifies its own type's algorithms,
        // and at least one.
        let algs = [
            Algorithm::EdDSA,
            Algorithm::RS256,
            Algorithm::PS512,
            Algorithm::ES256,
            Algorithm::ES384,
        ];
        assert!(algs.iter().any(|alg| key.key.verifies(*alg)));
        assert!(!(key.key.verifies(Algorithm::EdDSA) && key.key.verifies(Algorithm::RS256)));
    }
});
