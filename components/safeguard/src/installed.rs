//! Programs installed into the project (`node_modules`, a virtualenv) are judged by what they
//! are, not as the project's own code: `node_modules/.bin/jest` is jest and takes jest's
//! arguments; an installed program the judge does not know is flagged.
//!
//! Invariants:
//! - Only resolved paths are read here (absolute, normalized, inside a trusted directory:
//!   the caller checks); the answer depends on the path's names only.
//! - A tool is known by its place: `node_modules/.bin/NAME`, the entry file of the tool's own
//!   package (`node_modules/jest/bin/jest.js` ...), `.venv/bin/NAME` or `venv/bin/NAME`. Any
//!   other file under `node_modules`, `site-packages`, `dist-packages`, `__pypackages__` or a
//!   virtualenv is installed code the judge does not know.

/// The node tools of the safe set, as `node_modules/.bin` names them.
pub(crate) const NODE_TOOLS: [&str; 5] = ["jest", "vitest", "tsc", "eslint", "prettier"];

/// The Python programs of the safe set a virtualenv's `bin` holds.
const VENV_TOOLS: [&str; 4] = ["pytest", "py.test", "python", "python3"];

/// The entry files of the node tools' own packages, below `node_modules/`.
const NODE_ENTRIES: [(&str, &str); 7] = [
    ("jest/bin/jest.js", "jest"),
    ("jest-cli/bin/jest.js", "jest"),
    ("vitest/vitest.mjs", "vitest"),
    ("typescript/bin/tsc", "tsc"),
    ("eslint/bin/eslint.js", "eslint"),
    ("prettier/bin/prettier.cjs", "prettier"),
    ("prettier/bin-prettier.js", "prettier"),
];

/// Directory names that hold installed code.
const INSTALLED_DIRS: [&str; 7] = [
    "node_modules",
    "site-packages",
    "dist-packages",
    "__pypackages__",
    ".venv",
    "venv",
    ".tox",
];

/// What an installed path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Installed {
    /// Not below a directory of installed code.
    No,
    /// A tool of the safe set, by its program name.
    Tool(&'static str),
    /// Installed code the judge does not know (the text is the path's tail, for the
    /// explanation).
    Unknown(String),
}

/// A program run by its path (`node_modules/.bin/jest`, `.venv/bin/pytest`).
pub(crate) fn program(path: &str) -> Installed {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let Some(at) = parts.iter().position(|part| INSTALLED_DIRS.contains(part)) else {
        return Installed::No;
    };
    let rest = &parts[at..];
    let tool = match rest {
        ["node_modules", ".bin", name] => NODE_TOOLS.iter().find(|tool| *tool == name),
        [".venv" | "venv", "bin", name] => VENV_TOOLS.iter().find(|tool| *tool == name),
        _ => None,
    };
    match tool {
        Some(tool) => Installed::Tool(tool),
        None => Installed::Unknown(rest.join("/")),
    }
}

/// A script file given to `node` or `python`: a node tool's entry file is that tool; any
/// other installed file is unknown.
pub(crate) fn script(path: &str) -> Installed {
    if let Some(at) = path.rfind("/node_modules/") {
        let tail = &path[at + "/node_modules/".len()..];
        if let Some((_, tool)) = NODE_ENTRIES.iter().find(|(entry, _)| *entry == tail) {
            return Installed::Tool(tool);
        }
    }
    match program(path) {
        Installed::Tool(tool) if NODE_TOOLS.contains(&tool) => Installed::Tool(tool),
        Installed::No => Installed::No,
        Installed::Tool(_) | Installed::Unknown(_) => {
            let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            let at = parts
                .iter()
                .position(|part| INSTALLED_DIRS.contains(part))
                .unwrap_or(0);
            Installed::Unknown(parts[at..].join("/"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_by_place() {
        assert_eq!(
            program("/p/node_modules/.bin/jest"),
            Installed::Tool("jest")
        );
        assert_eq!(program("/p/.venv/bin/pytest"), Installed::Tool("pytest"));
        assert_eq!(program("/p/venv/bin/python3"), Installed::Tool("python3"));
        assert_eq!(program("/p/src/bin/x"), Installed::No);
        assert!(matches!(
            program("/p/node_modules/.bin/http-server"),
            Installed::Unknown(_)
        ));
        assert!(matches!(
            program("/p/node_modules/jest/bin/jest.js"),
            Installed::Unknown(_)
        ));
        assert!(matches!(program("/p/.venv/bin/pip"), Installed::Unknown(_)));
    }

    #[test]
    fn scripts_by_entry_file() {
        assert_eq!(
            script("/p/node_modules/jest/bin/jest.js"),
            Installed::Tool("jest")
        );
        assert_eq!(
            script("/p/node_modules/typescript/bin/tsc"),
            Installed::Tool("tsc")
        );
        assert_eq!(
            script("/p/node_modules/.bin/eslint"),
            Installed::Tool("eslint")
        );
        assert_eq!(script("/p/scripts/build.js"), Installed::No);
        assert!(matches!(
            script("/p/node_modules/http-server/bin/http-server"),
            Installed::Unknown(_)
        ));
        assert!(matches!(
            script("/p/.venv/lib/python3.12/site-packages/pip/__main__.py"),
            Installed::Unknown(_)
        ));
        assert!(matches!(
            script("/p/.venv/bin/pytest"),
            Installed::Unknown(_)
        ));
    }
}
