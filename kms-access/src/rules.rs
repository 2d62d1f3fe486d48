//! [`AccessRules`]: an ordered list of rules and a default, and the
//! decision for one request.
//!
//! Invariants (each checked when the file is read, `file.rs`): every
//! rule's path is in normal form (`path.rs`) and holds no `%`; a rule
//! that lets anyone in asks nothing of a token; no list that must hold a
//! match is empty.
//!
//! The first rule in file order whose path and method match decides; a
//! request no rule matches gets the default. Paths are compared with
//! each segment's `;params` left out (`/admin;jsessionid=1/x` is
//! `/admin/x`, and a segment left empty goes), as servlet containers
//! read them before they serve; rule paths hold no `;`.

use std::collections::HashMap;

use http::Method;

use crate::path::NormalPath;
use crate::requirements::Requirements;

/// The access rules (module docs), read from their TOML file by
/// [`AccessRules::from_toml`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRules {
    pub(crate) default: DefaultAccess,
    pub(crate) rules: Vec<Rule>,
    /// The rules that can match a path, by the path's first segment: each
    /// list in file order, the rules on `/` (which match every path) in
    /// every list. A path whose first segment is in none is matched by
    /// `everywhere` alone.
    by_segment: HashMap<Box<str>, Vec<usize>>,
    /// The rules on `/`, in file order.
    everywhere: Vec<usize>,
}

/// What a request no rule matches gets (the file's `default`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DefaultAccess {
    /// `"deny"` (also when the file gives none): 403, token or not.
    #[default]
    Deny,
    /// `"token"`: any verified token.
    Token,
}

/// One `[[rule]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    /// Ends in `/`: every path under it (`/` alone: every path); else that
    /// exact path.
    pub(crate) path: String,
    /// The methods it applies to, compared exactly; `None`: any.
    pub(crate) methods: Option<Vec<Method>>,
    /// `None`: anyone (no token is looked at); else a verified token
    /// meeting these.
    pub(crate) token: Option<Requirements>,
}

impl Rule {
    fn matches(&self, path: &str, method: &Method) -> bool {
        let path_matches = if self.path.ends_with('/') {
            path.starts_with(&self.path)
        } else {
            path == self.path
        };
        path_matches
            && self
                .methods
                .as_ref()
                .is_none_or(|methods| methods.contains(method))
    }
}

/// What a request gets, and who decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision<'a> {
    /// The deciding rule's index in the file, from 0; `None`: the
    /// default.
    pub rule: Option<usize>,
    /// What the request needs.
    pub access: Access<'a>,
}

/// What a request needs to pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access<'a> {
    /// Nothing: no token is looked at.
    Anyone,
    /// A verified token meeting these (empty for the default `"token"`).
    Token(&'a Requirements),
    /// Nothing passes: 403, token or not.
    Deny,
}

/// The requirements of the default `"token"`: none.
static NO_REQUIREMENTS: Requirements = Requirements {
    scopes: Vec::new(),
    claims: Vec::new(),
    issuers: Vec::new(),
    audiences: Vec::new(),
};

impl AccessRules {
    /// The rules, indexed by their paths' first segments.
    pub(crate) fn new(default: DefaultAccess, rules: Vec<Rule>) -> Self {
        let everywhere: Vec<usize> = (0..rules.len()).filter(|&i| rules[i].path == "/").collect();
        let mut by_segment: HashMap<Box<str>, Vec<usize>> = HashMap::new();
        for (i, rule) in rules
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.path != "/")
        {
            by_segment
                .entry(Box::from(first_segment(&rule.path)))
                .or_default()
                .push(i);
        }
        for list in by_segment.values_mut() {
            list.extend_from_slice(&everywhere);
            list.sort_unstable();
        }
        AccessRules {
            default,
            rules,
            by_segment,
            everywhere,
        }
    }

    /// The decision for a request for `path` (normalized: the path that
    /// is served) with `method` (module docs). Linear in the rules that
    /// share the path's first segment (and those on `/`); no allocation
    /// but for a path with `;params`.
    pub fn decide(&self, path: &NormalPath<'_>, method: &Method) -> Decision<'_> {
        let without_params;
        let path = match path.as_str() {
            path if path.contains(';') => {
                without_params = strip_params(path);
                without_params.as_str()
            }
            path => path,
        };
        let candidates = self
            .by_segment
            .get(first_segment(path))
            .unwrap_or(&self.everywhere);
        match candidates
            .iter()
            .copied()
            .find(|&i| self.rules[i].matches(path, method))
        {
            Some(index) => Decision {
                rule: Some(index),
                access: match &self.rules[index].token {
                    None => Access::Anyone,
                    Some(requirements) => Access::Token(requirements),
                },
            },
            None => Decision {
                rule: None,
                access: match self.default {
                    DefaultAccess::Deny => Access::Deny,
                    DefaultAccess::Token => Access::Token(&NO_REQUIREMENTS),
                },
            },
        }
    }

    /// Every scope a rule asks for, each once, in the file's order (RFC
    /// 9728 §2's `scopes_supported`).
    pub fn scopes_supported(&self) -> Vec<&str> {
        let mut scopes: Vec<&str> = Vec::new();
        for scope in self
            .rules
            .iter()
            .filter_map(|rule| rule.token.as_ref())
            .flat_map(|requirements| requirements.scopes())
        {
            if !scopes.contains(&scope.as_str()) {
                scopes.push(scope);
            }
        }
        scopes
    }

    /// The number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there are no rules (every request gets the default).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The default.
    pub fn default_access(&self) -> DefaultAccess {
        self.default
    }
}

/// The first segment of `path` (`/a/b`: `a`; `/`: empty).
fn first_segment(path: &str) -> &str {
    let rest = path.strip_prefix('/').unwrap_or(path);
    rest.split('/').next().unwrap_or(rest)
}

/// `path` with each segment's `;params` left out, and the segments left
/// empty dropped (but a trailing `/`).
fn strip_params(path: &str) -> String {
    let mut stripped = String::with_capacity(path.len());
    let mut segments = path.split('/').skip(1).peekable();
    while let Some(segment) = segments.next() {
        let name = segment.split(';').next().unwrap_or(segment);
        let last = segments.peek().is_none();
        if !name.is_empty() {
            stripped.push('/');
            stripped.push_str(name);
        } else if last {
            stripped.push('/');
        }
    }
    if stripped.is_empty() {
        stripped.push('/');
    }
    stripped
}

#[cfg(test)]
mod tests {
    use super::strip_params;

    #[test]
    fn parameters_are_left_out_of_each_segment() {
        for (path, stripped) in [
            ("/admin;x/secret", "/admin/secret"),
            ("/;x/admin", "/admin"),
            ("/admin;jsessionid=1", "/admin"),
            ("/admin/;x", "/admin/"),
            ("/a;b;c/d;e/", "/a/d/"),
            ("/;x", "/"),
        ] {
            assert_eq!(strip_params(path), stripped, "{path}");
        }
    }
}
