//! The `sign.input` text format of the Ed25519 reference distribution.
//!
//! Each line is `sk‖pk:pk:msg:sig‖msg:` in hex: four colon-terminated fields.
//! The case id is the 1-based line number; blank lines are skipped but counted.

use crate::{Case, Suite, VectorError};

/// Parses `sign.input` text: one case per non-blank line, id = 1-based line number.
///
/// Each line must have four colon-terminated hex fields `sk‖pk:pk:msg:sig‖msg:`
/// (so five colon-separated parts, the last empty); field 1 must be 64 bytes,
/// field 2 must equal its second half, and field 4 must end with field 3.
/// The signature is field 4 without the trailing message, kept as given even
/// if it is not 64 bytes. Every case has `file_expectation == Some(true)`.
pub fn parse_sign_input(text: &str) -> Result<Vec<Case>, VectorError> {
    parse_in(text, Suite::SignInput.as_str())
}

/// [`parse_sign_input`] with errors reported against `origin`.
pub(crate) fn parse_in(text: &str, origin: &str) -> Result<Vec<Case>, VectorError> {
    let mut cases = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let case = parse_line(raw, line).map_err(|reason| VectorError::Line {
            origin: origin.to_owned(),
            line,
            reason,
        })?;
        cases.push(case);
    }
    Ok(cases)
}

fn hex_field(text: &str, number: usize, name: &str) -> Result<Vec<u8>, String> {
    hex::decode(text).map_err(|e| format!("field {number} ({name}) is not hex: {e}"))
}

fn parse_line(raw: &str, line: usize) -> Result<Case, String> {
    let fields: Vec<&str> = raw.split(':').map(str::trim).collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected 4 colon-terminated fields `sk‖pk:pk:msg:sig‖msg:`, found {} colon(s)",
            fields.len() - 1
        ));
    }
    if !fields[4].is_empty() {
        return Err("unexpected text after the trailing colon of field 4".to_owned());
    }
    let keypair = hex_field(fields[0], 1, "sk‖pk")?;
    if keypair.len() != 64 {
        return Err(format!(
            "field 1 (sk‖pk) is {} bytes, expected 64",
            keypair.len()
        ));
    }
    let public_key = hex_field(fields[1], 2, "pk")?;
    if public_key != keypair[32..] {
        return Err("field 2 (pk) differs from the public-key half of field 1 (sk‖pk)".to_owned());
    }
    let message = hex_field(fields[2], 3, "msg")?;
    let sig_msg = hex_field(fields[3], 4, "sig‖msg")?;
    let signature = sig_msg
        .strip_suffix(message.as_slice())
        .ok_or_else(|| "field 4 (sig‖msg) does not end with field 3 (msg)".to_owned())?;
    Ok(Case {
        suite: Suite::SignInput,
        id: line.to_string(),
        public_key,
        signature: signature.to_vec(),
        message,
        file_expectation: Some(true),
    })
}
