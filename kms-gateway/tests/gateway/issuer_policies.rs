//! `--issuer-audience ISSUER=AUD` and `--issuer-typ ISSUER=TYP`: an
//! issuer's tokens checked against its own audiences instead of the
//! global `--audience`, and refused without its `typ` (an ID token where
//! an access token is required), through `/whoami`; an issuer configured
//! neither way refused at start; the policies kept across SIGHUP.
#![cfg(unix)]

use crate::support::partner;
use crate::support::serving;

use partner::{write_set, Partner};
use serde_json::json;
use serving::{run_to_exit, serve_command, Serving};

const IDP: &str = "https://idp.example.com";
const OTHER: &str = "https://other.example.com";

#[test]
fn each_issuer_is_checked_by_its_own_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (idp, other) = (Partner::new("idp-1", 11), Partner::new("other-1", 12));
    let (idp_set, other_set) = (dir.path().join("idp.json"), dir.path().join("other.json"));
    write_set(&idp_set, &[&idp]);
    write_set(&other_set, &[&other]);
    let bound = |issuer: &str, path: &std::path::Path| format!("{issuer}={}", path.display());
    let (idp_flag, other_flag) = (bound(IDP, &idp_set), bound(OTHER, &other_set));
    let s = Serving::start(&[
        "--trust-jwks-issuer",
        &idp_flag,
        "--trust-jwks-issuer",
        &other_flag,
        "--audience",
        "gateway",
        "--issuer-audience",
        &format!("{IDP}=orders"),
        "--issuer-audience",
        &format!("{IDP}=billing"),
        "--issuer-typ",
        &format!("{IDP}=at+jwt"),
    ]);
    let whoami = |token: &str| s.whoami(token).0;
    let access = |typ: Option<&str>, aud: &str| {
        let header = typ.map_or(json!({}), |typ| json!({ "typ": typ }));
        idp.token_with(header, json!({"iss": IDP, "aud": aud}))
    };
    // The issuer's own audiences, and its access tokens' `typ` as a
    // media type.
    assert_eq!(whoami(&access(Some("at+jwt"), "orders")), 200);
    assert_eq!(whoami(&access(Some("application/AT+JWT"), "billing")), 200);
    // An ID token (typ JWT, or none), or the global audience: refused.
    assert_eq!(whoami(&access(Some("JWT"), "orders")), 401);
    assert_eq!(whoami(&access(None, "orders")), 401);
    assert_eq!(whoami(&access(Some("at+jwt"), "gateway")), 401);
    // The other issuer keeps the global checks.
    let other_token = |aud: &str| other.token_with(json!({}), json!({"iss": OTHER, "aud": aud}));
    assert_eq!(whoami(&other_token("gateway")), 200);
    assert_eq!(whoami(&other_token("orders")), 401);

    // A reload of the sets keeps each issuer's policy.
    s.hangup("reloaded the trusted JWK Sets");
    assert_eq!(whoami(&access(Some("JWT"), "orders")), 401);
    assert_eq!(whoami(&access(Some("at+jwt"), "orders")), 200);
    assert_eq!(s.stop(), 0);
}

#[test]
fn a_policy_for_an_issuer_not_configured_is_refused_at_start() {
    for flag in ["--issuer-audience", "--issuer-typ"] {
        let mut command = serve_command();
        command.args([flag, &format!("{IDP}=x")]);
        let (code, _, stderr) = run_to_exit(command);
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert!(
            stderr.contains("neither an --issuer nor a --trust-jwks-issuer"),
            "{stderr}"
        );
    }
}
