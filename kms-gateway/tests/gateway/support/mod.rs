//! What the gateway's tests share: the gateway as a child process
//! (`serving`), an upstream that records what reaches it (`upstream`),
//! and a partner issuer's key that signs what a test asks (`partner`).

pub mod partner;
pub mod serving;
pub mod upstream;
