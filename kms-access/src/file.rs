//! The rules file: TOML, read whole by [`AccessRules::from_toml`].
//!
//! ```toml
//! default = "deny"            # or "token"; "deny" when absent
//! [[rule]]
//! path = "/public/"           # required, in normal form, no `%`
//! methods = ["GET", "HEAD"]   # optional, upper case, not empty
//! allow = "anyone"            # or "token", the default
//! [[rule]]
//! path = "/orders/"
//! scopes = ["orders:write"]
//! claims = { groups = "ops", tenant = ["acme", "beta"] }
//! issuers = ["https://idp.example.com"]
//! audiences = ["orders"]
//! ```
//!
//! Every refusal ([`RulesError`]) names the line and column of the key or
//! value at fault: an unknown key, a wrong type, an empty `path` or one
//! not starting with `/` or not in normal form (one that normalization
//! would change, or holding `%`, `;` or a character a path must escape), an unknown `allow` or `default`, a
//! method that is not an upper-case HTTP token, a scope that could not
//! stand in a `WWW-Authenticate` challenge (RFC 6750 §3: `%x21 / %x23-5B /
//! %x5D-7E`), an empty list that must hold a match (`methods`,
//! `issuers`, `audiences`, a claim's values), an empty claim name, and
//! requirements on an `anyone` rule.

use std::collections::BTreeMap;
use std::ops::Range;

use http::Method;
use serde::Deserialize;
use toml::Spanned;

use crate::path::{normalize, plain};
use crate::requirements::{ClaimRequirement, Requirements};
use crate::rules::{AccessRules, DefaultAccess, Rule};

/// Why a rules file was refused: where, and what (module docs of
/// [`AccessRules::from_toml`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct RulesError {
    /// The line at fault, from 1.
    pub line: usize,
    /// The column at fault, from 1, in characters.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    default: Option<Spanned<String>>,
    #[serde(default, rename = "rule")]
    rules: Vec<Spanned<RuleEntry>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    path: Spanned<String>,
    methods: Option<Spanned<Vec<Spanned<String>>>>,
    allow: Option<Spanned<String>>,
    scopes: Option<Spanned<Vec<Spanned<String>>>>,
    claims: Option<Spanned<BTreeMap<Spanned<String>, Spanned<OneOrMore>>>>,
    issuers: Option<Spanned<Vec<String>>>,
    audiences: Option<Spanned<Vec<String>>>,
}

/// A claim's value or values.
#[derive(Deserialize)]
#[serde(untagged, expecting = "a string or an array of strings")]
enum OneOrMore {
    One(String),
    More(Vec<String>),
}

impl AccessRules {
    /// Reads a rules file (module docs of `file.rs`, shown in the crate
    /// docs).
    ///
    /// # Errors
    /// [`RulesError`], with the line and column of the first fault: TOML
    /// that does not parse, an unknown key, a wrong type, an empty `path`
    /// or one not starting with `/` or not in normal form (or holding
    /// `%`, `;` or a character a path must escape), an unknown `allow` or
    /// `default`, a method that is not an
    /// upper-case HTTP token, a scope that cannot stand in a challenge, an
    /// empty `methods`, `issuers`, `audiences` or claim value list, an
    /// empty claim name, or requirements on an `anyone` rule.
    pub fn from_toml(text: &str) -> Result<AccessRules, RulesError> {
        let at = |span: Range<usize>, message: String| {
            let (line, column) = line_column(text, span.start);
            RulesError {
                line,
                column,
                message,
            }
        };
        let file: File = toml::from_str(text)
            .map_err(|e| at(e.span().unwrap_or(0..0), e.message().to_owned()))?;
        let default = match &file.default {
            None => DefaultAccess::Deny,
            Some(value) => match value.get_ref().as_str() {
                "deny" => DefaultAccess::Deny,
                "token" => DefaultAccess::Token,
                other => {
                    return Err(at(
                        value.span(),
                        format!("default must be \"deny\" or \"token\", not {other:?}"),
                    ))
                }
            },
        };
        let rules = file
            .rules
            .into_iter()
            .map(|entry| rule(entry.into_inner(), &at))
            .collect::<Result<_, _>>()?;
        Ok(AccessRules::new(default, rules))
    }
}

