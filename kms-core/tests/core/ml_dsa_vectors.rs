//! ML-DSA (`kms_core::ml_dsa`) against the vectors of record in
//! `testdata/` (provenance in `testdata/PROVENANCE.md`): Wycheproof's
//! `mldsa_{44,65,87}_verify_test.json` (every test with the empty context:
//! `valid` verifies, `invalid` is refused, at the key or at the
//! signature), its `mldsa_*_sign_seed_test.json` (each seed makes the
//! group's public key, and each valid signature with the empty context
//! verifies under it), and RFC 9964's JOSE examples (the all-zero seed
//! makes each example's public key, and each example signature verifies
//! over its signing input).
#![cfg(feature = "ml-dsa")]

use std::io::Read;
use std::path::Path;

use kms_core::ml_dsa::{SigningKey, VerifyingKey};
use kms_core::Alg;
use serde::Deserialize;

const PARAMETER_SETS: [(Alg, &str); 3] = [
    (Alg::MlDsa44, "44"),
    (Alg::MlDsa65, "65"),
    (Alg::MlDsa87, "87"),
];

fn testdata(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if !name.ends_with(".gz") {
        return bytes;
    }
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(bytes.as_slice())
        .read_to_end(&mut text)
        .expect("gunzip");
    text
}

fn hex(text: &str) -> Vec<u8> {
    hex::decode(text).expect("hex")
}

#[derive(Deserialize)]
struct Suite<G> {
    algorithm: String,
    #[serde(rename = "numberOfTests")]
    number_of_tests: usize,
    #[serde(rename = "testGroups")]
    groups: Vec<G>,
}

#[derive(Deserialize)]
struct VerifyGroup {
    #[serde(rename = "publicKey")]
    public_key: String,
    tests: Vec<Case>,
}

#[derive(Deserialize)]
struct SignGroup {
    #[serde(rename = "privateSeed")]
    private_seed: String,
    #[serde(rename = "publicKey")]
    public_key: Option<String>,
    tests: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    #[serde(rename = "tcId")]
    id: u32,
    msg: Option<String>,
    ctx: Option<String>,
    sig: String,
    result: String,
}

impl Case {
    /// Runs with the empty context only: aws-lc-rs signs and verifies
    /// with the empty context RFC 9964 requires, and takes no other.
    fn empty_context(&self) -> bool {
        self.ctx.as_deref().is_none_or(str::is_empty)
    }
}

#[test]
fn wycheproof_verify_tests_with_the_empty_context_get_their_verdicts() {
    for (alg, level) in PARAMETER_SETS {
        let suite: Suite<VerifyGroup> = serde_json::from_slice(&testdata(&format!(
            "wycheproof_mldsa_{level}_verify_test.json.gz"
        )))
        .expect("suite");
        assert_eq!(suite.algorithm, format!("ML-DSA-{level}"));
        let (mut run, mut with_context, mut valid) = (0, 0, 0);
        for group in &suite.groups {
            let key = VerifyingKey::from_bytes(alg, &hex(&group.public_key));
            for case in &group.tests {
                if !case.empty_context() {
                    with_context += 1;
                    continue;
                }
                let message = hex(case.msg.as_deref().expect("a verify test has msg"));
                let verdict = key
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|key| key.verify(&message, &hex(&case.sig)));
                match case.result.as_str() {
                    "valid" => {
                        assert!(verdict.is_ok(), "{alg} tcId {}: {verdict:?}", case.id);
                        valid += 1;
                    }
                    _ => assert!(verdict.is_err(), "{alg} tcId {} verified", case.id),
                }
                run += 1;
            }
        }
        assert_eq!(run + with_context, suite.number_of_tests);
        assert!(run > 150 && valid > 60, "{alg}: {run} run, {valid} valid");
        println!("{alg}: {run} Wycheproof verify tests ({valid} valid), {with_context} with a context left out");
    }
}

#[test]
fn wycheproof_seeds_make_their_keys_and_their_signatures_verify() {
    for (alg, level) in PARAMETER_SETS {
        let suite: Suite<SignGroup> = serde_json::from_slice(&testdata(&format!(
            "wycheproof_mldsa_{level}_sign_seed_test.json.gz"
        )))
        .expect("suite");
        let (mut keys, mut verified) = (0, 0);
        for group in &suite.groups {
            let seed = hex(&group.private_seed);
            let Ok(seed) = <[u8; 32]>::try_from(seed.as_slice()) else {
                // A seed of another length makes no key: the group has
                // none, and our API takes only 32 bytes.
                assert!(
                    group.public_key.is_none(),
                    "{alg}: a {}-byte seed",
                    seed.len()
                );
                continue;
            };
            let public = hex(group
                .public_key
                .as_deref()
                .expect("a key for a 32-byte seed"));
            let key = SigningKey::from_seed(alg, &seed).expect("key");
            assert_eq!(key.public_key(), public.as_slice(), "{alg}");
            keys += 1;
            let verifying = VerifyingKey::from_bytes(alg, &public).expect("public key");
            for case in &group.tests {
                let (Some(msg), true, "valid") = (
                    case.msg.as_deref(),
                    case.empty_context(),
                    case.result.as_str(),
                ) else {
                    continue;
                };
                verifying
                    .verify(&hex(msg), &hex(&case.sig))
                    .unwrap_or_else(|e| panic!("{alg} tcId {}: {e}", case.id));
                verified += 1;
            }
            // Our own (hedged) signature verifies under the same key.
            let ours = key.sign(b"kms").expect("sign");
            verifying.verify(b"kms", &ours).expect("ours verify");
        }
        assert!(
            keys > 20 && verified > 60,
            "{alg}: {keys} keys, {verified} verified"
        );
        println!("{alg}: {keys} Wycheproof seeds made their keys, {verified} signatures verified");
    }
}

#[derive(Deserialize)]
struct Example {
    priv_: Option<String>,
    jws: String,
    raw_to_be_signed: String,
    raw_signature: String,
    raw_public_key: String,
}

#[test]
fn rfc9964_examples_keys_come_from_their_seeds_and_their_signatures_verify() {
    let all: serde_json::Value =
        serde_json::from_slice(&testdata("rfc9964_ml_dsa_jose_examples.json")).expect("json");
    for (alg, level) in PARAMETER_SETS {
        let mut example = all["jose"][format!("ML-DSA-{level}")].clone();
        example["priv_"] = example["priv"].take();
        let example: Example = serde_json::from_value(example).expect("example");
        let seed: [u8; 32] = hex(example.priv_.as_deref().expect("priv"))
            .try_into()
            .expect("32-byte seed");
        let key = SigningKey::from_seed(alg, &seed).expect("key");
        assert_eq!(key.public_key(), hex(&example.raw_public_key).as_slice());
        let signing_input = hex(&example.raw_to_be_signed);
        assert_eq!(
            Some(signing_input.as_slice()),
            example
                .jws
                .rsplit_once('.')
                .map(|(input, _)| input.as_bytes())
        );
        let verifying = VerifyingKey::from_bytes(alg, key.public_key()).expect("public key");
        verifying
            .verify(&signing_input, &hex(&example.raw_signature))
            .expect("the example verifies");
        let mut tampered = hex(&example.raw_signature);
        tampered[0] ^= 1;
        assert!(verifying.verify(&signing_input, &tampered).is_err());
    }
}
