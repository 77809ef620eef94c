//! Printing a one-shot command's report (`client-env`, `safeguard explain`): a leaf module the
//! commands share.

/// Writes a one-shot command's report to stdout: success, or failure when stdout is gone (a
/// closed pipe), so a script never takes a cut report for a whole one.
pub(crate) fn print_report(text: &str) -> std::process::ExitCode {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(_) => std::process::ExitCode::FAILURE,
    }
}
