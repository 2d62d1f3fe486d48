//! Durations given to flags in seconds: [`Seconds`], and the parsers of
//! the timeout flags, [`timeout`], and of the delay flags, [`delay`].

use std::fmt;
use std::time::Duration;

/// The longest timeout a flag takes (a day): deadlines past it are no
/// limit at all, and far larger ones would overflow the clock.
const MAX_TIMEOUT: Duration = Duration::from_secs(86_400);

/// A duration given in seconds, fractions allowed. Its `Display` is what
/// `--help` shows as a default, and what clap parses back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs_f64())
    }
}

/// A delay flag's value: seconds, fractions allowed, from 0 to a day.
pub(super) fn delay(text: &str) -> Result<Seconds, String> {
    if text.parse::<f64>().is_ok_and(|secs| secs == 0.0) {
        return Ok(Seconds(Duration::ZERO));
    }
    timeout(text)
}

/// A timeout flag's value: seconds, fractions allowed, more than 0 and at
/// most a day.
pub(super) fn timeout(text: &str) -> Result<Seconds, String> {
    let secs: f64 = text.parse().map_err(|e| format!("{e}"))?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if d.is_zero() => Err("must be more than 0".to_owned()),
        Ok(d) if d > MAX_TIMEOUT => Err("must be at most 86400 (a day)".to_owned()),
        Ok(d) => Ok(Seconds(d)),
        Err(e) => Err(e.to_string()),
    }
}
