//! Building the transform components: core wasm modules for `wasm32-unknown-unknown`, turned
//! into components in-process with `wit-component`, checked, pre-initialised (the transforms,
//! by the `devin-bridge-preinit` binary), digested and listed in a manifest.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use devin_bridge_types::TransformKind;

use crate::workspace::{build_workspace_tool, run, without_lint_driver, workspace_root};

/// A component to build: its cargo package (the core module is the package's library, named
/// as cargo names it, `-` as `_`), the output name, whether it may import anything (only test
/// components may), and whether it is pre-initialised (the transforms are: `tools/preinit`
/// holds their warm-up calls; test components are not, they must stay as their source
/// describes them).
pub(crate) struct Spec {
    pub package: String,
    pub name: String,
    pub may_import: bool,
    pub preinit: bool,
}

impl Spec {
    fn test(package: &str, name: &str, may_import: bool) -> Self {
        Spec {
            package: package.to_owned(),
            name: name.to_owned(),
            may_import,
            preinit: false,
        }
    }

    /// The file stem of the package's library, as cargo writes it.
    pub(crate) fn lib(&self) -> String {
        self.package.replace('-', "_")
    }
}

/// Every transform (`TransformKind::ALL`): built from its component package
/// (`devin-bridge-<name>-component`, the export shell over the library), importing nothing,
/// pre-initialised.
pub(crate) fn transforms() -> Vec<Spec> {
    TransformKind::ALL
        .iter()
        .map(|kind| Spec {
            package: kind.component_package(),
            name: kind.name().to_owned(),
            may_import: false,
            preinit: true,
        })
        .collect()
}

/// Components for the runtime tests: faulty ones, a WASI importer the host must refuse, and a
/// contract-compatible twin of the transforms.
pub(crate) fn test_components() -> Vec<Spec> {
    vec![
        Spec::test(
            "test-component-misbehaving",
            "misbehaving-serializer",
            false,
        ),
        Spec::test("test-component-wrong-answers", "wrong-answers", false),
        Spec::test("test-component-twin", "twin", false),
        Spec::test("test-component-wasi-probe", "wasi-probe-serializer", true),
    ]
}

/// The cargo profile of every component (in the workspace manifest): `wasm` (LTO, one codegen
/// unit). The transforms ship and are built for speed and size; the test components are built
/// the same way, in the same target directory, so they reuse the standard library and the
/// transform libraries the transforms' build compiled, and only their own crates and links are
/// left to build.
const PROFILE: &str = "wasm";

const TARGET: &str = "wasm32-unknown-unknown";
/// Debian's rustc (its `rustc-web` package carries the wasm targets) and where its
/// standard-library source lives.
const SYSTEM_RUSTC: &str = "/usr/bin/rustc";
const SYSTEM_CARGO: &str = "/usr/bin/cargo";
const SYSTEM_RUST_SRC: &str = "/usr/lib/rustlib/src/rust/library";
const SYSTEM_PACKAGES: [&str; 4] = ["rustc-web", "cargo-web", "rust-web-src", "lld-22"];

/// How the wasm target is reached on this machine.
enum Toolchain {
    /// rustup has the target installed: a plain cargo build.
    Rustup,
    /// Debian's rustc with `-Zbuild-std` (its standard library is built for the target here),
    /// linking with `linker`.
    SystemBuildStd { linker: PathBuf },
}

fn rustup_has_target() -> bool {
    Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .map(|out| {
            out.status.success()
                && String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|l| l.trim() == TARGET)
        })
        .unwrap_or(false)
}

/// The wasm linker when Debian's rustc, cargo and standard-library source are all installed.
fn system_toolchain_ready() -> Option<PathBuf> {
    let installed = Path::new(SYSTEM_RUSTC).exists()
        && Path::new(SYSTEM_CARGO).exists()
        && Path::new(SYSTEM_RUST_SRC).exists();
    installed.then(system_wasm_linker).flatten()
}

