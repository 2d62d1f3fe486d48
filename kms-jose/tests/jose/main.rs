//! kms-jose's integration tests, in one binary: interoperability with
//! jsonwebtoken, the parsers' properties, and RS*/PS*/ES* verification
//! (feature `rsa-ecdsa`).

mod interop;
mod ml_dsa;
mod parser_property;
mod rsa_ecdsa;
