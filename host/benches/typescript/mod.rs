//! The transforms benchmark side by side with the TypeScript bridge (`--typescript DIR`).
//!
//! DIR is a checkout of the public OmniRoute project, whose `devin-cli-agentic` provider is the
//! TypeScript bridge this project replaces. Nothing of it is copied here: the benchmark writes
//! a small entry module that re-exports its transforms from the checkout, bundles that with
//! `harness.ts` (this directory) using esbuild (through `npx`, from the npm registry), and runs
//! the bundle in Node on the same inputs the wasm rows get. Rounds alternate between Node and
//! the wasm rows, so both see the same machine state; the verdict is the median round's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The esbuild release the harness is bundled with.
const ESBUILD: &str = "esbuild@0.24.2";
/// Where the TypeScript bridge's transforms live in an OmniRoute checkout.
const TRANSFORMS: &str = "open-sse/executors/devin-agentic";
/// The executor, which holds the narration check (a private function, read out of the file).
const EXECUTOR: &str = "open-sse/executors/devin-cli-agentic.ts";
const NARRATION_FN: &str = "function describesUnexecutedToolIntent(";

/// The inputs, as the components get them.
pub(crate) struct Inputs<'a> {
    pub(crate) small: &'a str,
    /// The small turn's text reply.
    pub(crate) small_text: &'a str,
    pub(crate) claude: &'a str,
    pub(crate) megabyte: &'a str,
    /// The tools text the serializer hands on to `envelope.parse`.
    pub(crate) tools: &'a str,
    pub(crate) tool_output: &'a str,
    pub(crate) text: &'a str,
    /// The tool reply's input, as JSON text.
    pub(crate) tool_input: &'a str,
}

/// A bundled harness, ready to run.
pub(crate) struct Harness {
    work: tempfile::TempDir,
    /// Whether the checkout's narration check was found (its row is left out otherwise).
    pub(crate) narration: bool,
}

/// `--typescript DIR` from the benchmark's arguments, else `DEVIN_BRIDGE_BENCH_TYPESCRIPT`.
pub(crate) fn checkout_from_args() -> Option<PathBuf> {
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--typescript" {
            return args.next().map(PathBuf::from);
        }
        if let Some(dir) = arg.strip_prefix("--typescript=") {
            return Some(PathBuf::from(dir));
        }
    }
    std::env::var_os("DEVIN_BRIDGE_BENCH_TYPESCRIPT")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
}

impl Harness {
    /// Writes the inputs and the entry modules, and bundles the harness.
    pub(crate) fn prepare(checkout: &Path, inputs: &Inputs<'_>) -> Result<Self, String> {
        let checkout = checkout
            .canonicalize()
            .map_err(|e| format!("{}: {e}", checkout.display()))?;
        let transforms = checkout.join(TRANSFORMS);
        for file in [
            "serializer.ts",
            "toolParser.ts",
            "anthropicResponse.ts",
            "types.ts",
        ] {
            if !transforms.join(file).is_file() {
                return Err(format!(
                    "{} has no {TRANSFORMS}/{file}: not an OmniRoute checkout with the devin-cli-agentic provider",
                    checkout.display()
                ));
            }
        }
        let work = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
        let write = |name: &str, text: &str| {
            std::fs::write(work.path().join(name), text).map_err(|e| format!("{name}: {e}"))
        };
        let quoted = |file: &str| {
            serde_json::to_string(&transforms.join(file).to_string_lossy()).unwrap_or_default()
        };
        write(
            "omniroute.ts",
            &format!(
                "export {{ serializeAnthropicForDevin }} from {};\n\
                 export {{ parseDevinToolRequest }} from {};\n\
                 export {{ buildClaudeSseFrames, buildClaudeTextResponse, buildClaudeToolUseResponse }} from {};\n",
                quoted("serializer.ts"),
                quoted("toolParser.ts"),
                quoted("anthropicResponse.ts"),
            ),
        )?;
        let narration = std::fs::read_to_string(checkout.join(EXECUTOR))
            .ok()
            .and_then(|source| function_text(&source, NARRATION_FN));
        write(
            "narration.ts",
            &match &narration {
                Some(function) => format!(
                    "{function}\nexport const narration: ((text: string) => boolean) | undefined = describesUnexecutedToolIntent;\n"
                ),
                None => "export const narration: ((text: string) => boolean) | undefined = undefined;\n".into(),
            },
        )?;
        write("harness.ts", include_str!("harness.ts"))?;
        let mut manifest = serde_json::Map::new();
        for (key, text) in [
            ("small", inputs.small),
            ("smallText", inputs.small_text),
            ("claude", inputs.claude),
            ("megabyte", inputs.megabyte),
            ("tools", inputs.tools),
            ("toolOutput", inputs.tool_output),
            ("text", inputs.text),
            ("toolInput", inputs.tool_input),
        ] {
            let file = format!("input-{key}");
            write(&file, text)?;
            manifest.insert(
                key.into(),
                work.path()
                    .join(&file)
                    .to_string_lossy()
                    .into_owned()
                    .into(),
            );
        }
        write(
            "inputs.json",
            &serde_json::Value::Object(manifest).to_string(),
        )?;
        let bundled = Command::new("npx")
            .args([
                "--yes",
                ESBUILD,
                "harness.ts",
                "--bundle",
                "--platform=node",
            ])
            .args([
                "--format=esm",
                "--outfile=harness.mjs",
                "--log-level=warning",
            ])
            .current_dir(work.path())
            .status()
            .map_err(|e| format!("npx (Node and npm are needed): {e}"))?;
        if !bundled.success() {
            return Err(format!(
                "bundling the harness with {ESBUILD} failed: {bundled}"
            ));
        }
        Ok(Self {
            work,
            narration: narration.is_some(),
        })
    }

    /// One Node run: row name -> microseconds.
    pub(crate) fn run(&self) -> Result<BTreeMap<String, f64>, String> {
        let output = Command::new("node")
            .arg("harness.mjs")
            .arg("inputs.json")
            .current_dir(self.work.path())
            .output()
            .map_err(|e| format!("node: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "the TypeScript harness failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
        }
        serde_json::from_slice(&output.stdout)
            .map_err(|e| format!("the TypeScript harness printed no timings: {e}"))
    }

    /// `node --version`, for the table's heading.
    pub(crate) fn node_version() -> String {
        Command::new("node")
            .arg("--version")
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_else(|| "node ?".into())
    }
}

/// The text of the top-level function that starts with `head`, through its closing brace (the
/// first line that is exactly `}` after it).
fn function_text(source: &str, head: &str) -> Option<String> {
    let start = source.find(head)?;
    let rest = &source[start..];
    let end = rest.find("\n}\n")?;
    Some(rest[..end + 2].to_owned())
}