/// The wasm linker for Debian's rustc: its `rust-lld` where the package ships that link, else
/// the `wasm-ld` of the newest installed LLVM (`lld-22` installs one); some `rustc-web` builds
/// carry no `rust-lld` link at all, and rustc's default for the target is that name.
fn system_wasm_linker() -> Option<PathBuf> {
    let rust_lld = PathBuf::from("/usr/bin/rust-lld");
    if rust_lld.exists() {
        return Some(rust_lld);
    }
    std::fs::read_dir("/usr/lib")
        .ok()?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let version: u32 = entry
                .file_name()
                .to_str()?
                .strip_prefix("llvm-")?
                .parse()
                .ok()?;
            let wasm_ld = entry.path().join("bin").join("wasm-ld");
            wasm_ld.exists().then_some((version, wasm_ld))
        })
        .max_by_key(|(version, _)| *version)
        .map(|(_, wasm_ld)| wasm_ld)
}

/// `DEVIN_BRIDGE_WASM_TOOLCHAIN=rustup|system` forces a path (to test the other one).
fn toolchain() -> Result<Toolchain> {
    match std::env::var("DEVIN_BRIDGE_WASM_TOOLCHAIN").as_deref() {
        Ok("rustup") => return Ok(Toolchain::Rustup),
        Ok("system") => {
            if let Some(linker) = system_toolchain_ready() {
                return Ok(Toolchain::SystemBuildStd { linker });
            }
        }
        _ => {}
    }
    if rustup_has_target() {
        return Ok(Toolchain::Rustup);
    }
    if let Some(linker) = system_toolchain_ready() {
        return Ok(Toolchain::SystemBuildStd { linker });
    }
    if devin_bridge_test_setup::debian::is_root() && Path::new("/usr/bin/apt-get").exists() {
        eprintln!(
            "xtask: rustup has no {TARGET} target and cannot download one here; installing Debian's Rust \
             with its standard-library source instead: apt-get install {}",
            SYSTEM_PACKAGES.join(" ")
        );
        devin_bridge_test_setup::debian::install(&SYSTEM_PACKAGES, "xtask")?;
        if let Some(linker) = system_toolchain_ready() {
            return Ok(Toolchain::SystemBuildStd { linker });
        }
    }
    bail!(
        "no way to build for {TARGET}: run `rustup target add {TARGET}`, or install Debian's packages {}",
        SYSTEM_PACKAGES.join(" ")
    )
}

