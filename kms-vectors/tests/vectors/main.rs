//! kms-vectors' integration tests, in one binary: every vector file parses,
//! and no input makes a reader panic.

mod no_panic;
mod parse;
