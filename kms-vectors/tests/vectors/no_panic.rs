//! The parsers behind `verify_file` (every suite, and the expected-verdicts
//! table) never panic, on arbitrary text and on mangled real vector files.
//! The same parsers are cargo-fuzz targets (`fuzz/`, `verify_file_input`).

use kms_vectors::{parse_suite, testdata_dir, ExpectedVerdicts, Suite};
use proptest::prelude::*;

fn parse_everything(text: &str) {
    for suite in Suite::ALL {
        let _ = parse_suite(suite, text);
    }
    let _ = ExpectedVerdicts::parse(text);
}

/// The first bytes of each real file, as seeds for mangling.
fn samples() -> Vec<String> {
    let mut out: Vec<String> = Suite::ALL
        .iter()
        .filter(|s| !s.testdata_file().ends_with(".gz"))
        .map(|s| s.testdata_file())
        .chain(["expected_verdicts.tsv"])
        .filter_map(|name| std::fs::read_to_string(testdata_dir().join(name)).ok())
        .map(|text| text.chars().take(3000).collect())
        .collect();
    out.sort();
    out
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        parse_everything(&text);
    }

    #[test]
    fn mangled_vector_files_never_panic(
        file in 0usize..8,
        cut in 0usize..3000,
        edits in proptest::collection::vec((0usize..3000, any::<char>()), 0..6),
    ) {
        let samples = samples();
        prop_assume!(!samples.is_empty());
        let mut chars: Vec<char> = samples[file % samples.len()].chars().collect();
        for (at, c) in edits {
            if !chars.is_empty() {
                let at = at % chars.len();
                chars[at] = c;
            }
        }
        chars.truncate(cut);
        parse_everything(&chars.into_iter().collect::<String>());
    }
}
