//! kms-gateway's integration tests, in one binary: the `kms-gateway`
//! binary as a user runs it (the main job, `serve` and its refusals), on
//! loopback ports it picks, driven over real sockets. Deadlines only catch
//! hangs.
//!
//! The modules that need what a plain machine lacks are built with a
//! feature each: `etcd` (etcd's processes, protoc for the build),
//! `proxy-tests` (NGINX and Caddy), `oidc-tests` (Node's oidc-provider,
//! after `npm ci` in `tests/oidc`), `softhsm-tests` (SoftHSM2 and
//! OpenSC), `moto-tests` (moto's KMS server, PyPI's `moto[server]`). `.ci/run` runs them all with every feature on; one at a time, e.g. `cargo test -p kms-gateway --features
//! proxy-tests --test gateway proxies::`.
#![cfg(unix)]

mod support;

mod access_log;
mod access_rules;
mod config;
mod forward_auth;
mod issuer_policies;
mod issuers;
mod kubernetes;
mod lifecycle;
mod limits;
mod ml_dsa;
mod proxy;
mod rewrap;
mod serve;
mod tls;
mod token_cache;
mod trust;

#[cfg(feature = "etcd")]
mod fleet;
#[cfg(feature = "etcd")]
mod fleet_secure;
#[cfg(feature = "oidc-tests")]
mod oidc_provider;
#[cfg(feature = "proxy-tests")]
mod proxies;
#[cfg(feature = "moto-tests")]
mod root_aws_kms;
#[cfg(feature = "softhsm-tests")]
mod root_pkcs11;
