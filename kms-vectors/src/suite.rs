//! The test-vector suites and their names in `expected_verdicts.tsv`.

use std::fmt;
use std::str::FromStr;

/// A test-vector suite.
///
/// [`Display`](fmt::Display) and [`FromStr`] use the names of the `suite`
/// column of `expected_verdicts.tsv`: `wycheproof`, `sign.input`, `speccheck`,
/// `cctv`, `rfc8032`, `zip215`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Suite {
    /// Wycheproof EdDSA verify JSON (`testGroups[].tests[]`); id = `tcId`.
    Wycheproof,
    /// `sign.input` text (`sk‖pk:pk:msg:sig‖msg:` per line); id = 1-based line number.
    SignInput,
    /// ed25519-speccheck `cases.json`; id = 0-based index.
    Speccheck,
    /// C2SP CCTV `ed25519vectors.json`; id = `number`.
    Cctv,
    /// RFC 8032 §7.1 vectors; id = `name` (e.g. `TEST 1`).
    Rfc8032,
    /// ZIP-215 small-order vectors; id = `number`.
    Zip215,
}

impl Suite {
    /// Every suite, in the order [`load_all_testdata`](crate::load_all_testdata) returns them.
    pub const ALL: [Suite; 6] = [
        Suite::Wycheproof,
        Suite::SignInput,
        Suite::Speccheck,
        Suite::Cctv,
        Suite::Rfc8032,
        Suite::Zip215,
    ];

    /// The suite's name as used in `expected_verdicts.tsv`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Suite::Wycheproof => "wycheproof",
            Suite::SignInput => "sign.input",
            Suite::Speccheck => "speccheck",
            Suite::Cctv => "cctv",
            Suite::Rfc8032 => "rfc8032",
            Suite::Zip215 => "zip215",
        }
    }

    /// The suite's file name in [`testdata_dir`](crate::testdata_dir)
    /// (for `sign.input`, the full 1024-line file, not the Go `.gz` subset).
    pub const fn testdata_file(self) -> &'static str {
        match self {
            Suite::Wycheproof => "wycheproof_ed25519_test.json",
            Suite::SignInput => "ed25519_sign.input_1024.txt",
            Suite::Speccheck => "speccheck_cases.json",
            Suite::Cctv => "cctv_ed25519vectors.json",
            Suite::Rfc8032 => "rfc8032_7.1_ed25519_vectors.json",
            Suite::Zip215 => "zip215_small_order_vectors.json",
        }
    }
}

impl fmt::Display for Suite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of parsing a [`Suite`] from a string that is not a suite name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown suite `{name}` (expected one of wycheproof, sign.input, speccheck, cctv, rfc8032, zip215)")]
pub struct ParseSuiteError {
    /// The string that is not a suite name.
    pub name: String,
}

impl FromStr for Suite {
    type Err = ParseSuiteError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Suite::ALL
            .into_iter()
            .find(|suite| suite.as_str() == s)
            .ok_or_else(|| ParseSuiteError { name: s.to_owned() })
    }
}
