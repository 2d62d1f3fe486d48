//! [`Requirements`]: what a rule asks of a verified token's claims, checked
//! on the claims the token's verification already parsed (nothing is
//! parsed again).
//!
//! Each kind, and what meets it:
//! * scopes: every one granted by `scope` or `scp`, each a space-delimited
//!   string or an array of strings (RFC 8693 §4.2 and RFC 9068 §2.2.3 use
//!   `scope`; Microsoft's and Okta's tokens `scp`); the two are read
//!   together;
//! * claims: per claim, a top-level claim of that exact name first, else
//!   the dots of the name address nested members (`realm_access.roles`);
//!   a string claim equals the value or one of the list; an array holds a
//!   string that does; other types never match;
//! * issuers: `iss` is one of them;
//! * audiences: `aud`, a string or an array of strings, names one of them.
//!
//! An empty kind asks nothing. Kinds are checked in the order above, and
//! the first unmet one is what [`Requirements::check`] reports.

use kms_jose::Claims;
use serde_json::Value;

/// A kind of requirement a token did not meet, as the 403's body names it
/// (`{"error":"insufficient_scope","requirement":KIND}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Requirement {
    /// A scope was not granted.
    Scope,
    /// A claim did not have a required value.
    Claim,
    /// `iss` was not one of the rule's issuers.
    Issuer,
    /// `aud` named none of the rule's audiences.
    Audience,
}

impl Requirement {
    /// The kind's name: `scope`, `claim`, `issuer` or `audience`.
    pub fn as_str(self) -> &'static str {
        match self {
            Requirement::Scope => "scope",
            Requirement::Claim => "claim",
            Requirement::Issuer => "issuer",
            Requirement::Audience => "audience",
        }
    }
}

/// What a rule asks of a token (module docs); built by
/// [`AccessRules::from_toml`](crate::AccessRules::from_toml).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    pub(crate) scopes: Vec<String>,
    pub(crate) claims: Vec<ClaimRequirement>,
    pub(crate) issuers: Vec<String>,
    pub(crate) audiences: Vec<String>,
}

/// One entry of a rule's `claims`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClaimRequirement {
    /// The name as written.
    pub(crate) name: String,
    /// The values, one of which the claim must hold (never empty).
    pub(crate) values: Vec<String>,
}

impl Requirements {
    /// Whether `claims` meet every requirement.
    ///
    /// # Errors
    /// The first unmet kind, in the module docs' order.
    pub fn check(&self, claims: &Claims) -> Result<(), Requirement> {
        if !self.scopes.iter().all(|scope| granted(claims, scope)) {
            return Err(Requirement::Scope);
        }
        for claim in &self.claims {
            let held = lookup(claims, &claim.name).is_some_and(|value| {
                claim
                    .values
                    .iter()
                    .any(|wanted| holds(value, |held| held == wanted))
            });
            if !held {
                return Err(Requirement::Claim);
            }
        }
        if !self.issuers.is_empty() {
            let iss = claims.get("iss").and_then(Value::as_str);
            if !iss.is_some_and(|iss| self.issuers.iter().any(|i| i == iss)) {
                return Err(Requirement::Issuer);
            }
        }
        if !self.audiences.is_empty() {
            let named = claims
                .get("aud")
                .is_some_and(|aud| holds(aud, |held| self.audiences.iter().any(|a| a == held)));
            if !named {
                return Err(Requirement::Audience);
            }
        }
        Ok(())
    }

    /// The scopes asked for, in the file's order.
    pub fn scopes(&self) -> &[String] {
        &self.scopes
    }

    /// Whether it asks nothing.
    pub fn is_empty(&self) -> bool {
        self.scopes.is_empty()
            && self.claims.is_empty()
            && self.issuers.is_empty()
            && self.audiences.is_empty()
    }
}

