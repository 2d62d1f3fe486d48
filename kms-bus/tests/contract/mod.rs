//! The delivery contract of the crate docs, run once per backend (see
//! `classic.rs` and `soa.rs`, which set `crate::BACKEND`).

mod blocking;
mod close;
pub mod common;
mod coop;
mod delivery;
mod drain;
mod model;
mod overflow;
mod release;
mod threads;
