//! `gateway serve --trust-jwks` reloads its files on SIGHUP, all or
//! nothing: a good reload replaces the trusted keys (a dropped partner key
//! is refused from then on, a new one accepted); a reload with a file that
//! fails keeps every old set and says why. Deadlines only catch hangs.
#![cfg(unix)]

use crate::support::partner;
use crate::support::serving;

use partner::{write_set, Partner};
use serving::Serving;

#[test]
fn sighup_reloads_the_trusted_sets_all_or_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (
        dir.path().join("first.json"),
        dir.path().join("second.json"),
    );
    let (p1, p2, p3) = (
        Partner::new("partner-1", 1),
        Partner::new("partner-2", 2),
        Partner::new("partner-3", 3),
    );
    write_set(&first, &[&p1]);
    write_set(&second, &[&p2]);
    let s = Serving::start(&[
        "--trust-jwks",
        first.to_str().expect("utf-8"),
        "--trust-jwks",
        second.to_str().expect("utf-8"),
    ]);
    assert_eq!(s.whoami(&p1.token()).0, 200);
    assert_eq!(s.whoami(&p2.token()).0, 200);
    assert_eq!(s.whoami(&p3.token()).0, 401);

    // Drop partner 1, add partner 3.
    write_set(&first, &[&p3]);
    let line = s.hangup("reload");
    assert!(
        line.contains("reloaded") && line.contains("2 keys"),
        "{line}"
    );
    assert_eq!(s.whoami(&p1.token()).0, 401, "a dropped key is refused");
    assert_eq!(s.whoami(&p3.token()).0, 200);
    assert_eq!(s.whoami(&p2.token()).0, 200);

    // One bad file: nothing changes, and the log says why.
    std::fs::write(&second, "{not json").expect("write");
    let line = s.hangup("reload");
    assert!(
        line.contains("refused") && line.contains("second.json"),
        "{line}"
    );
    assert_eq!(s.whoami(&p2.token()).0, 200, "the old sets stay");
    assert_eq!(s.whoami(&p3.token()).0, 200);
    // A kid twice across the files: refused whole too.
    write_set(&second, &[&p3]);
    let line = s.hangup("reload");
    assert!(line.contains("refused"), "{line}");
    assert_eq!(s.whoami(&p2.token()).0, 200);
    assert_eq!(s.stop(), 0);
}
