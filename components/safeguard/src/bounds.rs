//! Output and work bounds of the programs of the safe set that print what they compute
//! (`printf`, `seq`, `jq`): a call that would fill the disk or the memory is flagged.
//!
//! Invariants:
//! - `printf`: a width or precision over [`MAX_WIDTH`] and a `*` width or precision (taken
//!   from an argument) are flagged. With at most 16 KiB of line, what one call can print is
//!   then bounded.
//! - `seq`: at most [`MAX_COUNT`] numbers, a non-zero increment, and a `-f` format within the
//!   `printf` bounds.
//! - `jq`: a number above [`MAX_COUNT`] in the filter, `range` with a bound that is not a
//!   number written in the filter, and the builtins that loop until a condition or without end
//!   (`repeat`, `while`, `until`, `recurse` with an argument, `combinations`, and `def`, which
//!   can recurse) are flagged. Other ways jq can work long (a long string built from a short
//!   filter) end with the `Bash` call's timeout.
//! - Each check is one pass over its text.

use crate::verdict::show;

/// Widest `printf` field accepted.
pub(crate) const MAX_WIDTH: u64 = 10_000;

/// Most numbers `seq` may print, and the largest number a jq filter may hold.
pub(crate) const MAX_COUNT: f64 = 100_000.0;

/// A `printf` format (also `seq -f`).
pub(crate) fn printf_format(program: &str, format: &str) -> Result<(), String> {
    let bytes = format.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'%' {
            i += 1;
            continue;
        }
        i += 1;
        if bytes.get(i) == Some(&b'%') {
            i += 1;
            continue;
        }
        while i < bytes.len() && b"-+ #0'".contains(&bytes[i]) {
            i += 1;
        }
        for part in 0..2 {
            if part == 1 {
                if bytes.get(i) != Some(&b'.') {
                    break;
                }
                i += 1;
            }
            if bytes.get(i) == Some(&b'*') {
                return Err(format!(
                    "runs `{program}` with a field width taken from an argument (`*`), which can print without bound"
                ));
            }
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let digits = &format[start..i];
            let too_wide = !digits.is_empty()
                && (digits.len() > 5 || digits.parse::<u64>().map_or(true, |n| n > MAX_WIDTH));
            if too_wide {
                return Err(format!(
                    "runs `{program}` with a field width of {}, more than the {MAX_WIDTH} the judge accepts",
                    show(digits)
                ));
            }
        }
    }
    Ok(())
}

/// `seq [-w] [-s SEP] [-f FORMAT] [FIRST [INCREMENT]] LAST`.
pub(crate) fn seq(args: &[&str]) -> Result<(), String> {
    let mut numbers: Vec<f64> = Vec::new();
    let mut i = 0;
    while let Some(text) = args.get(i).copied() {
        i += 1;
        match text {
            "-w" | "--equal-width" => {}
            "-s" | "--separator" => i += 1,
            "-f" | "--format" => {
                let format = args
                    .get(i)
                    .copied()
                    .ok_or("runs `seq -f` without a format")?;
                printf_format("seq", format)?;
                i += 1;
            }
            _ if text.starts_with("--separator=") => {}
            _ if text.starts_with("--format=") => printf_format("seq", &text[9..])?,
            _ => match text.parse::<f64>() {
                Ok(number) if number.is_finite() => numbers.push(number),
                _ => return Err(format!("runs `seq` with `{}`", show(text))),
            },
        }
    }
    let (first, step, last) = match numbers.as_slice() {
        [last] => (1.0, 1.0, *last),
        [first, last] => (*first, 1.0, *last),
        [first, step, last] => (*first, *step, *last),
        _ => return Err("runs `seq` without one to three numbers".to_owned()),
    };
    if step == 0.0 {
        return Err("runs `seq` with an increment of 0, which never ends".to_owned());
    }
    let count = (last - first) / step;
    if count > MAX_COUNT {
        return Err(format!(
            "runs `seq` over more than {MAX_COUNT} numbers, which can fill the disk or the memory"
        ));
    }
    Ok(())
}

