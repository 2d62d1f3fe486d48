//! kms-access's integration tests, in one binary: the rules file's
//! refusals (each with its line and column), the decision, and the
//! properties of normalization and matching.

mod decide;
mod file;
mod properties;
