//! `cargo xtask image`: the container images, built without any image registry.
//!
//! - `devin-bridge:offline` (bridge and guards): one layer holding the host and the offline
//!   agent built on this machine, exactly the shared libraries they link (found with `ldd`),
//!   the components, the policies, and `/etc/passwd` with `bridge` (10001, the host) and
//!   `bridge-agent` (10002, every agent process). No shell, no package manager.
//!   The same image is tagged `devin-bridge:outpost` for the outpost workers
//!   (`deploy/kubernetes`).
//! - `devin-bridge-proxy:haproxy`: the same Debian root filesystem plus Debian's `haproxy`
//!   package, the balancer of the `replicas` profile; user `bridge` (10001).
//! - `devin-bridge-claude:<version>`: a Debian root filesystem made with `debootstrap` from the
//!   mirror this machine's apt uses, plus this machine's `node`/`npm` and the pinned Claude
//!   Code binary; user `bridge` (10001).
//!
//! Each image is written as a `docker save` archive (a layer tar made with GNU tar: sorted
//! names, mtime 0, numeric owners; a config with a fixed creation date) and loaded with
//! `docker load`, so the bridge image's id depends only on the bytes that go in: the same
//! binaries give the same id.

use std::fs;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::workspace::{run, workspace_root};

pub(crate) const BRIDGE_TAG: &str = "devin-bridge:offline";
/// The balancer of the `replicas` profile.
pub(crate) const PROXY_TAG: &str = "devin-bridge-proxy:haproxy";
/// The same image under the name the outpost workers' Kubernetes manifests use.
pub(crate) const OUTPOST_TAG: &str = "devin-bridge:outpost";
pub(crate) const HOST_UID: u32 = 10001;
pub(crate) const AGENT_UID: u32 = 10002;

/// The Claude image's tag (pinned Claude Code version).
pub(crate) fn claude_tag() -> String {
    format!(
        "devin-bridge-claude:{}",
        devin_bridge_test_setup::claude_code::VERSION
    )
}

/// What `docker load` made of one archive.
pub(crate) struct Built {
    pub tag: String,
    pub id: String,
    pub layer_bytes: u64,
}

/// Image runtime settings (the parts of an OCI config we use).
struct Config<'a> {
    user: &'a str,
    entrypoint: Vec<&'a str>,
    cmd: Vec<&'a str>,
    env: Vec<String>,
    workdir: &'a str,
}

fn images_dir() -> PathBuf {
    workspace_root().join("target").join("images")
}

/// Builds both images (the host binaries must already be built) and prints their ids.
pub(crate) fn build_images(components: &Path) -> Result<Vec<Built>> {
    require_root()?;
    require_docker()?;
    let out = images_dir();
    fs::create_dir_all(&out)?;
    let bridge = build_bridge_image(components, &out)?;
    // `devin-bridge outpost start` needs nothing the bridge image lacks: the binary, the
    // components (DEVIN_BRIDGE_COMPONENTS) and a non-root user.
    run(Command::new("docker").args(["tag", &bridge.id, OUTPOST_TAG]))?;
    let claude = build_claude_image(&out)?;
    let proxy = build_proxy_image(&out)?;
    println!("{:<34} {:<73} {:>10}", "image", "id", "layer MiB");
    for built in [&bridge, &claude, &proxy] {
        println!(
            "{:<34} {:<73} {:>10.1}",
            built.tag,
            built.id,
            built.layer_bytes as f64 / (1 << 20) as f64
        );
    }
    Ok(vec![bridge, claude, proxy])
}

/// Builds the bridge image once more from the same inputs; `docker load` of the same bytes is
/// a no-op, so this returns the id the inputs determine.
pub(crate) fn rebuild_bridge_image(components: &Path) -> Result<Built> {
    build_bridge_image(components, &images_dir())
}

fn require_root() -> Result<()> {
    if !devin_bridge_test_setup::debian::is_root() {
        bail!("building the images needs root (file owners 10001/10002 in the layers, debootstrap, docker)");
    }
    Ok(())
}

