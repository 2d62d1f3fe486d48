//! The rules file: what it accepts, and where each refusal points.

use http::Method;
use kms_access::{normalize, Access, AccessRules, DefaultAccess};

/// The refusal of `text`: (line, column, message).
fn refusal(text: &str) -> (usize, usize, String) {
    let e = AccessRules::from_toml(text).expect_err(text);
    (e.line, e.column, e.message)
}

#[test]
fn the_issues_example_reads() {
    let rules = AccessRules::from_toml(
        r#"
default = "deny"
[[rule]]
path = "/public/"
methods = ["GET", "HEAD"]
allow = "anyone"
[[rule]]
path = "/orders/"
methods = ["POST", "PUT", "DELETE"]
scopes = ["orders:write"]
claims = { groups = "ops", tenant = ["acme", "beta"], "realm_access.roles" = "admin" }
issuers = ["https://idp.example.com"]
audiences = ["orders"]
"#,
    )
    .expect("rules");
    assert_eq!(rules.len(), 2);
    assert_eq!(rules.default_access(), DefaultAccess::Deny);
    assert_eq!(rules.scopes_supported(), ["orders:write"]);
    let path = normalize("/orders/1").expect("path");
    let Access::Token(requirements) = rules.decide(&path, &Method::PUT).access else {
        panic!("a token rule");
    };
    assert_eq!(requirements.scopes(), ["orders:write"]);
}

#[test]
fn an_empty_file_denies_everything() {
    let rules = AccessRules::from_toml("").expect("rules");
    assert!(rules.is_empty());
    let path = normalize("/").expect("path");
    assert_eq!(rules.decide(&path, &Method::GET).access, Access::Deny);
    let rules = AccessRules::from_toml("default = \"token\"").expect("rules");
    assert!(matches!(
        rules.decide(&path, &Method::GET).access,
        Access::Token(r) if r.is_empty()
    ));
}

#[test]
fn each_fault_is_refused_where_it_is() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("default = \"allow\"", 1, 11, "default must be"),
        (
            "[[rule]]\npath = \"/a\"\nallow = \"everyone\"",
            3,
            9,
            "allow must be",
        ),
        (
            "[[rule]]\npath = \"/a\"\nscope = [\"x\"]",
            3,
            1,
            "unknown field `scope`",
        ),
        ("extra = 1", 1, 1, "unknown field `extra`"),
        ("[[rule]]\npath = 7", 2, 8, "invalid type"),
        (
            "[[rule]]\nmethods = [\"GET\"]",
            1,
            1,
            "missing field `path`",
        ),
        ("[[rule]]\npath = \"\"", 2, 8, "path is empty"),
        ("[[rule]]\npath = \"a/\"", 2, 8, "does not start with /"),
        ("[[rule]]\npath = \"/a//b\"", 2, 8, "not in normal form"),
        ("[[rule]]\npath = \"/a/../b\"", 2, 8, "not in normal form"),
        ("[[rule]]\npath = \"/a%41\"", 2, 8, "holds %"),
        ("[[rule]]\npath = \"/a%2F\"", 2, 8, "holds %"),
        ("[[rule]]\npath = \"/..;/a\"", 2, 8, "holds ';'"),
        ("[[rule]]\npath = \"/a;b/\"", 2, 8, "holds ';'"),
        ("[[rule]]\npath = \"/caf\u{e9}/\"", 2, 8, "holds '\u{e9}'"),
        ("[[rule]]\npath = \"/a b/\"", 2, 8, "holds ' '"),
        ("[[rule]]\npath = \"/a#b\"", 2, 8, "holds '#'"),
        (
            "[[rule]]\npath = \"/a\"\nmethods = []",
            3,
            11,
            "methods is empty",
        ),
        (
            "[[rule]]\npath = \"/a\"\nmethods = [\"GET\", \"get\"]",
            3,
            19,
            "upper-case",
        ),
        (
            "[[rule]]\npath = \"/a\"\nmethods = [\"GE T\"]",
            3,
            12,
            "upper-case",
        ),
        (
            "[[rule]]\npath = \"/a\"\nscopes = [\"a b\"]",
            3,
            11,
            "RFC 6750",
        ),
        (
            "[[rule]]\npath = \"/a\"\nscopes = [\"a\\\"b\"]",
            3,
            11,
            "RFC 6750",
        ),
        (
            "[[rule]]\npath = \"/a\"\nclaims = { tenant = [] }",
            3,
            21,
            "lists no value",
        ),
        (
            "[[rule]]\npath = \"/a\"\nclaims = { tenant = 1 }",
            3,
            21,
            "a string or an array of strings",
        ),
        (
            "[[rule]]\npath = \"/a\"\nclaims = { \"\" = \"x\" }",
            3,
            12,
            "name is empty",
        ),
        (
            "[[rule]]\npath = \"/a\"\nissuers = []",
            3,
            11,
            "issuers is empty",
        ),
        (
            "[[rule]]\npath = \"/a\"\naudiences = []",
            3,
            13,
            "audiences is empty",
        ),
        (
            "[[rule]]\npath = \"/a\"\nallow = \"anyone\"\naudiences = [\"x\"]",
            4,
            13,
            "allows anyone",
        ),
        ("[[rule]\npath = \"/a\"", 1, 8, ""),
    ];
    for (text, line, column, message) in cases {
        let (l, c, m) = refusal(text);
        assert_eq!((l, c), (*line, *column), "{text:?}: {m}");
        assert!(m.contains(message), "{text:?}: {m}");
    }
}

#[test]
fn a_fault_in_a_later_rule_names_its_line() {
    let text = "[[rule]]\npath = \"/a/\"\n\n[[rule]]\npath = \"/b/\"\nmethods = [\"POST\", \"PATCH\", \"fetch\"]\n";
    assert_eq!(refusal(text).0, 6);
}
