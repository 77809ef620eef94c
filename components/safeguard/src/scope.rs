//! The working directories a simple command may run in, and what it does with files: the
//! state the shell-line judge ([`crate::line`]) hands to each program's rules
//! ([`crate::programs`], [`crate::git`]). A leaf of the judge: it knows paths and the context,
//! nothing of the shell or the programs.

use crate::context::Context;
use crate::options::Arg;
use crate::paths::{self, Access};
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

    /// A file or directory the command reads: inside and not sensitive.
    pub(crate) fn read(&self, fx: &mut Effects, arg: Arg<'_>) -> Result<(), String> {
        for path in self.resolve(arg).map_err(|p| p.sentence(Access::Read))? {
            paths::check_read(self.ctx, &path).map_err(|p| p.sentence(Access::Read))?;
            fx.reads.push(path);
        }
        Ok(())
    }

    /// A file the command writes: inside, not sensitive, not protected.
    pub(crate) fn write(&self, fx: &mut Effects, arg: Arg<'_>) -> Result<(), String> {
        for path in self.resolve(arg).map_err(|p| p.sentence(Access::Write))? {
            paths::check_write(self.ctx, &path).map_err(|p| p.sentence(Access::Write))?;
            fx.writes.push(path);
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