/// Builds `specs` into `out_dir`, returning (name, sha256, size) for the manifest.
pub(crate) fn build(specs: &[Spec], out_dir: &Path) -> Result<Vec<(String, String, usize)>> {
    let root = workspace_root();
    let target_dir = components_target_dir();
    let toolchain = toolchain()?;
    let mut cargo = match toolchain {
        Toolchain::Rustup => {
            let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
            cargo.args(["build", "--profile", PROFILE, "--target", TARGET]);
            cargo
        }
        Toolchain::SystemBuildStd { linker } => {
            eprintln!(
                "xtask: building components with {SYSTEM_RUSTC}, -Zbuild-std and {}",
                linker.display()
            );
            let mut cargo = Command::new(SYSTEM_CARGO);
            cargo.env("CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER", &linker);
            cargo
                .args([
                    "build",
                    "--profile",
                    PROFILE,
                    "--target",
                    TARGET,
                    "-Zbuild-std=std,panic_abort",
                ])
                .env("PATH", "/usr/bin:/bin")
                .env("RUSTC", SYSTEM_RUSTC)
                .env("RUSTC_BOOTSTRAP", "1")
                .env_remove("RUSTUP_TOOLCHAIN")
                .env_remove("CARGO")
                .env_remove("RUSTC_WRAPPER");
            cargo
        }
    };
    without_lint_driver(&mut cargo)
        .current_dir(&root)
        .env("CARGO_TARGET_DIR", &target_dir)
        // 128-bit wasm SIMD (wasmtime runs it on every platform it supports) lets LLVM
        // vectorise the transforms' scans and copies.
        .env(
            "RUSTFLAGS",
            "--cfg getrandom_backend=\"custom\" -C target-feature=+simd128",
        )
        .arg("--locked");
    for spec in specs {
        cargo.args(["-p", &spec.package]);
    }
    run(&mut cargo).context("building the wasm modules")?;

    std::fs::create_dir_all(out_dir)?;
    // The plain components of the transforms wait here for pre-initialisation, and their
    // snapshots too, before they are written to `out_dir`.
    let plain_dir = target_dir.join("plain-components");
    std::fs::create_dir_all(&plain_dir)?;
    let mut to_preinit = Vec::new();
    for spec in specs {
        let core_path = target_dir
            .join(TARGET)
            .join(PROFILE)
            .join(format!("{}.wasm", spec.lib()));
        let module = std::fs::read(&core_path)
            .with_context(|| format!("reading {}", core_path.display()))?;
        check_core_module(spec, &module)?;
        let component = wit_component::ComponentEncoder::default()
            .module(&module)
            .with_context(|| {
                format!(
                    "{}: reading the component type of the core module",
                    spec.name
                )
            })?
            .validate(true)
            .encode()
            .with_context(|| format!("{}: encoding the component", spec.name))?;
        let imports = component_imports(&component)?;
        if !spec.may_import && !imports.is_empty() {
            bail!(
                "{}: a transform must import nothing, but it imports {}",
                spec.name,
                imports.join(", ")
            );
        }
        let file = format!("{}.wasm", spec.name);
        if spec.preinit {
            let plain = plain_dir.join(&file);
            std::fs::write(&plain, &component)?;
            let snapshot = plain_dir.join(format!("{}.preinit.wasm", spec.name));
            to_preinit.push((spec.name.as_str(), plain, snapshot));
        } else {
            write_if_changed(&out_dir.join(&file), &component)?;
        }
    }
    preinitialize(&root, &to_preinit)?;
    for (name, _, snapshot) in &to_preinit {
        let bytes =
            std::fs::read(snapshot).with_context(|| format!("reading {}", snapshot.display()))?;
        write_if_changed(&out_dir.join(format!("{name}.wasm")), &bytes)?;
    }

    let mut built = Vec::new();
    for spec in specs {
        let out = out_dir.join(format!("{}.wasm", spec.name));
        let component =
            std::fs::read(&out).with_context(|| format!("reading {}", out.display()))?;
        let sha = hex::encode(Sha256::digest(&component));
        eprintln!(
            "xtask: {:<26} {:>9} bytes  sha256 {sha}",
            spec.name,
            component.len()
        );
        built.push((spec.name.clone(), sha, component.len()));
    }
    Ok(built)
}

