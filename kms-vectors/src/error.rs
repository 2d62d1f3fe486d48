//! The error type of every parser and loader in this crate.

use std::path::PathBuf;

/// An error reading or parsing a test-vector file.
///
/// `origin` names where the input came from: the file path and suite
/// (e.g. `testdata/x.txt (sign.input)`) when it was read from a file, or just
/// the suite name (e.g. `sign.input`) when it was parsed from a string.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A gzip file could not be decompressed.
    #[error("cannot gunzip {}: {source}", path.display())]
    Gzip {
        /// The file.
        path: PathBuf,
        /// The decompression error.
        source: std::io::Error,
    },
    /// A file is not UTF-8 text.
    #[error("{} is not UTF-8 text: {source}", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The decoding error.
        source: std::string::FromUtf8Error,
    },
    /// A line of a line-based file (`sign.input`, `expected_verdicts.tsv`) is malformed.
    #[error("{origin} line {line}: {reason}")]
    Line {
        /// Where the input came from.
        origin: String,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with the line.
        reason: String,
    },
    /// A case of a JSON file is malformed.
    #[error("{origin} case {id}: {reason}")]
    Case {
        /// Where the input came from.
        origin: String,
        /// The case id, or its position (e.g. `at index 5`) when the id itself is missing or malformed.
        id: String,
        /// What is wrong with the case.
        reason: String,
    },
    /// A JSON input is not valid JSON (the message gives the line and column).
    #[error("{origin}: invalid JSON: {source}")]
    Json {
        /// Where the input came from.
        origin: String,
        /// The JSON error.
        source: serde_json::Error,
    },
    /// An input does not have the expected overall structure
    /// (e.g. a JSON file without its top-level array of cases).
    #[error("{origin}: {reason}")]
    Format {
        /// Where the input came from.
        origin: String,
        /// What is wrong.
        reason: String,
    },
}