/// Whether `scope` is granted by `scope` or `scp` (module docs).
fn granted(claims: &Claims, scope: &str) -> bool {
    ["scope", "scp"].iter().any(|name| {
        claims.get(name).is_some_and(|value| match value {
            Value::String(text) => text.split(' ').any(|granted| granted == scope),
            Value::Array(items) => items.iter().any(|item| item.as_str() == Some(scope)),
            _ => false,
        })
    })
}

/// The claim `name`: the top-level claim of that exact name, else the
/// nested member its dots address.
fn lookup<'c>(claims: &'c Claims, name: &str) -> Option<&'c Value> {
    if let Some(value) = claims.get(name) {
        return Some(value);
    }
    let mut parts = name.split('.');
    let first = claims.get(parts.next()?)?;
    parts.try_fold(first, |value, part| value.as_object()?.get(part))
}

/// Whether `value`, a string or an array, holds a string `wanted` accepts.
fn holds(value: &Value, wanted: impl Fn(&str) -> bool) -> bool {
    match value {
        Value::String(text) => wanted(text),
        Value::Array(items) => items.iter().filter_map(Value::as_str).any(wanted),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(json: serde_json::Value) -> Claims {
        Claims::from_json(json.to_string().as_bytes()).unwrap()
    }

    fn requirements() -> Requirements {
        Requirements {
            scopes: vec!["orders:write".to_owned(), "orders:read".to_owned()],
            claims: vec![
                ClaimRequirement {
                    name: "groups".to_owned(),
                    values: vec!["ops".to_owned()],
                },
                ClaimRequirement {
                    name: "realm_access.roles".to_owned(),
                    values: vec!["admin".to_owned(), "root".to_owned()],
                },
            ],
            issuers: vec!["https://idp.example.com".to_owned()],
            audiences: vec!["orders".to_owned()],
        }
    }

    fn good() -> serde_json::Value {
        serde_json::json!({
            "iss": "https://idp.example.com",
            "aud": ["billing", "orders"],
            "scope": "openid orders:write",
            "scp": ["orders:read"],
            "groups": ["dev", "ops"],
            "realm_access": {"roles": ["admin"]},
        })
    }

    #[test]
    fn a_token_meeting_every_requirement_passes() {
        assert_eq!(requirements().check(&claims(good())), Ok(()));
        assert_eq!(
            Requirements::default().check(&claims(serde_json::json!({}))),
            Ok(())
        );
    }

    #[test]
    fn each_unmet_kind_is_named() {
        let cases: [(&str, serde_json::Value, Requirement); 9] = [
            ("scope", serde_json::json!("openid"), Requirement::Scope),
            // A scope is a whole word of the string.
            (
                "scope",
                serde_json::json!("orders:writer"),
                Requirement::Scope,
            ),
            ("scope", serde_json::json!(7), Requirement::Scope),
            ("groups", serde_json::json!("dev"), Requirement::Claim),
            ("groups", serde_json::json!([1, "op"]), Requirement::Claim),
            (
                "realm_access",
                serde_json::json!({"roles": "user"}),
                Requirement::Claim,
            ),
            (
                "iss",
                serde_json::json!("https://other.example.com"),
                Requirement::Issuer,
            ),
            ("aud", serde_json::json!("billing"), Requirement::Audience),
            (
                "aud",
                serde_json::json!({"orders": true}),
                Requirement::Audience,
            ),
        ];
        for (name, value, kind) in cases {
            let mut json = good();
            json[name] = value.clone();
            assert_eq!(
                requirements().check(&claims(json)),
                Err(kind),
                "{name}={value}"
            );
        }
        for name in ["iss", "aud", "groups"] {
            let mut json = good();
            json.as_object_mut().unwrap().remove(name);
            assert!(
                requirements().check(&claims(json)).is_err(),
                "without {name}"
            );
        }
    }

    #[test]
    fn a_top_level_claim_with_dots_in_its_name_comes_first() {
        let mut json = good();
        json["realm_access"] = serde_json::json!({"roles": ["user"]});
        json["realm_access.roles"] = serde_json::json!("root");
        assert_eq!(requirements().check(&claims(json)), Ok(()));
    }
}
