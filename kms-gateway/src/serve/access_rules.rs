//! `--access-rules FILE`: the access rules (`kms::access`) of the proxy
//! mode and of forward auth, read at start (a file that cannot be read or
//! is refused is a usage error, exit 2, naming the file, line and column)
//! and again on SIGHUP, all or nothing: a file that fails then leaves the
//! old rules in force, and the log says why.

use crate::logging::{info_line, warn_line};
use std::path::{Path, PathBuf};

use kms::access::AccessRules;
use kms::http::AccessLayer;

/// The rules file and the rules it held when read.
#[derive(Debug, Clone)]
pub(crate) struct RulesFile {
    /// `--access-rules`.
    pub(crate) path: PathBuf,
    /// The rules, as read at start.
    pub(crate) rules: AccessRules,
}

/// Reads the rules in `path`.
///
/// # Errors
/// `FILE: …` when the file cannot be read or is writable by other users
/// (`files::read_trusted`), `FILE:LINE:COLUMN: …` when its rules are
/// refused.
pub(crate) fn read(path: &Path) -> Result<AccessRules, String> {
    let bytes = crate::files::read_trusted(path, "")?;
    let text = String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8", path.display()))?;
    AccessRules::from_toml(&text)
        .map_err(|e| format!("{}:{}:{}: {}", path.display(), e.line, e.column, e.message))
}

/// `--access-rules` as the command line gives it (clap's value parser):
/// the file, read.
///
/// # Errors
/// What [`read`] refuses.
pub(crate) fn parse(text: &str) -> Result<RulesFile, String> {
    let path = PathBuf::from(text);
    let rules = read(&path)?;
    Ok(RulesFile { path, rules })
}

/// SIGHUP: reads `path` again and puts its rules in force in `layer` (and
/// every layer sharing its rules), or keeps the old ones and says why.
pub(crate) fn reload(path: &Path, layer: &AccessLayer) {
    match read(path) {
        Ok(rules) => {
            let count = rules.len();
            layer.replace_rules(rules);
            info_line!(
                "gateway serve: reloaded the access rules: {count} rules from {}",
                path.display()
            );
        }
        Err(e) => warn_line!(
            "gateway serve: reload refused, the old access rules stay: --access-rules {e}"
        ),
    }
}