pub(crate) fn require_docker() -> Result<()> {
    let info = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .context("the docker CLI is missing: apt-get install docker.io")?;
    if !info.status.success() {
        bail!(
            "the Docker daemon does not answer ({}): start it (as root: `dockerd &`)",
            String::from_utf8_lossy(&info.stderr).trim()
        );
    }
    Ok(())
}

fn fresh_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir)?;
    Ok(())
}

fn dir_with(dir: &Path, mode: u32, owner: u32) -> Result<()> {
    fs::create_dir_all(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(mode))?;
    chown(dir, Some(owner), Some(owner))?;
    Ok(())
}

fn build_bridge_image(components: &Path, out: &Path) -> Result<Built> {
    let root = workspace_root();
    let staging = out.join("bridge-rootfs");
    fresh_dir(&staging)?;
    fs::set_permissions(&staging, fs::Permissions::from_mode(0o755))?;
    let bin = staging.join("usr/local/bin");
    fs::create_dir_all(&bin)?;
    for name in ["devin-bridge", "mock-devin"] {
        let built = root.join("target/debug").join(name);
        if !built.exists() {
            bail!("{} is not built", built.display());
        }
        stage_binary(&built, &bin.join(name), &staging)?;
    }
    let opt = staging.join("opt/devin-bridge");
    copy_tree(components, &opt.join("components"), &|path| {
        // The deliberately faulty test components stay out of the image.
        path.file_name().is_some_and(|name| name != "test")
    })?;
    copy_tree(&root.join("policies"), &opt.join("policies"), &|_| true)?;
    let etc = staging.join("etc");
    fs::create_dir_all(&etc)?;
    fs::write(
        etc.join("passwd"),
        format!(
            "root:x:0:0:root:/root:/usr/sbin/nologin\n\
             bridge:x:{HOST_UID}:{HOST_UID}:devin-bridge host:/nonexistent:/usr/sbin/nologin\n\
             bridge-agent:x:{AGENT_UID}:{AGENT_UID}:devin-bridge agent:/home/bridge:/usr/sbin/nologin\n"
        ),
    )?;
    fs::write(
        etc.join("group"),
        format!("root:x:0:\nbridge:x:{HOST_UID}:\nbridge-agent:x:{AGENT_UID}:\n"),
    )?;
    fs::write(
        etc.join("nsswitch.conf"),
        "passwd: files\ngroup: files\nhosts: files dns\n",
    )?;
    dir_with(&staging.join("tmp"), 0o1777, 0)?;
    // Mount points of the compose file's tmpfs mounts, with the owners they get there.
    dir_with(&staging.join("home/bridge"), 0o700, AGENT_UID)?;
    dir_with(&staging.join("run/devin-bridge"), 0o700, HOST_UID)?;
    dir_with(&staging.join("run/devin-bridge-secrets"), 0o700, HOST_UID)?;
    let config = Config {
        user: "10001:10001",
        entrypoint: vec!["/usr/local/bin/devin-bridge"],
        cmd: vec![
            "serve",
            "--policy",
            "/opt/devin-bridge/policies/container-offline.toml",
        ],
        env: vec![
            "PATH=/usr/local/bin:/usr/bin:/bin".into(),
            "DEVIN_BRIDGE_COMPONENTS=/opt/devin-bridge/components".into(),
            "XDG_CACHE_HOME=/run/devin-bridge/cache".into(),
            "LANG=C.UTF-8".into(),
        ],
        workdir: "/",
    };
    load_archive(&staging, &config, BRIDGE_TAG, &out.join("bridge"))
}

