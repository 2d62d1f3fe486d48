//! kms-access: access rules at the edge. A request's path is normalized
//! ([`normalize`]: the path that is matched is the path that is served),
//! the first rule whose path and method match decides
//! ([`AccessRules::decide`]), and a rule that needs a token checks the
//! verified token's claims ([`Requirements::check`]) on the
//! [`kms_jose::Claims`] its verification parsed. No I/O: `kms-http`'s
//! layers and the gateway build on it.
//!
//! ```
//! use http::Method;
//! use kms_access::{normalize, Access, AccessRules, Requirement};
//!
//! let rules = AccessRules::from_toml(r#"
//!     default = "deny"
//!     [[rule]]
//!     path = "/public/"
//!     methods = ["GET", "HEAD"]
//!     allow = "anyone"
//!     [[rule]]
//!     path = "/orders/"
//!     scopes = ["orders:write"]
//!     claims = { tenant = ["acme", "beta"] }
//! "#)?;
//!
//! let path = normalize("/public/../orders//7").expect("a path in bounds");
//! assert_eq!(path.as_str(), "/orders/7");
//! let decision = rules.decide(&path, &Method::POST);
//! assert_eq!(decision.rule, Some(1));
//! let Access::Token(requirements) = decision.access else { unreachable!() };
//!
//! // The claims of the request's verified token.
//! let claims = kms_jose::Claims::from_json(
//!     br#"{"sub":"alice","scope":"orders:read","tenant":"acme"}"#,
//! ).expect("claims");
//! assert_eq!(requirements.check(&claims), Err(Requirement::Scope));
//!
//! // No rule matches: the default.
//! let other = normalize("/admin").expect("a path in bounds");
//! assert_eq!(rules.decide(&other, &Method::GET).access, Access::Deny);
//! # Ok::<(), kms_access::RulesError>(())
//! ```
//!
//! The file's format, with what each key means, is
//! [`AccessRules::from_toml`]'s; what a path's normal form is, and which
//! paths are refused, [`normalize`]'s module docs.
//!
//! Not supported, on purpose: patterns in paths beyond a prefix (no
//! globs, no regular expressions: a prefix is what a reader can check by
//! eye), case-insensitive paths, and rules on hosts or headers.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
#![deny(clippy::unwrap_used, clippy::expect_used)]
#![warn(missing_debug_implementations, unreachable_pub)]

mod file;
mod path;
mod requirements;
mod rules;

pub use file::RulesError;
pub use path::{is_plain_path, normalize, NormalPath, PathError};
pub use requirements::{Requirement, Requirements};
pub use rules::{Access, AccessRules, Decision, DefaultAccess};
