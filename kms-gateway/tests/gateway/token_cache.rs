//! The verified-token cache on `gateway serve` (`--token-cache`,
//! `--token-cache-bytes`), as a child process: on by default, a token
//! presented again is answered from it (counted in the metrics), and `0`
//! turns it off.
#![cfg(unix)]

use crate::support::serving;

use serving::{run_to_exit, Serving};

/// The value of the metric line that starts with `name{` in `metrics`.
fn metric(metrics: &str, name: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit_once(' '))
        .and_then(|(_, v)| v.parse().ok())
}

#[test]
fn a_token_presented_again_is_answered_from_the_cache_unless_it_is_off() {
    for (flags, hits, misses) in [
        (&[][..], Some(2.0), Some(1.0)),
        (&["--token-cache", "0"][..], None, None),
    ] {
        let s = Serving::start(flags);
        let bearer = format!("Bearer {}", s.mint(r#"{"sub":"alice"}"#));
        for _ in 0..3 {
            let (status, _, body) = s.get_with("/whoami", &bearer);
            assert_eq!(status, 200, "{flags:?}: {body}");
            assert!(body.contains("alice"), "{body}");
        }
        let (status, metrics) = s.admin("GET", "/metrics", "");
        assert_eq!(status, 200);
        assert_eq!(
            metric(&metrics, "kms_token_cache_hits_total"),
            hits,
            "{flags:?}"
        );
        assert_eq!(
            metric(&metrics, "kms_token_cache_misses_total"),
            misses,
            "{flags:?}"
        );
        assert_eq!(s.stop(), 0);
    }
}

#[test]
fn a_byte_bound_below_the_entry_bound_is_a_usage_error() {
    let mut command = serving::serve_command();
    command.args(["--token-cache", "100", "--token-cache-bytes", "99"]);
    let (code, _, stderr) = run_to_exit(command);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("--token-cache-bytes"), "{stderr}");
}
