//! The AEAD under `kms_core::seal` (the `chacha20poly1305` crate) against
//! the vectors of record in `testdata/`: RFC 7539/8439 (and RFC 7634) from
//! pyca/pynacl's reference file, and every Wycheproof
//! `chacha20_poly1305_test.json` case. Cases with a 96-bit IV go through
//! the IETF construction (RFC 8439 §2.8); `valid` must seal to the expected
//! ciphertext and tag and open back, `invalid` must fail to open. Every
//! other IV size must be refused: the IETF construction takes 96 bits only.

use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, Nonce, Tag};
use serde::Deserialize;

fn testdata(name: &str) -> String {
    let path = kms_vectors::testdata_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).unwrap_or_else(|e| panic!("hex {s}: {e}"))
}

/// Seals `msg`, checks ciphertext and tag, opens it back.
fn check_valid(label: &str, key: &[u8], iv: &[u8], aad: &[u8], msg: &[u8], ct: &[u8], tag: &[u8]) {
    let cipher = ChaCha20Poly1305::new_from_slice(key).expect("32-byte key");
    let nonce = Nonce::try_from(iv).expect("96-bit nonce");
    let mut buffer = msg.to_vec();
    let got_tag = cipher
        .encrypt_inout_detached(&nonce, aad, buffer.as_mut_slice().into())
        .expect("seal");
    assert_eq!(buffer, ct, "{label}: ciphertext");
    assert_eq!(got_tag.as_slice(), tag, "{label}: tag");
    let tag = Tag::try_from(tag).expect("16-byte tag");
    cipher
        .decrypt_inout_detached(&nonce, aad, buffer.as_mut_slice().into(), &tag)
        .unwrap_or_else(|_| panic!("{label}: open"));
    assert_eq!(buffer, msg, "{label}: plaintext");
}

#[test]
fn rfc_8439_vectors() {
    let text = testdata("chacha20poly1305_ietf_rfc7539_rfc8439_ref.txt");
    let mut checked = 0;
    for block in text.split("\n\n").filter(|b| b.contains("KEY:")) {
        let field = |name: &str| -> Vec<u8> {
            let line = block
                .lines()
                .find(|l| l.starts_with(&format!("{name}:")))
                .unwrap_or_else(|| panic!("{name} missing in {block}"));
            unhex(line[name.len() + 1..].trim())
        };
        let label = block.lines().next().unwrap_or("vector");
        check_valid(
            label,
            &field("KEY"),
            &field("NONCE"),
            &field("AD"),
            &field("IN"),
            &field("CT"),
            &field("TAG"),
        );
        checked += 1;
    }
    assert_eq!(checked, 4, "the file holds 4 vectors");
}

#[derive(Deserialize)]
struct Suite {
    #[serde(rename = "testGroups")]
    groups: Vec<Group>,
}

#[derive(Deserialize)]
struct Group {
    #[serde(rename = "ivSize")]
    iv_size: usize,
    tests: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    #[serde(rename = "tcId")]
    id: u32,
    key: String,
    iv: String,
    aad: String,
    msg: String,
    ct: String,
    tag: String,
    result: String,
}

#[test]
fn wycheproof_chacha20_poly1305() {
    let suite: Suite = serde_json::from_str(&testdata("wycheproof_chacha20_poly1305_test.json"))
        .expect("Wycheproof JSON");
    let (mut valid, mut invalid, mut refused_iv) = (0, 0, 0);
    for group in &suite.groups {
        for case in &group.tests {
            let label = format!("tcId {}", case.id);
            let (key, iv) = (unhex(&case.key), unhex(&case.iv));
            let (aad, msg, ct, tag) = (
                unhex(&case.aad),
                unhex(&case.msg),
                unhex(&case.ct),
                unhex(&case.tag),
            );
            if group.iv_size != 96 {
                assert!(
                    Nonce::try_from(iv.as_slice()).is_err(),
                    "{label}: IV of {} bits taken",
                    group.iv_size
                );
                assert_ne!(case.result, "valid", "{label}: only 96-bit IVs are valid");
                refused_iv += 1;
                continue;
            }
            match case.result.as_str() {
                "valid" => {
                    check_valid(&label, &key, &iv, &aad, &msg, &ct, &tag);
                    valid += 1;
                }
                "invalid" => {
                    let cipher = ChaCha20Poly1305::new_from_slice(&key).expect("32-byte key");
                    let nonce = Nonce::try_from(iv.as_slice()).expect("96-bit nonce");
                    let opened = Tag::try_from(tag.as_slice()).ok().and_then(|tag| {
                        let mut buffer = ct.clone();
                        cipher
                            .decrypt_inout_detached(
                                &nonce,
                                &aad,
                                buffer.as_mut_slice().into(),
                                &tag,
                            )
                            .ok()
                    });
                    assert!(opened.is_none(), "{label}: an invalid case opened");
                    invalid += 1;
                }
                other => panic!("{label}: unexpected result {other}"),
            }
        }
    }
    assert_eq!(valid + invalid + refused_iv, 325, "every case is checked");
    assert!(valid > 0 && invalid > 0 && refused_iv > 0);
}
