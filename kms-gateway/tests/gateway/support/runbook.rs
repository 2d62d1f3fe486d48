//! The configurations docs/RUNBOOK.md shows, as the tests read them: the
//! fenced block after a `<!-- tested: NAME -->` marker.

use std::path::Path;

/// The fenced block after `<!-- tested: NAME -->` in docs/RUNBOOK.md.
pub fn runbook_block(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/RUNBOOK.md");
    let text = std::fs::read_to_string(&path).expect("RUNBOOK.md");
    let marker = format!("<!-- tested: {name} -->");
    let after = text
        .split_once(&marker)
        .unwrap_or_else(|| panic!("no {marker} in RUNBOOK.md"))
        .1;
    let body = after
        .split_once("```")
        .and_then(|(_, rest)| rest.split_once('\n'))
        .expect("a fenced block after the marker")
        .1;
    body.split_once("\n```")
        .expect("the block's end")
        .0
        .to_owned()
}
