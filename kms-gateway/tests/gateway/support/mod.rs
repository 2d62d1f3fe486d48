//! What the gateway's tests share: the gateway as a child process
//! (`serving`) and an upstream that records what reaches it
//! (`upstream`).

pub mod serving;
pub mod upstream;
