//! One test case: a public key, a message and a signature.

use crate::Suite;

/// One signature-verification test case, with the bytes exactly as the file gives them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Case {
    /// The suite the case comes from.
    pub suite: Suite,
    /// The case id as in `expected_verdicts.tsv` (`"1"`, `"TEST 1"`, ...).
    pub id: String,
    /// The public key bytes as given (may be the wrong length).
    pub public_key: Vec<u8>,
    /// The message bytes.
    pub message: Vec<u8>,
    /// The signature bytes as given (may be the wrong length).
    pub signature: Vec<u8>,
    /// The file's own expectation, where it states one: `sign.input` and
    /// `rfc8032` cases are `Some(true)`; Wycheproof `"valid"` is `Some(true)`,
    /// `"invalid"` is `Some(false)` and `"acceptable"` is `None`; the other
    /// suites are `None`.
    pub file_expectation: Option<bool>,
}

impl Case {
    /// `Some((public_key, signature))` when they are 32 and 64 bytes long,
    /// `None` otherwise (such a case can only be invalid).
    pub fn fixed(&self) -> Option<(&[u8; 32], &[u8; 64])> {
        let public_key = <&[u8; 32]>::try_from(self.public_key.as_slice()).ok()?;
        let signature = <&[u8; 64]>::try_from(self.signature.as_slice()).ok()?;
        Some((public_key, signature))
    }
}
