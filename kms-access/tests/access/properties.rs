//! Properties of normalization and matching, over generated paths built
//! from the pieces that matter (dot-segments, `;`, escapes, slashes).

use http::Method;
use kms_access::{normalize, AccessRules};
use proptest::prelude::*;

/// A path of up to 8 segments drawn from the interesting pieces.
fn path() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("".to_owned()),
        Just(".".to_owned()),
        Just("..".to_owned()),
        Just("%2e".to_owned()),
        Just("%2E%2e".to_owned()),
        Just("..;x".to_owned()),
        Just("a;b".to_owned()),
        Just("%61dmin".to_owned()),
        Just("admin".to_owned()),
        Just("%2f".to_owned()),
        Just("%3f".to_owned()),
        Just("%".to_owned()),
        Just("\\".to_owned()),
        Just("caf\u{e9}".to_owned()),
        Just("a b".to_owned()),
        Just("%c3%a9".to_owned()),
        Just("x;y=1".to_owned()),
        "[a-c~_.-]{1,3}",
    ];
    proptest::collection::vec(segment, 0..8).prop_map(|segments| format!("/{}", segments.join("/")))
}

/// The depth a path reaches at each step, from its segments as the
/// server that resolves them sees them: never below zero for a
/// normalized path.
fn lowest_depth(path: &str) -> i64 {
    let mut depth = 0i64;
    let mut lowest = 0;
    for segment in path.split('/').skip(1) {
        match segment {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        lowest = lowest.min(depth);
    }
    lowest
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn a_normalized_path_stays_in_bounds_and_is_stable(raw in path()) {
        if let Ok(normal) = normalize(&raw) {
            let normal = normal.as_str();
            prop_assert!(normal.starts_with('/'));
            prop_assert!(!normal.contains("//"), "{normal}");
            prop_assert_eq!(lowest_depth(normal), 0);
            prop_assert!(normal.split('/').all(|s| s != "." && s != ".."), "{}", normal);
            // Normal form is a fixed point.
            let again = normalize(normal).expect("a normal path normalizes");
            prop_assert!(!again.changed());
            prop_assert_eq!(again.as_str(), normal);
        }
    }

    #[test]
    fn the_decision_is_the_first_matching_rule(
        raw in path(),
        prefixes in proptest::collection::vec("/(a|b|admin)(/|/a/|/b/)?", 1..6),
        get in any::<bool>(),
    ) {
        let text: String = prefixes
            .iter()
            .map(|p| format!("[[rule]]\npath = \"{p}\"\n"))
            .collect();
        let rules = AccessRules::from_toml(&text).expect("rules");
        let method = if get { Method::GET } else { Method::POST };
        if let Ok(normal) = normalize(&raw) {
            // Each segment without its `;params`, the segments left empty
            // gone (but a trailing one).
            let segments: Vec<&str> = normal.as_str()[1..]
                .split('/')
                .map(|s| s.split(';').next().unwrap_or(s))
                .collect();
            let last = segments.len() - 1;
            let mut matched = String::new();
            for (i, segment) in segments.iter().enumerate() {
                if !segment.is_empty() {
                    matched += "/";
                    matched += segment;
                } else if i == last {
                    matched += "/";
                }
            }
            if matched.is_empty() {
                matched.push('/');
            }
            let expected = prefixes.iter().position(|p| {
                if p.ends_with('/') { matched.starts_with(p.as_str()) } else { matched == *p }
            });
            prop_assert_eq!(rules.decide(&normal, &method).rule, expected);
            // Appending rules after the deciding one never changes it.
            let more = format!("{text}[[rule]]\npath = \"/\"\n");
            let extended = AccessRules::from_toml(&more).expect("rules");
            let decided = extended.decide(&normal, &method).rule;
            prop_assert_eq!(decided, Some(expected.unwrap_or(prefixes.len())));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// Bad input is a typed error, never a panic: any text as a path
    /// (multi-byte characters beside escapes included), any text as a
    /// rules file.
    #[test]
    fn no_input_panics(path in "[/%a-f0-9.;é\\\\#\\x00 ]{0,24}", file in "\\PC{0,80}") {
        if let Ok(normal) = normalize(&path) {
            prop_assert!(normal.as_str().is_ascii());
        }
        let _ = AccessRules::from_toml(&file);
    }
}
