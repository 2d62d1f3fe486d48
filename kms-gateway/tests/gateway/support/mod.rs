//! What the gateway's tests share: the gateway as a child process
//! (`serving`), an upstream that records what reaches it (`upstream`),
//! a partner issuer's key that signs what a test asks (`partner`), an
//! OpenID provider serving such keys (`provider`), and
//! the configurations RUNBOOK shows (`runbook`).

pub mod partner;
pub mod provider;
pub mod runbook;
pub mod serving;
pub mod upstream;
