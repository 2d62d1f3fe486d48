//! kms-http: the KMS's HTTP faces, for an embedder to mount in their own
//! axum (or any tower-based) app.
//!
//! * [`BearerLayer`]: a `tower::Layer` that takes `Authorization: Bearer
//!   <token>` (the scheme case-insensitive, RFC 7235 §2.1), verifies the
//!   token through [`kms_actor::KmsClient::verify_jwt`] — so the tokens of
//!   concurrent requests are verified in one coalesced batch, and a lone
//!   request on a quiet node on its own task — and passes the verified
//!   claims to the inner service as a [`VerifiedClaims`] request
//!   extension. Otherwise it answers itself (RFC 6750 §3): 401 with
//!   `WWW-Authenticate: Bearer` when no bearer credentials came; 401 with
//!   `Bearer error="invalid_token", error_description="…"` when the token
//!   was refused; 400 with `Bearer error="invalid_request"` for more than
//!   one `Authorization` header; 503 with `Retry-After` when the KMS is
//!   overloaded or shutting down; 500 for an internal error.
//! * [`jwks_router`]: `GET /.well-known/jwks.json`, every verifying version
//!   of the signing key as a JWK Set, from a snapshot rebuilt once per
//!   key-set change (so a flood of it never reaches the actor), with
//!   `Cache-Control`, `ETag` and 304.
//! * [`admin_router`]: token issuance and rotation, for a listener the
//!   public cannot reach; it refuses requests from web pages and to other
//!   hosts (403), takes JSON bodies only, and every non-2xx answer is a
//!   JSON body `{"error": "<stable code>", "message": "<text>"}`.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod access;
mod admin;
mod admin_guard;
mod admin_state;
mod authorize;
mod bearer;
mod client_address;
mod error_body;
mod json_body;
mod jwks;
mod key_admin;
mod mint;
mod record;
mod resource_metadata;
mod token_cookie;

pub use access::{AccessLayer, AccessService, Anyone};
pub use admin::admin_router;
pub use admin_state::AdminConfig;
pub use authorize::{Authorize, Authorized};
pub use bearer::{
    invalid_token_response, invalid_token_response_with, BearerLayer, BearerService, VerifiedClaims,
};
pub use client_address::ClientAddress;
pub use error_body::{error_response, ErrorCode};
pub use jwks::{jwks_router, jwks_router_with, JwksConfig, JWKS_PATH};
pub use record::{AccessRule, RecordToken, TokenRecord};
pub use resource_metadata::{InvalidResource, ResourceMetadata};
pub use token_cookie::remove_cookie;
