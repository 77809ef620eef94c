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
//! - `turn LABEL floor with fresh stores: X µs (three instantiations ... Y µs + the turn's calls
//!   ... Z µs)`: `floor`, `instantiations` and `warm calls`;
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

/// `LABEL request N KB, output N KB: native X µs, wasm Y µs, wasm/native R`, or `LABEL floor
/// with fresh stores: X µs (three instantiations on unused slots Y µs + the turn's calls on warm
/// instances Z µs)`.
fn turn_row(rest: &str) -> Option<Row> {
    let (what, times) = rest.split_once(": ")?;
    let what = words(what);
    let times = match micros_in(times)[..] {
        [native, wasm] => vec![("native", native), ("wasm", wasm)],
        [floor, instantiations, calls] if what.ends_with(" floor with fresh stores") => vec![
            ("floor", floor),
            ("instantiations", instantiations),
            ("warm calls", calls),
        ],
        _ => return None,
    };
    Some(Row {
        name: format!("turn {what}"),
        times,
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

    /// Captured from a run of the current benchmark.
    const CURRENT: &str = include_str!("../testdata/transforms-bench.txt");
    /// Captured from a run of the benchmark of an earlier tree, whose streamed-parse goal set the
    /// streamed parse against the one-shot data form on a fresh instance.
    const EARLIER: &str = include_str!("../testdata/transforms-bench-earlier.txt");

    fn row<'a>(parsed: &'a Parsed, name: &str) -> &'a Row {
        parsed
            .rows
            .iter()
            .find(|row| row.name == name)
            .unwrap_or_else(|| panic!("no row {name:?} in {:?}", parsed.rows))
    }

    fn count(parsed: &Parsed, prefix: &str) -> usize {
        parsed
            .rows
            .iter()
            .filter(|row| row.name.starts_with(prefix))
            .count()
    }

    #[test]
    fn a_captured_run_gives_every_row_of_each_table_and_nothing_else() {
        let parsed = parse(CURRENT);
        assert!(parsed.unread.is_empty(), "{:?}", parsed.unread);
        // 15 rows in the main table, 5 fresh instances, 2 streamed-parse lines, 3 turns.
        assert_eq!(parsed.rows.len(), 25);
        assert_eq!(count(&parsed, "fresh instance "), 5);
        assert_eq!(count(&parsed, "streamed parse "), 2);
        assert_eq!(count(&parsed, "turn "), 3);
        assert_eq!(parsed.rows[0].name, "serializer.serialize small (0 KB)");
        assert_eq!(
            parsed.rows[0].times,
            [("native", 0.5), ("wasm fresh", 4.5), ("wasm call", 1.7)]
        );
    }

    #[test]
    fn an_input_wider_than_its_column_is_read_whole() {
        let parsed = parse(CURRENT);
        let streamed = row(
            &parsed,
            "envelope.reply_stream tool envelope, 21 tools, 40 chunks",
        );
        assert_eq!(
            streamed.times,
            [("native", 14.7), ("wasm fresh", 48.4), ("wasm call", 37.4)]
        );
    }

    #[test]
    fn fresh_instance_and_turn_lines_read_their_two_times() {
        let parsed = parse(CURRENT);
        assert_eq!(
            row(&parsed, "fresh instance serializer").times,
            [("unused slot", 2.0), ("after the rows", 8.6)]
        );
        assert_eq!(
            row(&parsed, "turn 1 MB request 1112 KB, output 1028 KB").times,
            [("native", 1067.6), ("wasm", 2705.5)]
        );
    }

    #[test]
    fn a_turn_floor_line_reads_its_three_times() {
        let line = "turn small        floor with fresh stores:      39.5 µs (three instantiations on unused slots 11.4 µs + the turn's calls on warm instances 28.0 µs)";
        let parsed = parse(line);
        assert!(parsed.unread.is_empty(), "{:?}", parsed.unread);
        assert_eq!(
            row(&parsed, "turn small floor with fresh stores").times,
            [
                ("floor", 39.5),
                ("instantiations", 11.4),
                ("warm calls", 28.0)
            ]
        );
        // Three times under another label are not a floor: the line is reported unread.
        let other = parse("turn small request 0 KB: native 1.0 µs, wasm 2.0 µs, more 3.0 µs");
        assert!(other.rows.is_empty());
        assert_eq!(other.unread.len(), 1);
    }

    #[test]
    fn streamed_goal_lines_name_the_one_shot_column_by_how_it_ran() {
        let (current, earlier) = (parse(CURRENT), parse(EARLIER));
        assert!(earlier.unread.is_empty(), "{:?}", earlier.unread);
        let name = "streamed parse 1 MB text, 40 chunks";
        assert_eq!(
            row(&current, name).times,
            [("streamed", 206.3), ("one-shot as the bridge", 114.5)]
        );
        assert_eq!(
            row(&earlier, name).times,
            [("streamed", 197.5), ("one-shot data form", 112.0)]
        );
        // Otherwise the two trees print the same rows.
        let names = |parsed: &Parsed| -> Vec<String> {
            parsed.rows.iter().map(|row| row.name.clone()).collect()
        };
        assert_eq!(names(&current), names(&earlier));
    }

    #[test]
    fn the_table_ends_at_its_blank_line() {
        // A table-shaped line after the blank line is no row.
        let text = CURRENT.replacen(
            "\nfresh instance (store + instantiate) serializer",
            "\nserializer.serialize   small (0 KB)    0.5   4.5   1.7   9.11   3.41\n\
             fresh instance (store + instantiate) serializer",
            1,
        );
        assert_ne!(text, CURRENT);
        let parsed = parse(&text);
        assert_eq!(count(&parsed, "serializer.serialize small"), 1);
    }

    #[test]
    fn an_unreadable_row_is_kept_not_dropped() {
        let text = CURRENT.replacen(
            "0.5            4.5            1.7",
            "0.5            n/a            1.7",
            1,
        );
        assert_ne!(text, CURRENT);
        let parsed = parse(&text);
        assert_eq!(parsed.rows.len(), 24);
        assert_eq!(parsed.unread.len(), 1);
        assert!(parsed.unread[0].starts_with("serializer.serialize   small"));
    }

    #[test]
    fn derived_lines_are_not_rows() {
        let derived: String = CURRENT
            .lines()
            .filter(|line| line.starts_with("fresh - warm call") || line.starts_with("goal: "))
            .filter(|line| !line.starts_with(STREAMED_GOAL))
            .map(|line| format!("{line}\n"))
            .collect();
        assert_eq!(derived.lines().count(), 17, "{derived}");
        let parsed = parse(&derived);
        assert!(parsed.rows.is_empty() && parsed.unread.is_empty());
    }
}
