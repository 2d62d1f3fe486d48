//! Log timestamps: RFC 3339 in UTC with microseconds
//! (`2026-11-28T10:00:00.123456Z`), for the access log and the JSON log
//! lines. The calendar (the `time` crate) is computed once a second per
//! thread.

use std::io::Write;
use std::time::{Duration, SystemTime};

/// `time` as RFC 3339 in UTC with microseconds
/// (`2026-11-28T10:00:00.123456Z`).
pub(crate) fn rfc3339_micros(time: SystemTime) -> String {
    let mut out = Vec::with_capacity(27);
    write_rfc3339_micros(&mut out, time);
    String::from_utf8(out).unwrap_or_default()
}

thread_local! {
    /// The last whole second formatted on this thread, and its text up to
    /// the seconds (`2026-11-28T10:00:00`): the calendar is computed once
    /// a second, not once a line.
    static SECOND: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
}

/// [`rfc3339_micros`], appended to `out`.
pub(crate) fn write_rfc3339_micros(out: &mut Vec<u8>, time: SystemTime) {
    let since = time
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let (secs, micros) = (since.as_secs(), since.subsec_micros());
    let (cached, mut text) = SECOND.get();
    if cached != secs {
        let at = time::OffsetDateTime::from(SystemTime::UNIX_EPOCH + Duration::from_secs(secs));
        let mut formatted = Vec::with_capacity(19);
        let _ = write!(
            formatted,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            at.year(),
            u8::from(at.month()),
            at.day(),
            at.hour(),
            at.minute(),
            at.second()
        );
        if formatted.len() == 19 {
            text.copy_from_slice(&formatted);
            SECOND.set((secs, text));
        } else {
            // A year past 9999: written as it is, not cached.
            out.extend_from_slice(&formatted);
            let _ = write!(out, ".{micros:06}Z");
            return;
        }
    }
    out.extend_from_slice(&text);
    let _ = write!(out, ".{micros:06}Z");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_microseconds() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_795_834_695_123_456);
        assert_eq!(rfc3339_micros(at), "2026-11-28T02:58:15.123456Z");
        // The same second again (from the cache), then another.
        let later = at + Duration::from_micros(800_000);
        assert_eq!(rfc3339_micros(later), "2026-11-28T02:58:15.923456Z");
        assert_eq!(
            rfc3339_micros(SystemTime::UNIX_EPOCH),
            "1970-01-01T00:00:00.000000Z"
        );
    }
}
