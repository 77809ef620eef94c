//! Reading the timed rows out of what the transforms benchmark prints (`host/benches/
//! transforms.rs`), so that two builds of it can be compared row by row.
//!
//! The rows read, each a name and its times in µs by column:
//! - the main table (after its `operation ... native µs ...` header, up to the blank line):
//!   `operation input native fresh warm fresh/nat call/nat`; the columns `native`, `wasm
//!   fresh` and `wasm call`;
//! - `fresh instance (store + instantiate) KIND X µs on an unused slot, Y µs after the rows
//!   above`: the columns `unused slot` and `after the rows`;
//! - `turn LABEL request N KB, output N KB: native X µs, wasm Y µs, ...`: `native` and `wasm`;
//! - the streamed-parse goal lines, `goal: streamed parse ..., INPUT: R x (X µs vs Y µs, ...`:
//!   `streamed`, and the one-shot parse it is set against under a column named by how that
//!   line says it ran (the benchmark changed how it runs the one-shot parse; two trees that run
//!   it differently get two columns, compared with neither).
//!
//! Lines that only derive from those (ratios, `fresh - warm call` differences, the other goal
//! lines) are not rows. A line of the main table, or one that starts as a row above does, that
//! cannot be read is kept in [`Parsed::unread`]: the report names it rather than losing a row.

/// A timed row: what was measured (operation and input) and its times in µs by column, in
/// the order the benchmark prints them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Row {
    pub name: String,
    pub times: Vec<(&'static str, f64)>,
}

/// The rows of one run of the benchmark, and the lines that looked like rows but could not be
/// read.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub rows: Vec<Row>,
    pub unread: Vec<String>,
}

const FRESH_INSTANCE: &str = "fresh instance (store + instantiate) ";
const TURN: &str = "turn ";
const STREAMED_GOAL: &str = "goal: streamed parse";
/// How the current benchmark words a one-shot parse run as the bridge runs it; an older one
/// ran the one-shot parse as the data form on a fresh instance.
const ONE_SHOT_AS_BRIDGE: &str = "both as the bridge runs them";

/// Reads every timed row of `output`, the benchmark's standard output.
pub(crate) fn parse(output: &str) -> Parsed {
    let mut parsed = Parsed::default();
    let mut in_table = false;
    for line in output.lines() {
        let trimmed = line.trim();
        if in_table {
            if trimmed.is_empty() {
                in_table = false;
            } else {
                parsed.keep(table_row(trimmed), line);
            }
        } else if is_table_header(trimmed) {
            in_table = true;
        } else if let Some(rest) = trimmed.strip_prefix(FRESH_INSTANCE) {
            parsed.keep(fresh_instance_row(rest), line);
        } else if let Some(rest) = trimmed.strip_prefix(TURN) {
            parsed.keep(turn_row(rest), line);
        } else if trimmed.starts_with(STREAMED_GOAL) {
            parsed.keep(streamed_row(trimmed), line);
        }
    }
    parsed
}

impl Parsed {
    fn keep(&mut self, row: Option<Row>, line: &str) {
        match row {
            Some(row) => self.rows.push(row),
            None => self.unread.push(line.to_owned()),
        }
    }
}

fn is_table_header(line: &str) -> bool {
    line.split_whitespace().next() == Some("operation") && line.contains("native µs")
}

/// `operation input native fresh warm fresh/nat call/nat`: the input may hold spaces, so the
/// five numbers are taken from the end.
fn table_row(line: &str) -> Option<Row> {
    let (operation, mut rest) = line.split_once(char::is_whitespace)?;
    let mut numbers = [0.0_f64; 5];
    for slot in numbers.iter_mut().rev() {
        let (before, last) = rest.trim_end().rsplit_once(char::is_whitespace)?;
        *slot = last.parse().ok()?;
        rest = before;
    }
    let input = rest.trim();
    let [native, fresh, warm, _, _] = numbers;
    if input.is_empty() || ![native, fresh, warm].iter().all(|t| t.is_finite()) {
        return None;
    }
    Some(Row {
        name: format!("{operation} {input}"),
        times: vec![
            ("native", native),
            ("wasm fresh", fresh),
            ("wasm call", warm),
        ],
    })
}

/// `KIND X µs on an unused slot, Y µs after the rows above`.
fn fresh_instance_row(rest: &str) -> Option<Row> {
    let (kind, times) = rest.trim().split_once(char::is_whitespace)?;
    let [unused, used] = micros_in(times)[..] else {
        return None;
    };
    Some(Row {
        name: format!("fresh instance {kind}"),
        times: vec![("unused slot", unused), ("after the rows", used)],
    })
}

/// `LABEL request N KB, output N KB: native X µs, wasm Y µs, wasm/native R`.
fn turn_row(rest: &str) -> Option<Row> {
    let (what, times) = rest.split_once(": ")?;
    let [native, wasm] = micros_in(times)[..] else {
        return None;
    };
    Some(Row {
        name: format!("turn {}", words(what)),
        times: vec![("native", native), ("wasm", wasm)],
    })
}

/// `goal: streamed parse ..., INPUT: R x (STREAMED µs vs ONE-SHOT µs, ...)  VERDICT`. The
/// input is what follows the head's last parenthesis (`(wasm, per turn), tool envelope, 21
/// tools, 40 chunks`).
fn streamed_row(line: &str) -> Option<Row> {
    let (head, tail) = line.rsplit_once(": ")?;
    let input = head.rsplit_once("), ").map_or(head, |(_, input)| input);
    let [streamed, one_shot, ..] = micros_in(tail)[..] else {
        return None;
    };
    let one_shot_column = if head.contains(ONE_SHOT_AS_BRIDGE) {
        "one-shot as the bridge"
    } else {
        "one-shot data form"
    };
    Some(Row {
        name: format!("streamed parse {}", words(input)),
        times: vec![("streamed", streamed), (one_shot_column, one_shot)],
    })
}