/// Copies a binary without its debug sections, and every shared library it needs at the
/// path `ldd` names.
fn stage_binary(source: &Path, dest: &Path, staging: &Path) -> Result<()> {
    run(Command::new("objcopy")
        .arg("--strip-debug")
        .arg(source)
        .arg(dest))?;
    fs::set_permissions(dest, fs::Permissions::from_mode(0o755))?;
    for library in shared_libraries(source)? {
        let target = staging.join(library.strip_prefix("/").unwrap_or(&library));
        if target.exists() {
            continue;
        }
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent)?;
        }
        // `fs::copy` follows symlinks: the file's content lands at the name the loader uses.
        fs::copy(&library, &target).with_context(|| format!("copying {}", library.display()))?;
        fs::set_permissions(&target, fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

/// The absolute library paths of `ldd BINARY` (the loader included).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = Command::new("ldd").arg(binary).output()?;
    if !output.status.success() {
        bail!("ldd {} failed", binary.display());
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .filter_map(|line| {
            let path = match line.split_once("=>") {
                Some((_, rest)) => rest.trim(),
                None => line.trim(),
            };
            let path = path.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

fn copy_tree(from: &Path, to: &Path, keep: &dyn Fn(&Path) -> bool) -> Result<()> {
    fs::create_dir_all(to)?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))?;
    let mut entries: Vec<_> = fs::read_dir(from)
        .with_context(|| format!("reading {}", from.display()))?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        if !keep(&path) {
            continue;
        }
        let dest = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&path, &dest, keep)?;
        } else {
            fs::copy(&path, &dest)?;
            fs::set_permissions(&dest, fs::Permissions::from_mode(0o644))?;
        }
    }
    Ok(())
}

fn build_claude_image(out: &Path) -> Result<Built> {
    let claude = crate::workspace::claude_code()?;
    let base = debian_rootfs(out)?;
    let staging = out.join("claude-rootfs");
    fresh_dir(&staging)?;
    run(Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", base.display()))
        .arg(&staging))?;
    let bin = staging.join("usr/local/bin");
    fs::create_dir_all(&bin)?;
    fs::copy(&claude, bin.join("claude"))?;
    fs::set_permissions(bin.join("claude"), fs::Permissions::from_mode(0o755))?;
    // node and npm from this machine (the runtime the project's tests already use).
    let node = which("node")?;
    fs::copy(&node, bin.join("node"))?;
    let npm_cli = fs::canonicalize(which("npm")?)?;
    let npm_root = npm_cli
        .ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "npm"))
        .context("cannot find npm's package directory")?
        .to_path_buf();
    let npm_dest = staging.join("usr/local/lib/node_modules/npm");
    fs::create_dir_all(npm_dest.parent().context("npm parent")?)?;
    run(Command::new("cp").arg("-a").arg(&npm_root).arg(&npm_dest))?;
    for (name, script) in [("npm", "npm-cli.js"), ("npx", "npx-cli.js")] {
        let link = bin.join(name);
        let _ = fs::remove_file(&link);
        std::os::unix::fs::symlink(format!("../lib/node_modules/npm/bin/{script}"), &link)?;
    }
    let passwd = staging.join("etc/passwd");
    let mut users = fs::read_to_string(&passwd)?;
    users.push_str(&format!(
        "bridge:x:{HOST_UID}:{HOST_UID}:Claude Code:/home/bridge:/bin/bash\n"
    ));
    fs::write(&passwd, users)?;
    let group = staging.join("etc/group");
    let mut groups = fs::read_to_string(&group)?;
    groups.push_str(&format!("bridge:x:{HOST_UID}:\n"));
    fs::write(&group, groups)?;
    dir_with(&staging.join("home/bridge"), 0o700, HOST_UID)?;
    dir_with(&staging.join("workspace"), 0o755, HOST_UID)?;
    let tag = claude_tag();
    let config = Config {
        user: "10001:10001",
        entrypoint: vec!["/usr/local/bin/claude"],
        cmd: vec![],
        env: vec![
            "PATH=/usr/local/bin:/usr/bin:/bin".into(),
            "HOME=/home/bridge".into(),
            "LANG=C.UTF-8".into(),
        ],
        workdir: "/workspace",
    };
    load_archive(&staging, &config, &tag, &out.join("claude"))
}

