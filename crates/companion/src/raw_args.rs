//! The raw-args transport: a way for the plugin to hand arbitrary user text to the helper
//! without any shell ever seeing it.
//!
//! `raw-args-create` makes an empty private file `<data>/transport/<token>` (0600 in a 0700
//! directory) named by a 128-bit random token; the plugin writes the user's raw argument text
//! into it with its file tool, then runs `<sub> --raw-args-token <token>`. The helper opens the
//! file without following links, checks it is a regular file of this user with mode exactly
//! 0600 and at most 64 KiB of UTF-8, deletes it (each file is consumed once), and splits it
//! into arguments with POSIX-shell-like quoting and no expansion of any kind (`$`, backticks,
//! globs and `~` stay literal; `#` starts no comment).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Largest raw-args file accepted.
pub(crate) const MAX_RAW_ARGS_BYTES: u64 = 64 << 10;

/// Why a transport file could not be created, consumed or discarded.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RawArgsError {
    #[error("raw-args token must be 32 lowercase hex digits")]
    BadToken,
    #[error("raw-args file for this token does not exist (already consumed or never created)")]
    Missing,
    #[error("raw-args file is not a regular file")]
    NotRegular,
    #[error("raw-args file is not owned by the current user")]
    WrongOwner,
    #[error("raw-args file must have mode 0600, not {0:04o}")]
    WrongMode(u32),
    #[error("raw-args file is larger than {MAX_RAW_ARGS_BYTES} bytes")]
    TooLarge,
    #[error("raw-args file is not valid UTF-8")]
    NotUtf8,
    #[error("raw-args file already exists and is not empty")]
    Exists,
    #[error("raw-args text has an unterminated {0} quote")]
    Unterminated(&'static str),
    #[error("raw-args text ends with a lone backslash")]
    TrailingBackslash,
    #[error("transport directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("transport directory {0} is not private to this user")]
    NotPrivate(PathBuf),
}

impl RawArgsError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        RawArgsError::Io {
            path: path.to_owned(),
            source,
        }
    }

    /// Whether this is the caller's fault (`input`) rather than the machine's.
    pub(crate) fn is_input(&self) -> bool {
        !matches!(self, RawArgsError::Io { .. } | RawArgsError::NotPrivate(_))
    }
}

/// The directory of transport files.
pub(crate) fn transport_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("transport")
}

/// Creates `dir` (and missing parents) 0700, or checks an existing one is a directory of this
/// user with no group or other permission bits.
pub(crate) fn ensure_private_dir(dir: &Path) -> Result<(), RawArgsError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(error) => return Err(RawArgsError::io(dir, error)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| RawArgsError::io(dir, e))?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        return Err(RawArgsError::NotPrivate(dir.to_owned()));
    }
    Ok(())
}

/// A fresh 128-bit token, as 32 lowercase hex digits.
pub(crate) fn new_token() -> Result<String, RawArgsError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|error| {
        RawArgsError::io(
            Path::new("/dev/urandom"),
            std::io::Error::other(error.to_string()),
        )
    })?;
    Ok(hex::encode(bytes))
}

/// Whether `token` has the shape of one `new_token` makes.
pub(crate) fn valid_token(token: &str) -> bool {
    token.len() == 32
        && token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `raw-args-create`: a new empty 0600 file; returns its token and absolute path.
pub(crate) fn create(data_dir: &Path) -> Result<(String, PathBuf), RawArgsError> {
    let token = new_token()?;
    let path = create_with_token(data_dir, &token)?;
    Ok((token, path))
}

/// Creates the file for a given token; an existing empty file of this user with mode 0600 is
/// kept, anything else already there is refused.
pub(crate) fn create_with_token(data_dir: &Path, token: &str) -> Result<PathBuf, RawArgsError> {
    if !valid_token(token) {
        return Err(RawArgsError::BadToken);
    }
    let dir = transport_dir(data_dir);
    ensure_private_dir(data_dir)?;
    ensure_private_dir(&dir)?;
    let path = dir.join(token);
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
    {
        Ok(_) => Ok(path),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::symlink_metadata(&path).map_err(|e| RawArgsError::io(&path, e))?;
            if meta.is_file()
                && meta.len() == 0
                && meta.uid() == nix::unistd::geteuid().as_raw()
                && meta.mode() & 0o7777 == 0o600
            {
                Ok(path)
            } else {
                Err(RawArgsError::Exists)
            }
        }
        Err(error) => Err(RawArgsError::io(&path, error)),
    }
}

