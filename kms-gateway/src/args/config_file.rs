//! `serve --config FILE`: `serve`'s flags from a TOML file.
//!
//! * A key is a long flag's name without `--` (`listen`,
//!   `admin-token-file`); a flag that takes no value is a boolean (`true`
//!   sets it); a repeatable flag's key is an array (`claim-header =
//!   ["sub=X-Auth-Subject"]`); any other value is a string or a number.
//! * A flag given on the command line wins over the file's key; a list
//!   given there replaces the file's whole list.
//! * An unknown key (a table included), a value of the wrong TOML type, a
//!   value the flag refuses or a file that is not TOML is a usage error
//!   (exit 2) naming the file, the line and the column (1-based).
//!
//! The file's keys become command-line arguments (`--key=value`) placed
//! before the command line's own, and the whole is parsed by clap again:
//! one parser, one set of rules for both.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};
use toml::de::{DeTable, DeValue};

/// Where a flag's value came from in the file: line and column, 1-based.
pub(crate) type Origins = HashMap<String, (usize, usize)>;

/// The arguments `path`'s keys stand for, leaving out the flags the
/// command line gave (`given`), and where each came from.
///
/// # Errors
/// The file unreadable or not TOML, an unknown key, a value of the wrong
/// type: a message `FILE:LINE:COLUMN: ...`.
pub(crate) fn arguments(
    path: &Path,
    serve: &Command,
    given: &ArgMatches,
) -> Result<(Vec<OsString>, Origins), String> {
    let bytes = crate::files::read_trusted(path, "--config")?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("--config {}: not UTF-8", path.display()))?;
    let at = |offset: usize| {
        let (line, col) = line_col(&text, offset);
        format!("{}:{line}:{col}", path.display())
    };
    let table = DeTable::parse(&text).map_err(|e| {
        let offset = e.span().map_or(0, |span| span.start);
        format!("{}: {}", at(offset), e.message())
    })?;
    let mut args = Vec::new();
    let mut origins = Origins::new();
    for (key, value) in table.get_ref() {
        let name: &str = key.get_ref();
        let here = key.span().start;
        let arg = serve
            .get_arguments()
            .find(|a| a.get_long() == Some(name) && !matches!(name, "config" | "help"))
            .ok_or_else(|| format!("{}: unknown key {name:?}: not a flag of serve", at(here)))?;
        origins.insert(name.to_owned(), line_col(&text, here));
        if given.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        let wrong =
            |expected: &str| format!("{}: {name}: expected {expected}", at(value.span().start));
        match (arg.get_action(), value.get_ref()) {
            (ArgAction::SetTrue, DeValue::Boolean(set)) => {
                if *set {
                    args.push(OsString::from(format!("--{name}")));
                }
            }
            (ArgAction::SetTrue, _) => return Err(wrong("true or false")),
            (ArgAction::Append, DeValue::Array(items)) => {
                for item in items {
                    let text = scalar(item.get_ref()).ok_or_else(|| {
                        format!(
                            "{}: {name}: expected an array of strings or numbers",
                            at(item.span().start)
                        )
                    })?;
                    args.push(OsString::from(format!("--{name}={text}")));
                }
            }
            (ArgAction::Append, _) => return Err(wrong("an array")),
            (_, value) => {
                let text = scalar(value).ok_or_else(|| wrong("a string or a number"))?;
                args.push(OsString::from(format!("--{name}={text}")));
            }
        }
    }
    Ok((args, origins))
}

/// A string's text, or a number's (integers in any radix as decimal).
fn scalar(value: &DeValue<'_>) -> Option<String> {
    match value {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(|i| i.to_string()),
        DeValue::Float(f) => f.as_str().parse::<f64>().ok().map(|f| f.to_string()),
        _ => None,
    }
}

/// The 1-based line and column (in characters) of byte `offset`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_columns_count_from_one() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, text.find('=').unwrap()), (1, 3));
        assert_eq!(line_col(text, text.rfind('=').unwrap()), (2, 4));
    }

    #[test]
    fn numbers_in_any_radix_become_decimal() {
        let table = DeTable::parse("a = 0x10\nb = 1_000\nc = 2.5\nd = 'x'\ne = true").unwrap();
        let texts: Vec<Option<String>> = table
            .get_ref()
            .values()
            .map(|v| scalar(v.get_ref()))
            .collect();
        assert_eq!(
            texts,
            [
                Some("16".to_owned()),
                Some("1000".to_owned()),
                Some("2.5".to_owned()),
                Some("x".to_owned()),
                None
            ]
        );
    }
}
