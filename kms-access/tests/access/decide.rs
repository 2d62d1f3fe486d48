//! The decision: the first rule in file order whose path and method
//! match, else the default.

use http::Method;
use kms_access::{normalize, Access, AccessRules};

fn rules() -> AccessRules {
    AccessRules::from_toml(
        r#"
default = "token"
[[rule]]
path = "/public/"
methods = ["GET", "HEAD"]
allow = "anyone"
[[rule]]
path = "/"
methods = ["OPTIONS"]
allow = "anyone"
[[rule]]
path = "/admin/"
scopes = ["admin"]
[[rule]]
path = "/admin/"
allow = "anyone"
[[rule]]
path = "/status"
allow = "anyone"
"#,
    )
    .expect("rules")
}

/// The deciding rule's index (`None`: the default) and whether it lets
/// anyone in, for a request.
fn decide(rules: &AccessRules, path: &str, method: Method) -> (Option<usize>, &'static str) {
    let path = normalize(path).expect("path");
    let decision = rules.decide(&path, &method);
    let access = match decision.access {
        Access::Anyone => "anyone",
        Access::Token(r) if r.is_empty() => "token",
        Access::Token(_) => "requirements",
        Access::Deny => "deny",
    };
    (decision.rule, access)
}

#[test]
fn prefixes_exact_paths_methods_and_order() {
    let rules = rules();
    for (path, method, expected) in [
        ("/public/a", Method::GET, (Some(0), "anyone")),
        ("/public/", Method::HEAD, (Some(0), "anyone")),
        // A prefix rule covers what is under it, not the name itself.
        ("/public", Method::GET, (None, "token")),
        // GET does not imply HEAD, nor the reverse; POST is not listed.
        ("/public/a", Method::POST, (None, "token")),
        // The preflight rule, on every path.
        ("/orders/1", Method::OPTIONS, (Some(1), "anyone")),
        ("/public/a", Method::OPTIONS, (Some(1), "anyone")),
        // The first match wins over a later, looser one.
        ("/admin/users", Method::DELETE, (Some(2), "requirements")),
        // An exact path: that path only.
        ("/status", Method::GET, (Some(4), "anyone")),
        ("/status/", Method::GET, (None, "token")),
        ("/statusx", Method::GET, (None, "token")),
        // Case matters.
        ("/ADMIN/users", Method::GET, (None, "token")),
        // Matched after normalization.
        ("/public/../admin/x", Method::GET, (Some(2), "requirements")),
        ("/%61dmin/x", Method::GET, (Some(2), "requirements")),
        ("//admin/x", Method::GET, (Some(2), "requirements")),
    ] {
        assert_eq!(
            decide(&rules, path, method.clone()),
            expected,
            "{method} {path}"
        );
    }
}

#[test]
fn an_extension_method_is_compared_exactly() {
    let rules = AccessRules::from_toml(
        "[[rule]]\npath = \"/dav/\"\nmethods = [\"PROPFIND\"]\nallow = \"anyone\"",
    )
    .expect("rules");
    let propfind = Method::from_bytes(b"PROPFIND").expect("method");
    assert_eq!(decide(&rules, "/dav/x", propfind), (Some(0), "anyone"));
    let lower = Method::from_bytes(b"propfind").expect("method");
    assert_eq!(decide(&rules, "/dav/x", lower), (None, "deny"));
}
