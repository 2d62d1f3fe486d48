//! `expected_verdicts.tsv`: the verdict each case must get.

use std::collections::HashMap;
use std::path::Path;

use crate::{load, testdata_dir, Case, Suite, VectorError};

/// The file name of the expected verdicts in [`testdata_dir`].
const DEFAULT_FILE: &str = "expected_verdicts.tsv";

/// The expected verdict (`true` = valid) of each `(suite, id)`, from a TSV
/// file with header `suite\tid\tverdict` and verdicts `valid` / `invalid`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExpectedVerdicts(HashMap<(Suite, String), bool>);

impl ExpectedVerdicts {
    /// Reads and parses the TSV file at `path`.
    pub fn load(path: &Path) -> Result<Self, VectorError> {
        let text = load::read_text(path)?;
        Self::parse_in(&text, &path.display().to_string())
    }

    /// Reads `expected_verdicts.tsv` from [`testdata_dir`].
    pub fn load_default() -> Result<Self, VectorError> {
        Self::load(&testdata_dir().join(DEFAULT_FILE))
    }

    /// Parses TSV text (header `suite\tid\tverdict`; blank lines are skipped;
    /// a repeated `(suite, id)` is an error).
    pub fn parse(text: &str) -> Result<Self, VectorError> {
        Self::parse_in(text, "expected verdicts")
    }

    fn parse_in(text: &str, origin: &str) -> Result<Self, VectorError> {
        let error = |line: usize, reason: String| VectorError::Line {
            origin: origin.to_owned(),
            line,
            reason,
        };
        let mut lines = text
            .lines()
            .enumerate()
            .map(|(index, raw)| (index + 1, raw))
            .filter(|(_, raw)| !raw.trim().is_empty());
        match lines.next() {
            Some((_, header)) if header.trim() == "suite\tid\tverdict" => {}
            Some((line, _)) => {
                return Err(error(
                    line,
                    "expected the header `suite<TAB>id<TAB>verdict`".to_owned(),
                ))
            }
            None => {
                return Err(VectorError::Format {
                    origin: origin.to_owned(),
                    reason: "empty file (expected the header `suite<TAB>id<TAB>verdict`)"
                        .to_owned(),
                })
            }
        }
        let mut map = HashMap::new();
        for (line, raw) in lines {
            let fields: Vec<&str> = raw.split('\t').collect();
            let [suite, id, verdict] = fields.as_slice() else {
                return Err(error(
                    line,
                    format!("expected 3 tab-separated fields, found {}", fields.len()),
                ));
            };
            let suite: Suite = suite.parse().map_err(|e| error(line, format!("{e}")))?;
            if id.is_empty() {
                return Err(error(line, "empty id".to_owned()));
            }
            let valid = match verdict.trim() {
                "valid" => true,
                "invalid" => false,
                other => {
                    return Err(error(
                        line,
                        format!("verdict is `{other}`, expected valid or invalid"),
                    ))
                }
            };
            if map.insert((suite, (*id).to_owned()), valid).is_some() {
                return Err(error(line, format!("duplicate entry for {suite} {id}")));
            }
        }
        Ok(Self(map))
    }

    /// The expected verdict of case `id` of `suite` (`true` = valid).
    pub fn get(&self, suite: Suite, id: &str) -> Option<bool> {
        self.0.get(&(suite, id.to_owned())).copied()
    }

    /// The expected verdict of `case` (`true` = valid).
    pub fn for_case(&self, case: &Case) -> Option<bool> {
        self.get(case.suite, &case.id)
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