/// A jq filter's loops and bounds.
pub(crate) fn jq_filter(filter: &str) -> Result<(), String> {
    let bytes = filter.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 2,
                b'"' => {
                    in_string = false;
                    i += 1;
                }
                _ => i += 1,
            }
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if b.is_ascii_digit() {
            let start = i;
            // A number: digits, letters (`1e9`, `0x`), dots, and a sign right after an `e`.
            while i < bytes.len() {
                let c = bytes[i];
                let sign = matches!(c, b'+' | b'-');
                let part = c.is_ascii_alphanumeric() || c == b'.' || sign;
                if !part || (sign && !matches!(bytes[i - 1], b'e' | b'E')) {
                    break;
                }
                i += 1;
            }
            let number = &filter[start..i];
            if number.parse::<f64>().map_or(true, |n| n > MAX_COUNT) {
                return Err(format!(
                    "runs `jq` with the number {}, more than the {MAX_COUNT} the judge accepts in a filter",
                    show(number)
                ));
            }
            continue;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            let field = start > 0 && matches!(bytes[start - 1], b'.' | b'$');
            if field {
                continue;
            }
            let next = filter[i..].trim_start().as_bytes().first().copied();
            match &filter[start..i] {
                "repeat" | "while" | "until" | "combinations" | "def" => {
                    return Err(format!(
                        "runs `jq` with `{}`, which can loop without end",
                        &filter[start..i]
                    ))
                }
                "recurse" if next == Some(b'(') => {
                    return Err("runs `jq` with `recurse(f)`, which can loop without end".into())
                }
                "range" => range_arguments(&filter[i..])?,
                _ => {}
            }
            continue;
        }
        i += 1;
    }
    Ok(())
}

/// `range(N)`, `range(N; M)`, `range(N; M; S)`: every bound a number written in the filter.
fn range_arguments(after: &str) -> Result<(), String> {
    let after = after.trim_start();
    let refused = || {
        Err(
            "runs `jq` with a `range` whose bounds are not numbers written in the filter"
                .to_owned(),
        )
    };
    let Some(inner) = after.strip_prefix('(') else {
        return refused();
    };
    let Some(close) = inner.find(')') else {
        return refused();
    };
    for bound in inner[..close].split(';') {
        match bound.trim().parse::<f64>() {
            Ok(n) if n.abs() <= MAX_COUNT => {}
            _ => return refused(),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printf_widths() {
        for ok in ["%s\\n", "%-10s|%5.2f", "%%d", "%08x", "100%", "%10000d"] {
            assert!(printf_format("printf", ok).is_ok(), "{ok}");
        }
        for bad in [
            "%999999999d",
            "%.99999s",
            "%*d",
            "%.*f",
            "%10001d",
            "x%0123456s",
        ] {
            assert!(printf_format("printf", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn seq_counts() {
        for ok in [
            &["10"][..],
            &["1", "100"],
            &["0", "0.5", "10"],
            &["-w", "1", "10"],
        ] {
            assert!(seq(ok).is_ok(), "{ok:?}");
        }
        for bad in [
            &["1000000000"][..],
            &["1", "0", "5"],
            &["1", "0.000001", "10"],
            &["-f", "%999999g", "3"],
            &["x"],
            &[],
        ] {
            assert!(seq(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn jq_loops_and_numbers() {
        for ok in [
            ".scripts",
            "[range(10)]",
            "[range(0; 100; 5)]",
            ".[] | select(.n > 3)",
            "..|numbers",
            "recurse",
            "\"repeat 1e99\"",
            ".a1e9",
            "length > 3",
        ] {
            assert!(jq_filter(ok).is_ok(), "{ok}");
        }
        for bad in [
            "range(1e9)",
            "[range(0; 1000000000)]",
            "range(.n)",
            "repeat(1)",
            "last(range(1;2)) | while(true; .)",
            "recurse(.+1)",
            "def f: f; f",
            "null | .[999999999] = 1",
            "[.[]] | combinations",
            "until(false; .)",
        ] {
            assert!(jq_filter(bad).is_err(), "{bad}");
        }
    }
}
