//! The test vectors the main job verifies, embedded in the binary, so that
//! an installed `kms-gateway` runs the main job from any directory.
//!
//! Invariant: [`SUITES`] holds, for every suite of `kms_vectors::Suite::ALL`
//! in that order, the bytes of its file in the repository's `testdata/`
//! (`Suite::testdata_file`), and [`EXPECTED`] those of
//! `testdata/expected_verdicts.tsv`; the tests below compare them with the
//! files. Provenance of each file: `testdata/PROVENANCE.md`.

use kms_vectors::{parse_suite, Case, ExpectedVerdicts, Suite};

/// `testdata/expected_verdicts.tsv`: the verdict every case must get.
const EXPECTED: &str = include_str!("../../../testdata/expected_verdicts.tsv");

/// Every suite's file, in `Suite::ALL` order (3.2 MB in all).
const SUITES: [(Suite, &str); 6] = [
    (
        Suite::Wycheproof,
        include_str!("../../../testdata/wycheproof_ed25519_test.json"),
    ),
    (
        Suite::SignInput,
        include_str!("../../../testdata/ed25519_sign.input_1024.txt"),
    ),
    (
        Suite::Speccheck,
        include_str!("../../../testdata/speccheck_cases.json"),
    ),
    (
        Suite::Cctv,
        include_str!("../../../testdata/cctv_ed25519vectors.json"),
    ),
    (
        Suite::Rfc8032,
        include_str!("../../../testdata/rfc8032_7.1_ed25519_vectors.json"),
    ),
    (
        Suite::Zip215,
        include_str!("../../../testdata/zip215_small_order_vectors.json"),
    ),
];

/// Every embedded case, in `Suite::ALL` order (what
/// `kms_vectors::load_all_testdata` reads from the repository), and the
/// verdicts they must get.
///
/// # Errors
/// A suite's or the verdicts' parse error, as text (only if the embedded
/// files are broken: the tests below parse them).
pub(crate) fn embedded() -> Result<(Vec<Case>, ExpectedVerdicts), String> {
    let expected = ExpectedVerdicts::parse(EXPECTED).map_err(|e| e.to_string())?;
    let mut cases = Vec::new();
    for (suite, text) in SUITES {
        cases.extend(parse_suite(suite, text).map_err(|e| e.to_string())?);
    }
    Ok((cases, expected))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kms_vectors::{load_all_testdata, testdata_dir};

    #[test]
    fn the_embedded_files_are_the_repositorys() {
        let suites: Vec<Suite> = SUITES.iter().map(|(suite, _)| *suite).collect();
        assert_eq!(suites, Suite::ALL);
        for (suite, text) in SUITES {
            let path = testdata_dir().join(suite.testdata_file());
            let file = std::fs::read_to_string(&path).expect("read testdata");
            assert!(
                file == text,
                "{} differs from its embedded copy",
                path.display()
            );
        }
        let verdicts = std::fs::read_to_string(testdata_dir().join("expected_verdicts.tsv"))
            .expect("read verdicts");
        assert!(verdicts == EXPECTED);
    }

    #[test]
    fn embedded_gives_every_case_with_a_verdict() {
        let (cases, expected) = embedded().expect("the embedded files parse");
        assert_eq!(cases, load_all_testdata().expect("testdata loads"));
        assert!(cases.iter().all(|case| expected.for_case(case).is_some()));
        assert!(cases.len() > 1000, "{} cases", cases.len());
    }
}