/// One `[[rule]]`, checked (module docs).
fn rule(
    entry: RuleEntry,
    at: &impl Fn(Range<usize>, String) -> RulesError,
) -> Result<Rule, RulesError> {
    let path = entry.path.get_ref();
    if path.is_empty() {
        return Err(at(entry.path.span(), "path is empty".to_owned()));
    }
    if path.contains('%') {
        return Err(at(
            entry.path.span(),
            format!("path {path:?} holds %: write the character itself"),
        ));
    }
    if let Some(c) = path
        .chars()
        .find(|&c| c == ';' || !c.is_ascii() || !plain(c as u8))
    {
        return Err(at(
            entry.path.span(),
            format!(
                "path {path:?} holds {c:?}: a rule's path holds letters, digits, / and -._~!$&'()*+,=:@ (a request's ;params are left out before matching)"
            ),
        ));
    }
    match normalize(path) {
        Err(e) => return Err(at(entry.path.span(), format!("path {path:?}: {e}"))),
        Ok(normal) if normal.changed() => {
            return Err(at(
                entry.path.span(),
                format!("path {path:?} is not in normal form: {normal:?}"),
            ))
        }
        Ok(_) => {}
    }
    let methods = match entry.methods {
        None => None,
        Some(methods) => {
            if methods.get_ref().is_empty() {
                return Err(at(
                    methods.span(),
                    "methods is empty: it would match no request".to_owned(),
                ));
            }
            let mut parsed = Vec::with_capacity(methods.get_ref().len());
            for method in methods.into_inner() {
                let name = method.get_ref();
                match Method::from_bytes(name.as_bytes()) {
                    Ok(valid) if !name.bytes().any(|b| b.is_ascii_lowercase()) => {
                        parsed.push(valid);
                    }
                    _ => {
                        return Err(at(
                            method.span(),
                            format!("method {name:?} is not an upper-case HTTP method"),
                        ))
                    }
                }
            }
            Some(parsed)
        }
    };
    let anyone = match &entry.allow {
        None => false,
        Some(allow) => match allow.get_ref().as_str() {
            "anyone" => true,
            "token" => false,
            other => {
                return Err(at(
                    allow.span(),
                    format!("allow must be \"anyone\" or \"token\", not {other:?}"),
                ))
            }
        },
    };
    let requirements = requirements(
        entry.scopes,
        entry.claims,
        entry.issuers,
        entry.audiences,
        at,
    )?;
    let token = match (anyone, requirements) {
        (false, (requirements, _)) => Some(requirements),
        (true, (requirements, _)) if requirements.is_empty() => None,
        (true, (_, first)) => {
            return Err(at(
                first,
                "a rule that allows anyone looks at no token: it cannot ask for scopes, claims, issuers or audiences"
                    .to_owned(),
            ))
        }
    };
    Ok(Rule {
        path: entry.path.into_inner(),
        methods,
        token,
    })
}

/// A rule's requirements, checked, and where the first of them is written
/// (for the refusal of requirements on an `anyone` rule).
fn requirements(
    scopes: Option<Spanned<Vec<Spanned<String>>>>,
    claims: Option<Spanned<BTreeMap<Spanned<String>, Spanned<OneOrMore>>>>,
    issuers: Option<Spanned<Vec<String>>>,
    audiences: Option<Spanned<Vec<String>>>,
    at: &impl Fn(Range<usize>, String) -> RulesError,
) -> Result<(Requirements, Range<usize>), RulesError> {
    let spans = [
        scopes.as_ref().map(Spanned::span),
        claims.as_ref().map(Spanned::span),
        issuers.as_ref().map(Spanned::span),
        audiences.as_ref().map(Spanned::span),
    ];
    let first = spans
        .into_iter()
        .flatten()
        .min_by_key(|span| span.start)
        .unwrap_or(0..0);
    let mut requirements = Requirements::default();
    for scope in scopes.map(Spanned::into_inner).unwrap_or_default() {
        let name = scope.get_ref();
        let valid = !name.is_empty()
            && name
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
        if !valid {
            return Err(at(
                scope.span(),
                format!(
                    "scope {name:?} is empty or holds a character a scope cannot (RFC 6750 §3)"
                ),
            ));
        }
        requirements.scopes.push(scope.into_inner());
    }
    for (name, values) in claims.map(Spanned::into_inner).unwrap_or_default() {
        if name.get_ref().is_empty() {
            return Err(at(name.span(), "a claim's name is empty".to_owned()));
        }
        let span = values.span();
        let values = match values.into_inner() {
            OneOrMore::One(value) => vec![value],
            OneOrMore::More(values) => values,
        };
        if values.is_empty() {
            return Err(at(
                span,
                format!(
                    "claim {:?} lists no value: it would match no token",
                    name.get_ref()
                ),
            ));
        }
        requirements.claims.push(ClaimRequirement {
            name: name.into_inner(),
            values,
        });
    }
    for (list, into, key) in [
        (issuers, &mut requirements.issuers, "issuers"),
        (audiences, &mut requirements.audiences, "audiences"),
    ] {
        if let Some(list) = list {
            if list.get_ref().is_empty() {
                return Err(at(
                    list.span(),
                    format!("{key} is empty: it would match no token"),
                ));
            }
            *into = list.into_inner();
        }
    }
    Ok((requirements, first))
}

/// The 1-based line and column (in characters) of byte `offset`.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}