/// Writes `bytes` to `path` unless the file already holds exactly them: an unchanged
/// component keeps its modification time, so the host's build script, which watches the
/// components it embeds, does not make cargo compile the host again for nothing.
pub(crate) fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<()> {
    if std::fs::read(path).is_ok_and(|current| current == bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// The target directory of every component, `target/wasm-build/components`. A separate one:
/// the wasm build uses other RUSTFLAGS (and maybe another rustc), which would otherwise
/// invalidate the host build every time. One for all components: a component crate is a
/// cdylib and nothing else, and the libraries components embed are rlibs and nothing else, so
/// no unit of one build overwrites a file of another (a library that was also a cdylib would
/// write its component under the same unhashed name whatever its features).
fn components_target_dir() -> PathBuf {
    workspace_root()
        .join("target")
        .join("wasm-build")
        .join("components")
}

/// The dep-info files cargo wrote beside the core modules of `specs` (each names every source
/// file the module was built from).
pub(crate) fn dep_infos(specs: &[Spec]) -> Vec<PathBuf> {
    let modules = components_target_dir().join(TARGET).join(PROFILE);
    specs
        .iter()
        .map(|spec| modules.join(format!("{}.d", spec.lib())))
        .collect()
}

/// Pre-initialises each (name, plain component, output) with `devin-bridge-preinit`, built
/// first. Nothing to do for an empty list.
///
/// It is built as `cargo build --workspace --bin devin-bridge-preinit`, not `cargo run -p
/// devin-bridge-preinit`: cargo picks the features of every dependency from the packages a
/// command names, and naming the whole workspace gives wasmtime and everything below it the
/// features `cargo build --workspace --bins` and `cargo test --workspace` give them, so the
/// one wasmtime this compiles is the one the host and the tests link (`cargo run -p` alone
/// would compile a second one, with fewer features in its dependencies).
fn preinitialize(root: &Path, jobs: &[(&str, PathBuf, PathBuf)]) -> Result<()> {
    if jobs.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = jobs.iter().map(|(name, _, _)| *name).collect();
    eprintln!(
        "xtask: pre-initialising {} with devin-bridge-preinit (cargo build --workspace --bin \
         devin-bridge-preinit; its first build compiles wasmtime, which the host then shares: \
         several minutes)",
        names.join(", ")
    );
    let mut preinit = Command::new(build_workspace_tool("devin-bridge-preinit")?);
    preinit.arg("--root").arg(root);
    for (name, plain, out) in jobs {
        preinit.arg(name).arg(plain).arg(out);
    }
    run(&mut preinit).context("pre-initialising the transform components")
}

/// The core module must export `cabi_realloc` (wit-bindgen's allocator) and import nothing.
fn check_core_module(spec: &Spec, module: &[u8]) -> Result<()> {
    let mut has_realloc = false;
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload? {
            wasmparser::Payload::ExportSection(exports) => {
                for export in exports {
                    if export?.name == "cabi_realloc" {
                        has_realloc = true;
                    }
                }
            }
            wasmparser::Payload::ImportSection(imports) if !spec.may_import => {
                // `[export]<interface>` imports are the canonical built-ins of the resources
                // the module itself exports (`[resource-new]`, `[resource-drop]`, ...):
                // `wit-component` turns them into `resource.new`/`resource.drop` of the
                // component, not imports (the component's imports are checked after encoding).
                let mut imports = imports.into_imports();
                let first = loop {
                    match imports.next().transpose()? {
                        Some(import) if import.module.starts_with("[export]") => continue,
                        other => break other,
                    }
                };
                if let Some(first) = first {
                    bail!(
                        "{}: the core module imports {}::{} (a transform must import nothing)",
                        spec.name,
                        first.module,
                        first.name
                    );
                }
            }
            _ => {}
        }
    }
    if !has_realloc {
        bail!(
            "{}: the core module does not export cabi_realloc",
            spec.name
        );
    }
    Ok(())
}

/// Imports that grant the component something: any imported interface with functions or
/// resources. Interfaces that only define types (our shared `types` records) are imported by
/// wit-component's encoding as type-only instances; they carry no capability, and the host
/// satisfies them with an empty instance.
fn component_imports(component: &[u8]) -> Result<Vec<String>> {
    let wit_parser::decoding::DecodedWasm::Component(resolve, world) =
        wit_component::decode(component)?
    else {
        bail!("not a component");
    };
    let mut granted = Vec::new();
    for (key, item) in &resolve.worlds[world].imports {
        let name = resolve.name_world_key(key);
        match item {
            wit_parser::WorldItem::Interface { id, .. } => {
                let interface = &resolve.interfaces[*id];
                let has_resource = interface
                    .types
                    .values()
                    .any(|ty| matches!(resolve.types[*ty].kind, wit_parser::TypeDefKind::Resource));
                if !interface.functions.is_empty() || has_resource {
                    granted.push(name);
                }
            }
            wit_parser::WorldItem::Function(..) => granted.push(name),
            wit_parser::WorldItem::Type { .. } => {}
        }
    }
    Ok(granted)
}

/// Writes `manifest.json`: every component's name, file, sha256 and size, and its golden
/// corpus, copied from `tests/fixtures/<name>/` to `corpus/<name>/` beside the components,
/// each file with its sha256. The host self-tests a component of this set against this
/// corpus (see `crates/engine/src/corpus.rs`), so the corpus travels with the set.
pub(crate) fn write_manifest(out_dir: &Path, built: &[(String, String, usize)]) -> Result<PathBuf> {
    let mut components = Vec::new();
    for (name, sha, size) in built {
        let corpus = ship_corpus(out_dir, name)?;
        eprintln!("xtask: {name:<26} corpus of {} cases", corpus.len());
        components.push(serde_json::json!({
            "name": name,
            "file": format!("{name}.wasm"),
            "sha256": sha,
            "size": size,
            "corpus": corpus,
        }));
    }
    let manifest = out_dir.join("manifest.json");
    write_if_changed(
        &manifest,
        &serde_json::to_vec_pretty(&serde_json::json!({ "components": components }))?,
    )?;
    Ok(manifest)
}

/// Copies `tests/fixtures/<name>/*.json` to `out_dir/corpus/<name>/` (replacing what was
/// there) and returns `[{file, sha256}]` in file-name order.
fn ship_corpus(out_dir: &Path, name: &str) -> Result<Vec<serde_json::Value>> {
    let source = workspace_root().join("tests").join("fixtures").join(name);
    let target = out_dir.join("corpus").join(name);
    if target.exists() {
        std::fs::remove_dir_all(&target)
            .with_context(|| format!("removing the old {}", target.display()))?;
    }
    std::fs::create_dir_all(&target)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&source)
        .with_context(|| format!("reading {}", source.display()))?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<std::io::Result<_>>()?;
    files.retain(|path| path.extension().is_some_and(|ext| ext == "json"));
    files.sort();
    if files.is_empty() {
        bail!("{}: no golden fixtures to ship", source.display());
    }
    let mut listed = Vec::new();
    for path in files {
        let file_name = path
            .file_name()
            .and_then(|name| name.to_str())
            .with_context(|| format!("{}: not a UTF-8 file name", path.display()))?;
        let bytes = std::fs::read(&path)?;
        std::fs::write(target.join(file_name), &bytes)?;
        listed.push(serde_json::json!({
            "file": format!("corpus/{name}/{file_name}"),
            "sha256": hex::encode(Sha256::digest(&bytes)),
        }));
    }
    Ok(listed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A core module with one imported function (`module`::`name`, type `(i32) -> i32`) and
    /// one defined function exported as `cabi_realloc`.
    fn core_module(module: &str, name: &str) -> Vec<u8> {
        fn vector(out: &mut Vec<u8>, bytes: &[u8]) {
            out.push(u8::try_from(bytes.len()).expect("short"));
            out.extend_from_slice(bytes);
        }
        fn section(out: &mut Vec<u8>, id: u8, body: &[u8]) {
            out.push(id);
            vector(out, body);
        }
        let mut wasm = b"\0asm\x01\0\0\0".to_vec();
        section(&mut wasm, 1, &[1, 0x60, 1, 0x7f, 1, 0x7f]);
        let mut import = vec![1];
        vector(&mut import, module.as_bytes());
        vector(&mut import, name.as_bytes());
        import.extend_from_slice(&[0, 0]);
        section(&mut wasm, 2, &import);
        section(&mut wasm, 3, &[1, 0]);
        let mut export = vec![1];
        vector(&mut export, b"cabi_realloc");
        export.extend_from_slice(&[0, 1]);
        section(&mut wasm, 7, &export);
        section(&mut wasm, 10, &[1, 4, 0, 0x20, 0, 0x0b]);
        wasm
    }

    #[test]
    fn an_unchanged_component_is_not_rewritten_and_a_changed_one_is() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("serializer.wasm");
        write_if_changed(&path, b"one").expect("first write");
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let file = std::fs::File::options()
            .write(true)
            .open(&path)
            .expect("open");
        file.set_modified(old).expect("set mtime");
        drop(file);
        let modified = || {
            std::fs::metadata(&path)
                .and_then(|meta| meta.modified())
                .expect("mtime")
        };
        write_if_changed(&path, b"one").expect("same bytes");
        assert_eq!(modified(), old, "the same bytes were written again");
        write_if_changed(&path, b"two").expect("new bytes");
        assert_ne!(modified(), old);
        assert_eq!(std::fs::read(&path).expect("read"), b"two");
    }

    #[test]
    fn a_transform_may_use_the_built_ins_of_its_own_resources_and_import_nothing_else() {
        let envelope = &transforms()[TransformKind::Envelope.index()];
        let own = core_module(
            "[export]devin-bridge:transforms/envelope@0.1.0",
            "[resource-new]reply-stream",
        );
        check_core_module(envelope, &own).expect("its own resource's built-in");
        let imported = core_module("wasi_snapshot_preview1", "fd_write");
        let refused = check_core_module(envelope, &imported).expect_err("an import");
        assert!(
            refused
                .to_string()
                .contains("wasi_snapshot_preview1::fd_write"),
            "{refused}"
        );
    }
}
