//! The parsers behind `examples/verify_file.rs` (every test-vector suite,
//! and the expected-verdicts table): never panic on any text.
#![no_main]

use kms_vectors::{parse_suite, ExpectedVerdicts, Suite};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    for suite in Suite::ALL {
        let _ = parse_suite(suite, text);
    }
    let _ = ExpectedVerdicts::parse(text);
});