/// The Debian root filesystem plus Debian's `haproxy` (installed with apt inside it, from the
/// mirror it was made from), user `bridge` (10001).
fn build_proxy_image(out: &Path) -> Result<Built> {
    let base = debian_rootfs(out)?;
    let staging = out.join("proxy-rootfs");
    fresh_dir(&staging)?;
    run(Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", base.display()))
        .arg(&staging))?;
    // apt inside the root filesystem needs a resolver; the copy is removed again.
    let resolv = staging.join("etc/resolv.conf");
    let _ = fs::remove_file(&resolv);
    fs::copy("/etc/resolv.conf", &resolv).context("copying /etc/resolv.conf")?;
    // No service may start in the root filesystem while packages are installed.
    let policy_rc = staging.join("usr/sbin/policy-rc.d");
    fs::write(
        &policy_rc,
        "#!/bin/sh
exit 101
",
    )?;
    fs::set_permissions(&policy_rc, fs::Permissions::from_mode(0o755))?;
    eprintln!(
        "containers: installing haproxy into the proxy image's root filesystem (apt, once per build)"
    );
    for args in [
        vec!["apt-get", "update", "-q"],
        vec![
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "haproxy",
        ],
    ] {
        run(Command::new("chroot")
            .arg(&staging)
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    fs::remove_file(&policy_rc)?;
    fs::remove_file(&resolv)?;
    for junk in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        let dir = staging.join(junk);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
            fs::create_dir_all(&dir)?;
        }
    }
    let passwd = staging.join("etc/passwd");
    let mut users = fs::read_to_string(&passwd)?;
    users.push_str(&format!(
        "bridge:x:{HOST_UID}:{HOST_UID}:balancer:/nonexistent:/usr/sbin/nologin\n"
    ));
    fs::write(&passwd, users)?;
    let config = Config {
        user: "10001:10001",
        entrypoint: vec![],
        cmd: vec!["haproxy", "-db", "-f", "/etc/haproxy/haproxy.cfg"],
        env: vec![
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin".into(),
            "LANG=C.UTF-8".into(),
        ],
        workdir: "/",
    };
    load_archive(&staging, &config, PROXY_TAG, &out.join("proxy"))
}

fn which(program: &str) -> Result<PathBuf> {
    let path = std::env::var_os("PATH").context("no PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|file| file.is_file())
        .with_context(|| format!("{program} is not on PATH"))
}

/// A Debian root filesystem (minbase), made once with debootstrap and kept in target/images.
fn debian_rootfs(out: &Path) -> Result<PathBuf> {
    let rootfs = out.join("debian-rootfs");
    let done = out.join("debian-rootfs.complete");
    if done.exists() && rootfs.join("bin/bash").exists() {
        eprintln!(
            "containers: reusing the Debian root filesystem in {}",
            rootfs.display()
        );
        return Ok(rootfs);
    }
    let mirror = apt_mirror()?;
    let suite = os_release_codename()?;
    if Command::new("debootstrap")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("containers: installing debootstrap (apt-get install debootstrap)");
        run(Command::new("apt-get").args([
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "debootstrap",
        ]))?;
    }
    fresh_dir(&rootfs)?;
    let _ = fs::remove_file(&done);
    eprintln!(
        "containers: debootstrap --variant=minbase {suite} from {mirror} (a few minutes, once)"
    );
    run(Command::new("debootstrap")
        .args(["--variant=minbase", &suite])
        .arg(&rootfs)
        .arg(&mirror))?;
    // Nothing of the build machine's apt state or caches belongs in an image.
    for junk in ["var/cache/apt/archives", "var/lib/apt/lists"] {
        let dir = rootfs.join(junk);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
            fs::create_dir_all(&dir)?;
        }
    }
    fs::write(&done, b"")?;
    Ok(rootfs)
}