/// `raw-args-discard`: removes the file if it is there (idempotent).
pub(crate) fn discard(data_dir: &Path, token: &str) -> Result<bool, RawArgsError> {
    if !valid_token(token) {
        return Err(RawArgsError::BadToken);
    }
    let path = transport_dir(data_dir).join(token);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(RawArgsError::io(&path, error)),
    }
}

/// `--raw-args-token`: checks, reads and deletes the file, then splits it into arguments.
pub(crate) fn consume(data_dir: &Path, token: &str) -> Result<Vec<String>, RawArgsError> {
    if !valid_token(token) {
        return Err(RawArgsError::BadToken);
    }
    let path = transport_dir(data_dir).join(token);
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NOFOLLOW | nix::fcntl::OFlag::O_NONBLOCK).bits())
        .open(&path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(RawArgsError::Missing)
        }
        // ELOOP: the name is a symbolic link.
        Err(error) if error.raw_os_error() == Some(nix::errno::Errno::ELOOP as i32) => {
            return Err(RawArgsError::NotRegular)
        }
        Err(error) => return Err(RawArgsError::io(&path, error)),
    };
    let meta = file.metadata().map_err(|e| RawArgsError::io(&path, e))?;
    if !meta.is_file() {
        return Err(RawArgsError::NotRegular);
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err(RawArgsError::WrongOwner);
    }
    // Consume once: whatever the checks below say, this file is never read again.
    remove_if_same(&path, &meta);
    if meta.mode() & 0o7777 != 0o600 {
        return Err(RawArgsError::WrongMode(meta.mode() & 0o7777));
    }
    if meta.len() > MAX_RAW_ARGS_BYTES {
        return Err(RawArgsError::TooLarge);
    }
    let mut bytes = Vec::new();
    file.take(MAX_RAW_ARGS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| RawArgsError::io(&path, e))?;
    if bytes.len() as u64 > MAX_RAW_ARGS_BYTES {
        return Err(RawArgsError::TooLarge);
    }
    let text = String::from_utf8(bytes).map_err(|_| RawArgsError::NotUtf8)?;
    split(&text)
}

/// Removes `path` only if it still names the file that was opened.
fn remove_if_same(path: &Path, opened: &std::fs::Metadata) {
    if let Ok(now) = std::fs::symlink_metadata(path) {
        if now.dev() == opened.dev() && now.ino() == opened.ino() {
            if let Err(error) = std::fs::remove_file(path) {
                tracing::warn!(%error, "cannot remove a consumed raw-args file");
            }
        }
    }
}

