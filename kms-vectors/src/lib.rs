//! Parsers for Ed25519 signature-verification test-vector files.
//!
//! Every parser turns a file into [`Case`]s (public key, message and
//! signature bytes exactly as given, plus the file's own expectation) and
//! reports malformed input as a [`VectorError`] naming the line or case;
//! none of them panics on malformed input. This crate only parses: it does
//! no cryptography.
//!
//! Suites ([`Suite`]): Wycheproof EdDSA JSON ([`parse_wycheproof`]),
//! `sign.input` text ([`parse_sign_input`]), ed25519-speccheck
//! ([`parse_speccheck`]), C2SP CCTV ([`parse_cctv`]), RFC 8032 §7.1
//! ([`parse_rfc8032`]) and ZIP-215 small-order cases ([`parse_zip215`]).
//! [`load_file`] detects the format of a file; [`load_all_testdata`] reads
//! the bundled files of [`testdata_dir`], and [`ExpectedVerdicts`] the
//! verdict each of their cases must get.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod case;
mod error;
mod expected;
mod json;
mod json_suites;
mod load;
mod sign_input;
mod suite;
mod wycheproof;

pub use case::Case;
pub use error::VectorError;
pub use expected::ExpectedVerdicts;
pub use json_suites::{parse_cctv, parse_rfc8032, parse_speccheck, parse_zip215};
pub use load::{load_all_testdata, load_file, load_suite, parse_suite, testdata_dir};
pub use sign_input::parse_sign_input;
pub use suite::{ParseSuiteError, Suite};
pub use wycheproof::parse_wycheproof;