/// Every number written as `N µs` in `text`, in order.
fn micros_in(text: &str) -> Vec<f64> {
    let tokens: Vec<&str> = text.split_whitespace().collect();
    tokens
        .windows(2)
        .filter(|pair| pair[1].trim_end_matches([',', ';', ')']) == "µs")
        .filter_map(|pair| pair[0].trim_start_matches('(').parse::<f64>().ok())
        .filter(|time| time.is_finite())
        .collect()
}

/// `text` with each run of whitespace made one space (the benchmark pads its labels).
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(row: &Row) -> Vec<(&str, f64)> {
        row.times.clone()
    }

    #[test]
    fn main_table_rows_keep_inputs_with_spaces_and_read_three_timed_columns() {
        let parsed = parse(TABLE);
        assert!(parsed.unread.is_empty(), "{:?}", parsed.unread);
        let names: Vec<&str> = parsed.rows.iter().map(|row| row.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "serializer.serialize small (0 KB)",
                "envelope.reply_stream tool envelope, 21 tools, 40 chunks",
                "safeguard.judge+hist 8 calls after 200 calls",
                "sse.stream_ping (none)",
            ]
        );
        assert_eq!(
            times(&parsed.rows[1]),
            [
                ("native", 61.4),
                ("wasm fresh", 139.0),
                ("wasm call", 101.7)
            ]
        );
    }

    #[test]
    fn the_table_ends_at_its_blank_line() {
        let text = format!("{TABLE}\nserializer.serialize small (0 KB) 1.0 2.0 3.0 2.00 3.00\n");
        assert_eq!(parse(&text).rows.len(), 4);
    }

    #[test]
    fn an_unreadable_table_line_is_kept_not_dropped() {
        let text = "operation              input                         native µs  wasm fresh µs   wasm call µs   fresh/nat   call/nat\n\
                    serializer.serialize   small (0 KB)                        0.5           n/a            2.0        6.00       4.00\n";
        let parsed = parse(text);
        assert!(parsed.rows.is_empty());
        assert_eq!(parsed.unread.len(), 1);
    }

    #[test]
    fn fresh_instance_and_turn_rows_read_their_two_times() {
        let parsed = parse(OTHER_ROWS);
        assert!(parsed.unread.is_empty(), "{:?}", parsed.unread);
        let rows: Vec<(&str, Vec<(&str, f64)>)> = parsed
            .rows
            .iter()
            .map(|row| (row.name.as_str(), times(row)))
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "fresh instance model-alias",
                    vec![("unused slot", 7.9), ("after the rows", 8.3)]
                ),
                (
                    "turn claude-code request 79 KB, output 3 KB",
                    vec![("native", 212.6), ("wasm", 655.0)]
                ),
            ]
        );
    }

    #[test]
    fn streamed_goal_lines_name_the_one_shot_column_by_how_it_ran() {
        let parsed = parse(STREAMED);
        assert!(parsed.unread.is_empty(), "{:?}", parsed.unread);
        let [old, new] = &parsed.rows[..] else {
            panic!("two rows: {:?}", parsed.rows)
        };
        assert_eq!(
            old.name,
            "streamed parse tool envelope, 21 tools, 40 chunks"
        );
        assert_eq!(old.name, new.name);
        assert_eq!(
            times(old),
            [("streamed", 150.2), ("one-shot data form", 120.5)]
        );
        assert_eq!(
            times(new),
            [("streamed", 149.3), ("one-shot as the bridge", 118.0)]
        );
    }

    #[test]
    fn derived_lines_are_not_rows() {
        let text = "fresh - warm call          serializer.serialize       1.2 µs\n\
                    goal: serializing the 1 MB request, fresh instance + call <= 1400 µs: 900.1 µs  PASS\n";
        let parsed = parse(text);
        assert!(parsed.rows.is_empty() && parsed.unread.is_empty());
    }

    const TABLE: &str = "\
operation              input                         native µs  wasm fresh µs   wasm call µs   fresh/nat   call/nat
serializer.serialize   small (0 KB)                        0.5            3.0            2.0        6.00       4.00
envelope.reply_stream  tool envelope, 21 tools, 40 chunks         61.4          139.0          101.7        2.26       1.66
safeguard.judge+hist   8 calls after 200 calls            35.0           60.2           40.1        1.72       1.15
sse.stream_ping        (none)                              0.1            1.9            0.2       19.00       2.00
";

    const OTHER_ROWS: &str = "
fresh instance (store + instantiate) model-alias         7.9 µs on an unused slot,      8.3 µs after the rows above
turn claude-code  request    79 KB, output     3 KB: native     212.6 µs, wasm     655.0 µs, wasm/native 3.08
";

    const STREAMED: &str = "\
goal: streamed parse (wasm, per turn, as the bridge runs it) <= 1.5x the one-shot parse (wasm, fresh instance), tool envelope, 21 tools, 40 chunks: 1.25x (150.2 µs vs 120.5 µs, 3 alternating rounds; data form on a fresh instance 139.0 µs)  PASS
goal: streamed parse <= 1.5x the one-shot parse, both as the bridge runs them (wasm, per turn), tool envelope, 21 tools, 40 chunks: 1.27x (149.3 µs vs 118.0 µs, 3 alternating rounds; data form on a fresh instance 139.0 µs vs 120.1 µs)  PASS
";
}
