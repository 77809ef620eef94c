//! Comparing the timed rows of two builds of the transforms benchmark, each run for several
//! rounds: each side's best time per row and column, the ratio new / old, the spread between
//! rounds of the same build (the noise), and a verdict.
//!
//! The verdict rule ([`verdict`]): a timing is *slower* when every round of the new build was
//! slower than every round of the old one (the new best above the old worst) AND the new best
//! is more than [`MARGIN`] above the old best AND that difference is more than
//! [`MIN_DIFFERENCE_US`]. Disjoint ranges alone are not enough on a shared 2-core machine:
//! with three rounds a side, two equally fast builds still land disjoint one time in twenty,
//! so across eighty timings a few would be called slower by chance; the margin asks for a
//! difference larger than a typical round-to-round drift, and the floor keeps a 0.1 µs step
//! of the printed value (the benchmark prints tenths of µs) from being a 30% "slowdown" of a
//! 0.3 µs row. *Faster* is the same rule with the sides swapped; anything else is *same*.
//!
//! It informs and does not gate: the caller prints [`Comparison::report`], whatever it says.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::bench_table::Row;

/// How far above the old best the new best must be (10%).
pub(crate) const MARGIN: f64 = 1.10;
/// The smallest difference that can count, in µs.
pub(crate) const MIN_DIFFERENCE_US: f64 = 0.25;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Slower,
    Faster,
    Same,
}

impl Verdict {
    fn word(self) -> &'static str {
        match self {
            Verdict::Slower => "SLOWER",
            Verdict::Faster => "faster",
            Verdict::Same => "same",
        }
    }
}

/// The verdict on a timing measured `old` and `new` (µs, one entry per round); see the
/// module doc. Both must be non-empty.
pub(crate) fn verdict(old: &[f64], new: &[f64]) -> Verdict {
    if clearly_above(new, old) {
        Verdict::Slower
    } else if clearly_above(old, new) {
        Verdict::Faster
    } else {
        Verdict::Same
    }
}

/// Every round of `high` above every round of `low`, and `high`'s best above `low`'s best by
/// more than the margin and the floor.
fn clearly_above(high: &[f64], low: &[f64]) -> bool {
    let (high_best, low_best, low_worst) = (best(high), best(low), worst(low));
    high_best > low_worst
        && high_best > low_best * MARGIN
        && high_best - low_best > MIN_DIFFERENCE_US
}

fn best(times: &[f64]) -> f64 {
    times.iter().copied().fold(f64::INFINITY, f64::min)
}

fn worst(times: &[f64]) -> f64 {
    times.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}

/// (worst - best) / best of one build's rounds: how much the same binary moved between rounds.
pub(crate) fn spread(times: &[f64]) -> f64 {
    let best = best(times);
    if best > 0.0 {
        (worst(times) - best) / best
    } else {
        0.0
    }
}

/// One side's times: per row, per column, one time per round, rows in first-seen order.
#[derive(Debug, Default)]
pub(crate) struct Rounds {
    order: Vec<String>,
    times: BTreeMap<String, Vec<(&'static str, Vec<f64>)>>,
}

impl Rounds {
    /// Adds one round's rows.
    pub(crate) fn add(&mut self, rows: &[Row]) {
        for row in rows {
            let columns = self.times.entry(row.name.clone()).or_insert_with(|| {
                self.order.push(row.name.clone());
                Vec::new()
            });
            for (column, time) in &row.times {
                match columns.iter_mut().find(|(name, _)| name == column) {
                    Some((_, times)) => times.push(*time),
                    None => columns.push((column, vec![*time])),
                }
            }
        }
    }

    fn columns(&self, row: &str) -> &[(&'static str, Vec<f64>)] {
        self.times.get(row).map_or(&[], Vec::as_slice)
    }
}

/// A timing both sides measured.
#[derive(Debug)]
pub(crate) struct Timing {
    pub row: String,
    pub column: &'static str,
    pub old: Vec<f64>,
    pub new: Vec<f64>,
    pub verdict: Verdict,
}

impl Timing {
    fn ratio(&self) -> f64 {
        best(&self.new) / best(&self.old).max(1e-9)
    }
}

/// The two sides set against each other.
#[derive(Debug)]
pub(crate) struct Comparison {
    pub timings: Vec<Timing>,
    /// Rows (or `row: column`) only the old side printed, then only the new side.
    pub only_old: Vec<String>,
    pub only_new: Vec<String>,
}

/// Sets `new` against `old`, in the new side's row order.
pub(crate) fn compare(old: &Rounds, new: &Rounds) -> Comparison {
    let mut comparison = Comparison {
        timings: Vec::new(),
        only_old: one_side(old, new),
        only_new: one_side(new, old),
    };
    for row in &new.order {
        for (column, new_times) in new.columns(row) {
            let Some((_, old_times)) = old.columns(row).iter().find(|(c, _)| c == column) else {
                continue;
            };
            comparison.timings.push(Timing {
                row: row.clone(),
                column,
                verdict: verdict(old_times, new_times),
                old: old_times.clone(),
                new: new_times.clone(),
            });
        }
    }
    comparison
}

/// What `side` printed that `other` did not: whole rows, or a row's column.
fn one_side(side: &Rounds, other: &Rounds) -> Vec<String> {
    let mut only = Vec::new();
    for row in &side.order {
        let theirs = other.columns(row);
        if theirs.is_empty() {
            only.push(row.clone());
            continue;
        }
        for (column, _) in side.columns(row) {
            if !theirs.iter().any(|(c, _)| c == column) {
                only.push(format!("{row}: {column}"));
            }
        }
    }
    only
}

impl Comparison {
    /// The rows with at least one timing both sides measured.
    pub(crate) fn rows_compared(&self) -> usize {
        self.row_names(|_| true).len()
    }

