//! RFC 3339 UTC timestamps for job records (the format is the records' contract).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The current time as RFC 3339 UTC with milliseconds, e.g. `2026-11-30T15:48:51.123Z`.
pub(crate) fn now_rfc3339() -> String {
    format_rfc3339(SystemTime::now())
}

/// Formats `time` as RFC 3339 UTC with milliseconds (times before 1970 print as the epoch):
/// the same format as the guard's audit log.
pub fn format_rfc3339(time: SystemTime) -> String {
    match jiff::Timestamp::try_from(time.max(UNIX_EPOCH)) {
        Ok(timestamp) => format!("{timestamp:.3}"),
        // Beyond the year 9999: not a time a job record can hold.
        Err(_) => "9999-12-31T23:59:59.999Z".to_owned(),
    }
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, optional fraction).
pub(crate) fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    text.parse::<jiff::Timestamp>().ok().map(SystemTime::from)
}

/// How long ago `timestamp` was (zero if it is in the future or unparseable).
pub(crate) fn age_of(timestamp: &str, now: SystemTime) -> Option<Duration> {
    let then = parse_rfc3339(timestamp)?;
    Some(now.duration_since(then).unwrap_or_default())
}

/// A short human age: `42s`, `5m`, `3h`, `2d`.
pub(crate) fn short_age(age: Duration) -> String {
    let seconds = age.as_secs();
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86_400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap_day = UNIX_EPOCH + Duration::from_millis(951_782_400_007);
        assert_eq!(format_rfc3339(leap_day), "2000-02-29T00:00:00.007Z");
        let later = UNIX_EPOCH + Duration::from_secs(1_796_053_731);
        assert_eq!(format_rfc3339(later), "2026-11-30T15:48:51.000Z");
    }

    #[test]
    fn parses_what_it_formats_and_offsets() {
        let now = SystemTime::now();
        let text = format_rfc3339(now);
        let back = parse_rfc3339(&text).unwrap();
        let diff = now.duration_since(back).unwrap();
        assert!(diff < Duration::from_millis(1), "{diff:?}");
        assert_eq!(
            parse_rfc3339("2026-11-30T17:48:51+02:00").unwrap(),
            parse_rfc3339("2026-11-30T15:48:51Z").unwrap()
        );
        assert!(parse_rfc3339("2026-13-30T15:48:51Z").is_none());
        assert!(parse_rfc3339("yesterday").is_none());
        assert!(parse_rfc3339("2026-11-30T15:48:51").is_none());
    }

    #[test]
    fn short_ages_pick_the_largest_unit() {
        assert_eq!(short_age(Duration::from_secs(5)), "5s");
        assert_eq!(short_age(Duration::from_secs(300)), "5m");
        assert_eq!(short_age(Duration::from_secs(7200)), "2h");
        assert_eq!(short_age(Duration::from_secs(3 * 86_400)), "3d");
    }
}
