//! `MOCK_DEVIN_LOG`: one JSON line per action, appended, as evidence for end-to-end tests.
//! Lines never carry prompt text or environment values.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// `MOCK_DEVIN_LOG`, when set.
pub(crate) fn path() -> Option<PathBuf> {
    std::env::var_os("MOCK_DEVIN_LOG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

pub(crate) struct Log {
    path: Option<PathBuf>,
    warned: AtomicBool,
}

impl Log {
    pub(crate) fn new(path: Option<PathBuf>) -> Self {
        Self {
            path,
            warned: AtomicBool::new(false),
        }
    }

    /// Appends `{"at", "event", "scenario", "pid", ...fields}`. `fields` must be an object.
    pub(crate) fn event(&self, event: &str, scenario: Option<&str>, fields: Value) {
        let Some(path) = &self.path else { return };
        let mut line = Map::new();
        line.insert("at".into(), Value::String(now_rfc3339()));
        line.insert("event".into(), Value::String(event.into()));
        line.insert(
            "scenario".into(),
            scenario.map_or(Value::Null, |s| Value::String(s.into())),
        );
        line.insert("pid".into(), Value::from(std::process::id()));
        if let Value::Object(fields) = fields {
            line.extend(fields);
        }
        let mut bytes = match serde_json::to_vec(&Value::Object(line)) {
            Ok(bytes) => bytes,
            Err(_) => return,
        };
        bytes.push(b'\n');
        // One write per line on an O_APPEND file: lines from concurrent agents do not interleave.
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut file| file.write_all(&bytes));
        if let Err(err) = written {
            if !self.warned.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "mock-devin: cannot append to MOCK_DEVIN_LOG {}: {err}",
                    path.display()
                );
            }
        }
    }
}

/// The current UTC time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// Microseconds since the Unix epoch (a chunk's send time, finer than the log's `at`).
pub(crate) fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}

/// `time` in UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    format_rfc3339(since.as_secs(), since.subsec_millis())
}

fn format_rfc3339(secs: u64, millis: u32) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_timestamps() {
        assert_eq!(format_rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_rfc3339(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(
            format_rfc3339(1_767_225_599, 999),
            "2025-12-31T23:59:59.999Z"
        );
    }

    #[test]
    fn appends_json_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log.jsonl");
        let log = Log::new(Some(path.clone()));
        log.event("prompt", Some("text"), serde_json::json!({"chars": 3}));
        log.event("eof", None, Value::Null);
        let text = std::fs::read_to_string(path).expect("log");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect("json"))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "prompt");
        assert_eq!(lines[0]["scenario"], "text");
        assert_eq!(lines[0]["chars"], 3);
        assert_eq!(lines[1]["scenario"], Value::Null);
    }
}