/// Splits text into words like a POSIX shell would, without any expansion: whitespace
/// separates words; `'...'` is literal; inside `"..."` a backslash escapes only `"`, `\`,
/// `$`, a backtick or a newline; outside quotes a backslash makes the next character literal
/// (a backslash-newline joins lines). `$`, backticks, `*`, `?`, `~` and `#` are ordinary.
pub(crate) fn split(text: &str) -> Result<Vec<String>, RawArgsError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' | '\r' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(RawArgsError::Unterminated("single")),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('\n') => {}
                            Some(c @ ('"' | '\\' | '$' | '`')) => word.push(c),
                            Some(c) => {
                                word.push('\\');
                                word.push(c);
                            }
                            None => return Err(RawArgsError::Unterminated("double")),
                        },
                        Some(c) => word.push(c),
                        None => return Err(RawArgsError::Unterminated("double")),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    word.push(c);
                }
                None => return Err(RawArgsError::TrailingBackslash),
            },
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A temporary data directory with the mode the helper demands (0700).
    fn private_tempdir() -> tempfile::TempDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod");
        dir
    }
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn splitting_follows_shell_quoting_without_expansion() {
        let words =
            split("--write -- 'it''s' \"a \\\"b\\\" $HOME `id`\" ~/x *.rs #1 a\\ b \"\" \\$y\n")
                .expect("split");
        assert_eq!(
            words,
            [
                "--write",
                "--",
                "its",
                "a \"b\" $HOME `id`",
                "~/x",
                "*.rs",
                "#1",
                "a b",
                "",
                "$y"
            ]
        );
        assert_eq!(split("a \"b\\n\"").expect("split"), ["a", "b\\n"]);
        assert_eq!(split("  ").expect("split"), Vec::<String>::new());
    }

    #[test]
    fn unbalanced_quotes_and_trailing_backslash_are_refused() {
        assert!(matches!(
            split("'abc"),
            Err(RawArgsError::Unterminated("single"))
        ));
        assert!(matches!(
            split("\"abc"),
            Err(RawArgsError::Unterminated("double"))
        ));
        assert!(matches!(
            split("abc\\"),
            Err(RawArgsError::TrailingBackslash)
        ));
    }

    #[test]
    fn a_file_is_consumed_exactly_once() {
        let data = private_tempdir();
        let (token, path) = create(data.path()).expect("create");
        assert!(valid_token(&token));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o7777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(transport_dir(data.path()))
            .expect("meta")
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(dir_mode, 0o700);
        std::fs::write(&path, "--write 'fix it'").expect("write");
        assert_eq!(
            consume(data.path(), &token).expect("consume"),
            ["--write", "fix it"]
        );
        assert!(!path.exists());
        assert!(matches!(
            consume(data.path(), &token),
            Err(RawArgsError::Missing)
        ));
    }

    #[test]
    fn changed_mode_symlink_oversize_and_non_utf8_are_refused() {
        let data = private_tempdir();
        let (token, path) = create(data.path()).expect("create");
        std::fs::write(&path, "x").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(
            consume(data.path(), &token),
            Err(RawArgsError::WrongMode(0o644))
        ));

        let (token, path) = create(data.path()).expect("create");
        std::fs::write(&path, vec![b'a'; MAX_RAW_ARGS_BYTES as usize + 1]).expect("write");
        assert!(matches!(
            consume(data.path(), &token),
            Err(RawArgsError::TooLarge)
        ));

        let (token, path) = create(data.path()).expect("create");
        std::fs::write(&path, [0xff, 0xfe]).expect("write");
        assert!(matches!(
            consume(data.path(), &token),
            Err(RawArgsError::NotUtf8)
        ));

        let target = data.path().join("target");
        std::fs::write(&target, "--write").expect("write");
        let token = new_token().expect("token");
        std::os::unix::fs::symlink(&target, transport_dir(data.path()).join(&token))
            .expect("symlink");
        assert!(matches!(
            consume(data.path(), &token),
            Err(RawArgsError::NotRegular)
        ));
        assert!(target.exists(), "the link target is never touched");
    }

    #[test]
    fn create_refuses_a_non_empty_file_and_discard_is_idempotent() {
        let data = private_tempdir();
        let token = "0123456789abcdef0123456789abcdef";
        let path = create_with_token(data.path(), token).expect("create");
        assert_eq!(
            create_with_token(data.path(), token).expect("empty kept"),
            path
        );
        std::fs::write(&path, "x").expect("write");
        assert!(matches!(
            create_with_token(data.path(), token),
            Err(RawArgsError::Exists)
        ));
        assert!(discard(data.path(), token).expect("discard"));
        assert!(!discard(data.path(), token).expect("discard again"));
        assert!(matches!(
            discard(data.path(), "../x"),
            Err(RawArgsError::BadToken)
        ));
    }
}