    /// The rows with a slower timing.
    pub(crate) fn slower_rows(&self) -> Vec<String> {
        self.row_names(|timing| timing.verdict == Verdict::Slower)
    }

    fn row_names(&self, keep: impl Fn(&Timing) -> bool) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for timing in self.timings.iter().filter(|t| keep(t)) {
            if names.last() != Some(&timing.row) {
                names.push(timing.row.clone());
            }
        }
        names
    }

    /// The table, the rows only one side has, the noise and the final line.
    pub(crate) fn report(&self, old_name: &str, new_name: &str, rounds: usize) -> String {
        let mut out = String::new();
        self.write_table(&mut out, old_name, new_name, rounds);
        for (side, only) in [(old_name, &self.only_old), (new_name, &self.only_new)] {
            if !only.is_empty() {
                let _ = writeln!(out, "\nonly in {side} (not compared):");
                for row in only {
                    let _ = writeln!(out, "  {row}");
                }
            }
        }
        self.write_noise(&mut out, old_name, new_name);
        self.write_final_line(&mut out);
        out
    }

    fn write_table(&self, out: &mut String, old_name: &str, new_name: &str, rounds: usize) {
        let row_width = self.timings.iter().map(|t| t.row.len()).max().unwrap_or(3);
        let _ = writeln!(
            out,
            "transforms bench, {old_name} (old) vs {new_name} (new): best of {rounds} alternating \
             round(s) each, µs; spread = (worst - best) / best over one build's rounds; slower = \
             every new round above every old round and the new best > {:.0}% and > {MIN_DIFFERENCE_US} µs \
             above the old best",
            (MARGIN - 1.0) * 100.0
        );
        let _ = writeln!(
            out,
            "{:<row_width$}  {:<22} {:>10} {:>10} {:>8} {:>11} {:>11}  verdict",
            "row", "column", "old", "new", "new/old", "spread old", "spread new"
        );
        for timing in &self.timings {
            let _ = writeln!(
                out,
                "{:<row_width$}  {:<22} {:>10.1} {:>10.1} {:>8.2} {:>10.1}% {:>10.1}%  {}",
                timing.row,
                timing.column,
                best(&timing.old),
                best(&timing.new),
                timing.ratio(),
                spread(&timing.old) * 100.0,
                spread(&timing.new) * 100.0,
                timing.verdict.word()
            );
        }
    }

    fn write_noise(&self, out: &mut String, old_name: &str, new_name: &str) {
        let _ = writeln!(
            out,
            "\nnoise, spread between rounds of the same build over the {} timings:",
            self.timings.len()
        );
        for (side, times) in [
            (
                old_name,
                self.timings.iter().map(|t| (t, &t.old)).collect::<Vec<_>>(),
            ),
            (new_name, self.timings.iter().map(|t| (t, &t.new)).collect()),
        ] {
            let mut spreads: Vec<(f64, &Timing)> =
                times.iter().map(|(t, times)| (spread(times), *t)).collect();
            spreads.sort_by(|a, b| a.0.total_cmp(&b.0));
            let Some((max, widest)) = spreads.last() else {
                continue;
            };
            let median = spreads[spreads.len() / 2].0;
            let _ = writeln!(
                out,
                "  {side}: median {:.1}%, max {:.1}% ({}: {})",
                median * 100.0,
                max * 100.0,
                widest.row,
                widest.column
            );
        }
    }