/// The first Debian mirror this machine's apt is configured with.
fn apt_mirror() -> Result<String> {
    let mut sources = Vec::new();
    for file in ["/etc/apt/sources.list"] {
        if let Ok(text) = fs::read_to_string(file) {
            sources.push(text);
        }
    }
    if let Ok(entries) = fs::read_dir("/etc/apt/sources.list.d") {
        for entry in entries.filter_map(Result::ok) {
            if let Ok(text) = fs::read_to_string(entry.path()) {
                sources.push(text);
            }
        }
    }
    for text in &sources {
        for line in text.lines().map(str::trim) {
            let url = if let Some(rest) = line.strip_prefix("URIs:") {
                rest.split_whitespace().next()
            } else if let Some(rest) = line.strip_prefix("deb ") {
                rest.split_whitespace().find(|word| word.contains("://"))
            } else {
                None
            };
            if let Some(url) = url.filter(|url| url.contains("debian") && !url.contains("security"))
            {
                return Ok(url.to_owned());
            }
        }
    }
    bail!("no Debian mirror found in this machine's apt sources")
}

fn os_release_codename() -> Result<String> {
    let text = fs::read_to_string("/etc/os-release")?;
    text.lines()
        .find_map(|line| line.strip_prefix("VERSION_CODENAME="))
        .map(|name| name.trim_matches('"').to_owned())
        .context("no VERSION_CODENAME in /etc/os-release")
}

/// Tars `staging` into one deterministic layer, writes a `docker save` archive around it and
/// loads it under `tag`.
fn load_archive(staging: &Path, config: &Config, tag: &str, work: &Path) -> Result<Built> {
    fresh_dir(work)?;
    let layer = work.join("layer.tar");
    deterministic_tar(staging, &layer)?;
    let layer_bytes = fs::metadata(&layer)?.len();
    let diff_id = format!("sha256:{}", sha256_file(&layer)?);
    let epoch = "1970-01-01T00:00:00Z";
    let image_config = json!({
        "architecture": "amd64",
        "os": "linux",
        "created": epoch,
        "config": {
            "User": config.user,
            "Entrypoint": config.entrypoint,
            "Cmd": config.cmd,
            "Env": config.env,
            "WorkingDir": config.workdir,
            "Labels": {"org.opencontainers.image.title": tag},
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": epoch, "created_by": "cargo xtask image"}],
    });
    let config_bytes = serde_json::to_vec(&image_config)?;
    let id = hex::encode(Sha256::digest(&config_bytes));
    let archive_dir = work.join("archive");
    fs::create_dir_all(archive_dir.join("layer"))?;
    fs::rename(&layer, archive_dir.join("layer/layer.tar"))?;
    fs::write(archive_dir.join(format!("{id}.json")), &config_bytes)?;
    let manifest = json!([{
        "Config": format!("{id}.json"),
        "RepoTags": [tag],
        "Layers": ["layer/layer.tar"],
    }]);
    fs::write(
        archive_dir.join("manifest.json"),
        serde_json::to_vec(&manifest)?,
    )?;
    let archive = work.join("image.tar");
    deterministic_tar(&archive_dir, &archive)?;
    fs::remove_dir_all(&archive_dir)?;
    eprintln!("containers: docker load {tag}");
    run(Command::new("docker")
        .arg("load")
        .arg("-q")
        .arg("-i")
        .arg(&archive))?;
    fs::remove_file(&archive)?;
    Ok(Built {
        tag: tag.to_owned(),
        id: format!("sha256:{id}"),
        layer_bytes,
    })
}

/// GNU tar of `dir`'s content with sorted names, mtime 0 and numeric owners: the same files
/// always give the same bytes.
fn deterministic_tar(dir: &Path, out: &Path) -> Result<()> {
    Ok(run(Command::new("tar")
        .args([
            "--sort=name",
            "--mtime=@0",
            "--numeric-owner",
            "--format=gnu",
            "-C",
        ])
        .arg(dir)
        .arg("-cf")
        .arg(out)
        .arg("."))?)
}

fn sha256_file(path: &Path) -> Result<String> {
    let mut file = fs::File::open(path)?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}
