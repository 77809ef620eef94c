//! Creating, copying and moving files inside the trusted directories: `mkdir`, `touch`, `cp`,
//! `mv`, `tee`.
//!
//! Invariants:
//! - Every file these write goes through [`Scope::write`] (inside, not sensitive, not
//!   protected); every file `cp` only reads goes through [`Scope::read`]. A source `mv` takes
//!   away is a write of that source.
//! - The destination of `cp` and `mv` is checked both as named and, because it may be an
//!   existing directory, with each source's last name under it (`cp x/.bashrc .` writes
//!   `./.bashrc`).
//! - The judge sees names, not directory contents: a recursive copy or a move carries what its
//!   source holds. A recursive copy whose source ends in `/` or `/.` (copying the contents, not
//!   the directory), a move of `.` or `dir/.`, and either of a trusted directory itself or of a
//!   protected location are flagged, so that what arrives keeps a directory name the judge
//!   checked.
//! - Options are a closed list; modes, ownership, links and backups are not in it.

use crate::options::{self, Arg, Spec};
use crate::paths;
use crate::scope::{Effects, Scope};
use crate::shell::Word;
use crate::verdict::show;

const MKDIR: Spec = Spec {
    flags: "pv",
    values: "",
    paths: "",
    long_flags: &["parents", "verbose"],
    long_values: &[],
    long_paths: &[],
    numeric: false,
    attached: true,
};

const TOUCH: Spec = Spec {
    flags: "acmh",
    values: "dt",
    paths: "r",
    long_flags: &["no-create", "no-dereference"],
    long_values: &["date"],
    long_paths: &["reference"],
    ..MKDIR
};

const CP: Spec = Spec {
    flags: "rRapPLfnvuTHd",
    values: "",
    paths: "",
    long_flags: &[
        "recursive",
        "archive",
        "no-dereference",
        "dereference",
        "force",
        "no-clobber",
        "verbose",
        "update",
        "no-target-directory",
        "preserve",
    ],
    long_values: &[],
    long_paths: &[],
    ..MKDIR
};

const MV: Spec = Spec {
    flags: "fnvuT",
    long_flags: &[
        "force",
        "no-clobber",
        "verbose",
        "update",
        "no-target-directory",
    ],
    ..MKDIR
};

const TEE: Spec = Spec {
    flags: "aip",
    long_flags: &["append", "ignore-interrupts"],
    ..MKDIR
};

/// `mkdir`, `touch`, `tee`: every operand is written.
pub(crate) fn create(
    name: &str,
    args: &[Word],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    let spec = match name {
        "mkdir" => &MKDIR,
        "touch" => &TOUCH,
        _ => &TEE,
    };
    let parsed = options::parse(name, args, spec)?;
    for path in &parsed.paths {
        scope.read(fx, *path)?;
    }
    if parsed.operands.is_empty() && name != "tee" {
        return Err(format!("runs `{name}` without a file"));
    }
    for operand in &parsed.operands {
        scope.write(fx, *operand)?;
    }
    Ok(())
}

/// `cp SOURCE... DEST`, `mv SOURCE... DEST` (also `-t DEST SOURCE...`).
pub(crate) fn copy_or_move(
    name: &str,
    args: &[Word],
    scope: &Scope<'_>,
    fx: &mut Effects,
) -> Result<(), String> {
    // `-t DIR` names the destination first; it is taken out before the table is read (from
    // a copy of the words, so a glob among them is not taken as files: it is refused).
    let t_at = args
        .iter()
        .position(|w| !w.tilde && matches!(w.text.as_str(), "-t" | "--target-directory"));
    let copied: Vec<Word>;
    let (target, words): (Option<&Word>, &[Word]) = match t_at {
        None => (None, args),
        Some(at) => {
            let dir = args
                .get(at + 1)
                .ok_or_else(|| format!("runs `{name} -t` without a directory"))?;
            copied = args[..at].iter().chain(&args[at + 2..]).cloned().collect();
            (Some(dir), &copied)
        }
    };
    let spec = if name == "cp" { &CP } else { &MV };
    let parsed = options::parse(name, words, spec)?;
    let recursive = ["r", "R", "a", "recursive", "archive"]
        .iter()
        .any(|option| parsed.has(option));
    let (sources, dest): (&[Arg<'_>], Arg<'_>) = match target {
        Some(dir) => (&parsed.operands, Arg::from(dir)),
        None => match parsed.operands.split_last() {
            Some((dest, sources)) if !sources.is_empty() => (sources, *dest),
            _ => return Err(format!("runs `{name}` without a source and a destination")),
        },
    };
    if dest.glob {
        return Err(format!(
            "runs `{name}` with a glob as its destination: {}",
            show(dest.text)
        ));
    }
    scope.write(fx, dest)?;
    for source in sources {
        if name == "mv" {
            scope.write(fx, *source)?;
        } else {
            scope.read(fx, *source)?;
        }
        if recursive || name == "mv" {
            contents_copy(name, *source, scope)?;
        }
        // The source's own name, under a destination that may be a directory.
        let last = source
            .text
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or("");
        if !last.is_empty() && !source.glob {
            let under = format!("{}/{last}", dest.text);
            scope.write(fx, Arg::plain(&under, dest.tilde))?;
        }
    }
    Ok(())
}

/// A source whose contents, not itself, would arrive (`dir/`, `dir/.`, a trusted directory).
fn contents_copy(name: &str, source: Arg<'_>, scope: &Scope<'_>) -> Result<(), String> {
    let text = source.text;
    // BSD `cp -R dir/ dest` copies the contents of `dir`; `mv dir/ x` renames `dir` itself.
    let slash = name == "cp" && text.ends_with('/') && text.len() > 1;
    let contents = slash || text == "." || text.ends_with("/.");
    let root = scope.resolve(source).is_ok_and(|resolved| {
        resolved
            .iter()
            .any(|path| scope.ctx.trusted.iter().any(|root| root == path))
    });
    if contents || root {
        return Err(format!(
            "runs `{name}` on the contents of {}, whose names the judge cannot see",
            show(text)
        ));
    }
    if paths::protected(&format!("/{}", text.trim_end_matches('/'))).is_some() {
        return Err(format!(
            "runs `{name}` on a protected location: {}",
            show(text)
        ));
    }
    Ok(())
}
