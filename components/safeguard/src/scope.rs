//! The working directories a simple command may run in, and what it does with files: the
//! state the shell-line judge ([`crate::line`]) hands to each program's rules
//! ([`crate::programs`], [`crate::git`]). A leaf of the judge: it knows paths, the context and
//! the pattern checks of [`crate::rules`], nothing of the shell or the programs.
//!
//! Invariants:
//! - Every file a program reads goes through [`Scope::read`], every file it writes through
//!   [`Scope::write`], every word it hands on to code the judge does not see through
//!   [`Scope::read_unprotected`], in every working directory the command may be in.
//! - A glob word is checked there ([`check_glob`]) and recorded as taken as files
//!   ([`Effects::globbed`]); [`crate::line`] flags a glob word no program took.

use crate::context::Context;
use crate::options::Arg;
use crate::paths::{self, Access};
use crate::rules::{shell_glob_may_climb, targets_sensitive};
use crate::verdict::show;

/// What a simple command does with files, collected while judging it.
#[derive(Debug, Default)]
pub(crate) struct Effects {
    pub(crate) reads: Vec<String>,
    pub(crate) writes: Vec<String>,
    /// Writes in the project without naming files (`git commit`, `cargo fmt`).
    pub(crate) implicit_edit: bool,
    /// `cd`: where it goes.
    pub(crate) cd: Option<Vec<String>>,
    /// The glob words a program took as files (by the address and length of their text):
    /// a glob word left out of this list is flagged ([`crate::line`]).
    pub(crate) globbed: Vec<(usize, usize)>,
    /// The program runs the project's code (a package script, a build, a test runner): it may
    /// keep running and re-run what is written later when it runs in the background.
    pub(crate) runs_code: bool,
}

impl Effects {
    /// Whether the glob `word` was taken as a file ([`Effects::globbed`] sorted first, by
    /// [`Effects::sort_globbed`], so that a long line stays linear-logarithmic).
    pub(crate) fn took_glob(&self, text: &str) -> bool {
        self.globbed
            .binary_search(&(text.as_ptr() as usize, text.len()))
            .is_ok()
    }

    pub(crate) fn sort_globbed(&mut self) {
        self.globbed.sort_unstable();
    }
}

/// The working directories a command may run in.
pub(crate) struct Scope<'a> {
    pub(crate) ctx: &'a Context,
    /// `None`: unknown (no `live_cwd`).
    pub(crate) cwds: Vec<Option<String>>,
}

impl Scope<'_> {
    /// The path in every working directory.
    pub(crate) fn resolve(&self, arg: Arg<'_>) -> Result<Vec<String>, paths::Problem> {
        let mut out: Vec<String> = Vec::with_capacity(self.cwds.len());
        for cwd in &self.cwds {
            let path = paths::resolve(
                arg.text,
                arg.tilde,
                cwd.as_deref(),
                self.ctx.home.as_deref(),
            )?;
            if !out.contains(&path) {
                out.push(path);
            }
        }
        Ok(out)
    }

    /// A file or directory the command reads: inside and not sensitive. A glob word is read
    /// as the files it may match ([`check_glob`]) and recorded as taken.
    pub(crate) fn read(&self, fx: &mut Effects, arg: Arg<'_>) -> Result<(), String> {
        check_glob(arg)?;
        for path in self.resolve(arg).map_err(|p| p.sentence(Access::Read))? {
            paths::check_read(self.ctx, &path).map_err(|p| p.sentence(Access::Read))?;
            fx.reads.push(path);
        }
        take_glob(fx, arg);
        Ok(())
    }

    /// A file the command writes: inside, not sensitive, not protected.
    pub(crate) fn write(&self, fx: &mut Effects, arg: Arg<'_>) -> Result<(), String> {
        check_glob(arg)?;
        for path in self.resolve(arg).map_err(|p| p.sentence(Access::Write))? {
            paths::check_write(self.ctx, &path).map_err(|p| p.sentence(Access::Write))?;
            fx.writes.push(path);
        }
        take_glob(fx, arg);
        Ok(())
    }

    /// A file the command reads that would change what it runs if it were protected
    /// configuration (an argument handed on to a program the judge does not know, which may
    /// read or write it): inside, not sensitive, not protected. Recorded as a read.
    pub(crate) fn read_unprotected(&self, fx: &mut Effects, arg: Arg<'_>) -> Result<(), String> {
        check_glob(arg)?;
        for path in self.resolve(arg).map_err(|p| p.sentence(Access::HandOn))? {
            paths::check_write(self.ctx, &path).map_err(|p| p.sentence(Access::HandOn))?;
            fx.reads.push(path);
        }
        Ok(())
    }

    /// The command reads or runs what is in its working directory: every one it may run in
    /// must be known and inside.
    pub(crate) fn cwd_inside(&self, program: &str) -> Result<(), String> {
        for cwd in &self.cwds {
            let Some(cwd) = cwd else {
                return Err(format!(
                    "runs `{program}` and the working directory is unknown"
                ));
            };
            if paths::check_inside(self.ctx, cwd).is_err() {
                return Err(format!(
                    "runs `{program}` in a directory outside the trusted directories: {}",
                    show(cwd)
                ));
            }
        }
        Ok(())
    }
}

/// A glob word read as files: its fixed part (before the first wildcard) must not start with
/// `-` or be empty (a file named `-x` would become an option: wildcard injection), and its
/// wildcard part may not climb out (`..`, or a component such as `.*` that matches `..`) or
/// single out sensitive names.
fn check_glob(arg: Arg<'_>) -> Result<(), String> {
    if !arg.glob {
        return Ok(());
    }
    let text = arg.text;
    let wild = text.find(['*', '?', '[']).unwrap_or(text.len());
    if wild == 0 && !arg.tilde {
        return Err(format!(
            "uses a glob that starts with a wildcard ({}); a file named like an option would become one (write `./{}`)",
            show(text),
            show(text)
        ));
    }
    let tail = &text[text[..wild].rfind('/').map_or(0, |slash| slash + 1)..];
    if shell_glob_may_climb(tail) {
        return Err(format!(
            "uses a glob that may reach outside its directory: {}",
            show(text)
        ));
    }
    if let Some(what) = targets_sensitive(tail) {
        return Err(format!(
            "uses a glob that singles out sensitive files ({what}): {}",
            show(text)
        ));
    }
    Ok(())
}

fn take_glob(fx: &mut Effects, arg: Arg<'_>) {
    if arg.glob {
        fx.globbed
            .push((arg.text.as_ptr() as usize, arg.text.len()));
    }
}