    fn write_final_line(&self, out: &mut String) {
        let slower: Vec<String> = self
            .timings
            .iter()
            .filter(|t| t.verdict == Verdict::Slower)
            .map(|t| format!("{}: {} x{:.2}", t.row, t.column, t.ratio()))
            .collect();
        let faster = self
            .timings
            .iter()
            .filter(|t| t.verdict == Verdict::Faster)
            .count();
        let _ = writeln!(
            out,
            "\ncompared {} rows ({} timings): {} slower{}; {faster} timings faster",
            self.rows_compared(),
            self.timings.len(),
            self.slower_rows().len(),
            if slower.is_empty() {
                String::new()
            } else {
                format!(" ({})", slower.join("; "))
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slower_needs_disjoint_rounds_and_the_margin() {
        // Every new round above every old one, 20% up: slower.
        assert_eq!(
            verdict(&[100.0, 102.0, 104.0], &[120.0, 121.0, 125.0]),
            Verdict::Slower
        );
        // 20% up at best, but one old round as slow as the new best: overlapping, same.
        assert_eq!(
            verdict(&[100.0, 102.0, 121.0], &[120.0, 121.0, 125.0]),
            Verdict::Same
        );
        // Disjoint but only 5% up: within the margin, same.
        assert_eq!(
            verdict(&[100.0, 100.5, 101.0], &[105.0, 105.5, 106.0]),
            Verdict::Same
        );
    }

    #[test]
    fn a_print_step_on_a_tiny_row_is_not_slower() {
        // 0.3 -> 0.4 µs is +33% and disjoint, but one printed tenth of a µs.
        assert_eq!(verdict(&[0.3, 0.3, 0.3], &[0.4, 0.4, 0.4]), Verdict::Same);
        // 1.0 -> 1.5 µs is past the floor.
        assert_eq!(verdict(&[1.0, 1.0, 1.0], &[1.5, 1.5, 1.5]), Verdict::Slower);
    }

    #[test]
    fn faster_is_the_rule_with_the_sides_swapped() {
        assert_eq!(
            verdict(&[120.0, 121.0, 125.0], &[100.0, 102.0, 104.0]),
            Verdict::Faster
        );
    }

    #[test]
    fn measured_rows_get_the_verdicts_the_rule_gives() {
        // safeguard.judge+hist, wasm fresh, three rounds of each tree as measured side by side.
        let (earlier, current) = ([212.8, 185.0, 183.8], [163.9, 160.0, 160.1]);
        assert_eq!(verdict(&earlier, &current), Verdict::Faster);
        assert_eq!(verdict(&current, &earlier), Verdict::Slower);
        // sse.render_stream 1 MB text reply, wasm fresh: 8% apart, no overlap, within the margin.
        let (earlier, current) = ([284.6, 290.2, 290.1], [269.0, 262.6, 262.4]);
        assert_eq!(verdict(&earlier, &current), Verdict::Same);
    }

    #[test]
    fn captured_runs_of_two_trees_compare_on_their_common_rows() {
        let (mut earlier, mut current) = (Rounds::default(), Rounds::default());
        earlier.add(
            &crate::bench_table::parse(include_str!("../testdata/transforms-bench-earlier.txt"))
                .rows,
        );
        current
            .add(&crate::bench_table::parse(include_str!("../testdata/transforms-bench.txt")).rows);
        let comparison = compare(&earlier, &current);
        assert_eq!(comparison.rows_compared(), 25);
        // 15 table rows of 3 columns, 5 fresh instances and 3 turns of 2, 2 streamed of 1.
        assert_eq!(comparison.timings.len(), 63);
        assert_eq!(
            comparison.only_old,
            [
                "streamed parse tool envelope, 21 tools, 40 chunks: one-shot data form",
                "streamed parse 1 MB text, 40 chunks: one-shot data form"
            ]
        );
        assert_eq!(comparison.only_new.len(), 2);
    }

    #[test]
    fn spread_is_worst_over_best() {
        assert!((spread(&[100.0, 110.0, 125.0]) - 0.25).abs() < 1e-12);
        assert_eq!(spread(&[7.0]), 0.0);
    }

    fn row(name: &str, times: &[(&'static str, f64)]) -> Row {
        Row {
            name: name.into(),
            times: times.to_vec(),
        }
    }

    #[test]
    fn compare_takes_common_rows_and_columns_and_lists_the_rest() {
        let mut old = Rounds::default();
        let mut new = Rounds::default();
        for round in 0..3 {
            let jitter = f64::from(round);
            old.add(&[
                row("a", &[("native", 10.0 + jitter), ("wasm", 20.0 + jitter)]),
                row("gone", &[("native", 1.0)]),
                row("s", &[("streamed", 5.0), ("one-shot data form", 4.0)]),
            ]);
            new.add(&[
                row("a", &[("native", 10.5 + jitter), ("wasm", 30.0 + jitter)]),
                row("s", &[("streamed", 5.0), ("one-shot as the bridge", 4.0)]),
                row("added", &[("native", 1.0)]),
            ]);
        }
        let comparison = compare(&old, &new);
        let seen: Vec<(&str, &str, Verdict)> = comparison
            .timings
            .iter()
            .map(|t| (t.row.as_str(), t.column, t.verdict))
            .collect();
        assert_eq!(
            seen,
            [
                ("a", "native", Verdict::Same),
                ("a", "wasm", Verdict::Slower),
                ("s", "streamed", Verdict::Same),
            ]
        );
        assert_eq!(comparison.timings[1].old, [20.0, 21.0, 22.0]);
        assert_eq!(comparison.only_old, ["gone", "s: one-shot data form"]);
        assert_eq!(comparison.only_new, ["s: one-shot as the bridge", "added"]);
        assert_eq!(comparison.rows_compared(), 2);
        assert_eq!(comparison.slower_rows(), ["a"]);
        let report = comparison.report("old", "new", 3);
        let last = report.lines().last().unwrap_or_default();
        assert_eq!(
            last,
            "compared 2 rows (3 timings): 1 slower (a: wasm x1.50); 0 timings faster"
        );
    }
}
