//! RFC 3339 UTC timestamps for job records, without a calendar dependency.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The current time as RFC 3339 UTC with milliseconds, e.g. `2026-11-30T15:48:51.123Z`.
pub fn now_rfc3339() -> String {
    format_rfc3339(SystemTime::now())
}

/// Formats `time` as RFC 3339 UTC with milliseconds (times before 1970 print as the epoch):
/// the same format as the guard's audit log.
pub fn format_rfc3339(time: SystemTime) -> String {
    crate::guard::audit::rfc3339(time)
}

/// Parses an RFC 3339 timestamp (`Z` or a numeric offset, optional fraction).
pub fn parse_rfc3339(text: &str) -> Option<SystemTime> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[13] != b':' {
        return None;
    }
    if !matches!(bytes[10], b'T' | b't' | b' ') || bytes[16] != b':' {
        return None;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u64> {
        let part = text.get(range)?;
        if part.bytes().all(|b| b.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let year = number(0..4)? as i64;
    let month = number(5..7)?;
    let day = number(8..10)?;
    let hour = number(11..13)?;
    let minute = number(14..16)?;
    let second = number(17..19)?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut rest = &text[19..];
    let mut nanos: u64 = 0;
    if let Some(fraction) = rest.strip_prefix('.') {
        let digits = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        for (index, digit) in fraction[..digits].bytes().enumerate() {
            if index < 9 {
                nanos += u64::from(digit - b'0') * 10u64.pow(8 - index as u32);
            }
        }
        rest = &fraction[digits..];
    }
    let offset_seconds: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let offset = rest.get(1..)?;
            let (hours, minutes) = offset.split_once(':')?;
            if hours.len() != 2 || minutes.len() != 2 {
                return None;
            }
            let hours: i64 = hours.parse().ok()?;
            let minutes: i64 = minutes.parse().ok()?;
            sign * (hours * 3600 + minutes * 60)
        }
    };
    let days = days_from_civil(year, month as u32, day as u32);
    let seconds = days * 86_400 + (hour * 3600 + minute * 60 + second) as i64 - offset_seconds;
    let seconds = u64::try_from(seconds).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(seconds) + Duration::from_nanos(nanos))
}

/// How long ago `timestamp` was (zero if it is in the future or unparseable).
pub fn age_of(timestamp: &str, now: SystemTime) -> Option<Duration> {
    let then = parse_rfc3339(timestamp)?;
    Some(now.duration_since(then).unwrap_or_default())
}

/// A short human age: `42s`, `5m`, `3h`, `2d`.
pub fn short_age(age: Duration) -> String {
    let seconds = age.as_secs();
    match seconds {
        0..60 => format!("{seconds}s"),
        60..3600 => format!("{}m", seconds / 60),
        3600..86_400 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let doy = (153 * (if month > 2 { month - 3 } else { month + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
