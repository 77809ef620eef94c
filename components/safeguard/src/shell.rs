//! A POSIX sh tokenizer and parser for the subset of command lines the judge follows.
//!
//! The grammar followed is lists of and-or lists of pipelines of simple commands:
//! `cmd [| cmd]... [&& | || pipeline]... [; | newline ...]`, where a simple command is
//! assignments, words and redirections. Words are read as sh reads them: `'…'`, `"…"` (in which
//! `$`, backtick and `\` are special), backslash escapes, line continuations, and comments
//! (`#` at the start of a word).
//!
//! Invariants:
//! - Everything else is refused with [`Unsupported`], naming the feature, before any command
//!   is judged: `$` anywhere outside single quotes (variables, `$(…)`, `${…}`, `$((…))`,
//!   `$'…'`), backticks, `(`/`)` (subshells, functions, process substitution), `&`
//!   (background), heredocs, braces, `~user`, a `~` after `=` or `:`, a word starting with `=`
//!   (zsh's `=cmd`) or `^` (zsh patterns), zsh's numeric glob `<N-M>`, shell keywords in
//!   command position, unbalanced quotes and syntax errors; in [`Dialect::Sh`] also zsh's
//!   clobbering redirections (`>!`, `>>|` ...), which sh reads as a file named `!`. A word
//!   the judge passes therefore means exactly its text, except a leading `~`
//!   ([`Word::tilde`]) and unquoted `*`, `?`, `[` ([`Word::glob`]: the shell expands the word
//!   to file names, and only a program that takes it as files may get it).
//! - `time` (and `time -p`) before a command is taken off: it only measures the command.
//! - The input is ASCII without control characters other than tab and newline (the caller
//!   checks); the tokenizer is one pass over the bytes and the parser has no recursion.

/// A feature of the line the judge does not follow; the text names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unsupported(pub(crate) String);

fn unsupported<T>(what: impl Into<String>) -> Result<T, Unsupported> {
    Err(Unsupported(what.into()))
}

/// Most simple commands in one line.
pub(crate) const MAX_COMMANDS: usize = 256;

/// One word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Word {
    /// The text after quote removal (without the leading `~` when [`Word::tilde`]).
    pub(crate) text: String,
    /// The word began with an unquoted `~` followed by `/` or nothing: the home directory.
    pub(crate) tilde: bool,
    /// Byte index of the `=` of `NAME=value` when the name is unquoted.
    pub(crate) assignment: Option<usize>,
    /// Some part of the word was quoted or escaped.
    pub(crate) quoted: bool,
    /// The word holds an unquoted `*`, `?` or `[`: the shell expands it to file names. Such a
    /// word passes only where a program of the safe set reads it as a file (see
    /// [`crate::scope::Scope::read`]).
    pub(crate) glob: bool,
}

impl Word {
    /// The word as the program receives it, `~` shown as written.
    pub(crate) fn display(&self) -> String {
        if self.tilde {
            format!("~{}", self.text)
        } else {
            self.text.clone()
        }
    }
}

/// Redirection operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RedirOp {
    /// `<`
    Input,
    /// `>`, `>|`
    Output,
    /// `>>`
    Append,
    /// `<>`
    ReadWrite,
    /// `&>`, `&>>`: stdout and stderr to a file.
    Both,
    /// `>&`: to a descriptor, or with a file name, like `&>`.
    DupOut,
    /// `<&`
    DupIn,
    /// `<<<`: a here-string (standard input from the word).
    HereString,
}

/// A redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub(crate) fd: Option<u32>,
    pub(crate) op: RedirOp,
    pub(crate) target: Word,
}

/// A simple command: `NAME=value... word... ` with redirections anywhere.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Command {
    pub(crate) assignments: Vec<Word>,
    pub(crate) words: Vec<Word>,
    pub(crate) redirects: Vec<Redirect>,
}

/// How a pipeline joins the previous one of its and-or list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Join {
    And,
    Or,
}

/// `pipeline [&& | || pipeline]...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AndOr {
    pub(crate) first: Vec<Command>,
    pub(crate) rest: Vec<(Join, Vec<Command>)>,
}

/// A whole line: and-or lists run one after the other.
pub(crate) type Line = Vec<AndOr>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(Word),
    IoNumber(u32),
    Pipe,
    AndIf,
    OrIf,
    Semi,
    Newline,
    Redir(RedirOp),
}

const KEYWORDS: [&str; 26] = [
    "if",
    "then",
    "else",
    "elif",
    "fi",
    "do",
    "done",
    "case",
    "esac",
    "while",
    "until",
    "for",
    "in",
    "select",
    "function",
    "coproc",
    "!",
    "{",
    "}",
    "[[",
    "]]",
    "repeat",
    "nocorrect",
    "noglob",
    "foreach",
    "end",
];

/// The shell that runs the line: what differs is zsh's redirections (`>!`, `>>!`, `&>|` ...),
/// which sh reads as a redirection to a file named `!` (those are refused in [`Dialect::Sh`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Dialect {
    /// bash, sh, dash.
    #[default]
    Sh,
    Zsh,
}

/// Tokenizes and parses a line as sh reads it.
#[cfg(test)]
pub(crate) fn parse(line: &str) -> Result<Line, Unsupported> {
    parse_in(line, Dialect::Sh)
}

/// Tokenizes and parses a line as the given shell reads it.
pub(crate) fn parse_in(line: &str, dialect: Dialect) -> Result<Line, Unsupported> {
    if !line.is_ascii() {
        return unsupported("a non-ASCII character");
    }
    let tokens = tokenize(line, dialect)?;
    Parser {
        tokens,
        at: 0,
        commands: 0,
    }
    .line()
}

/// What a `$` starts, for the explanation.
fn dollar_feature(next: Option<u8>) -> String {
    match next {
        Some(b'(') => "command or arithmetic substitution `$(…)`".into(),
        Some(b'{') => "parameter expansion `${…}`".into(),
        Some(b'\'') => "ANSI-C quoting `$'…'`".into(),
        Some(b'"') => "locale quoting `$\"…\"`".into(),
        Some(b'[') => "arithmetic expansion `$[…]`".into(),
        _ => "variable expansion `$`".into(),
    }
}

#[derive(Default)]
struct Builder {
    word: Word,
    started: bool,
    /// Every byte so far was unquoted and the word so far is a valid name (`NAME` or `NAME+`).
    name_so_far: bool,
    /// The previous byte was an unquoted `=` or `:` (a `~` there is expanded by some shells).
    after_sep: bool,
    /// The previous byte was an unquoted `/`.
    after_slash: bool,
}

impl Builder {
    /// Ends the word being built, if one was started, as a token.
    fn finish(&mut self, tokens: &mut Vec<Token>) {
        if self.started {
            tokens.push(Token::Word(std::mem::take(&mut self.word)));
        }
        *self = Builder::default();
    }

    /// An unquoted `~` followed by `next`: the home directory at the start of a word (before
    /// `/`, a blank or an operator); refused before a user name and after `=` or `:`.
    fn tilde(&mut self, next: Option<u8>) -> Result<(), Unsupported> {
        if !self.started {
            let ends = matches!(
                next,
                None | Some(b'/' | b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>')
            );
            if !ends {
                return unsupported("`~` followed by a user name or a quote (`~user`)");
            }
            self.start();
            self.name_so_far = false;
            self.word.tilde = true;
        } else if self.after_sep {
            return unsupported("a `~` after `=` or `:` (some shells expand it)");
        } else {
            self.unquoted(b'~');
        }
        Ok(())
    }

    fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.name_so_far = true;
        }
    }

    fn quoted(&mut self, text: &str) {
        self.start();
        self.word.quoted = true;
        self.word.text.push_str(text);
        self.name_so_far = false;
        self.after_sep = false;
        self.after_slash = false;
    }

    fn unquoted(&mut self, byte: u8) {
        self.start();
        let c = char::from(byte);
        if byte == b'=' && self.name_so_far && self.word.assignment.is_none() {
            let name = self.word.text.strip_suffix('+').unwrap_or(&self.word.text);
            if is_name(name) && !self.word.tilde {
                self.word.assignment = Some(self.word.text.len());
            }
        }
        let name_char = byte.is_ascii_alphanumeric()
            || byte == b'_'
            || (byte == b'+' && !self.word.text.is_empty());
        self.name_so_far &= name_char && self.word.assignment.is_none();
        self.after_sep = matches!(byte, b'=' | b':');
        self.after_slash = byte == b'/';
        self.word.text.push(c);
    }
}

fn is_name(text: &str) -> bool {
    let mut bytes = text.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The tokens of `line`, in one pass over its bytes: a byte either ends the word being built,
/// adds to it, or starts a quoted part or an operator read by a step of its own.
fn tokenize(line: &str, dialect: Dialect) -> Result<Vec<Token>, Unsupported> {
    let bytes = line.as_bytes();
    let mut tokens = Vec::new();
    let mut cur = Builder::default();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        match byte {
            b' ' | b'\t' => {
                cur.finish(&mut tokens);
                i += 1;
            }
            b'\n' => {
                cur.finish(&mut tokens);
                tokens.push(Token::Newline);
                i += 1;
            }
            // A comment runs to the end of the line.
            b'#' if !cur.started => {
                i = bytes[i..]
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(bytes.len(), |at| i + at);
            }
            b'\\' => match bytes.get(i + 1) {
                Some(b'\n') => i += 2,
                Some(next) => {
                    cur.quoted(&char::from(*next).to_string());
                    i += 2;
                }
                None => return unsupported("a backslash at the end of the line"),
            },
            b'\'' => {
                let close = bytes[i + 1..]
                    .iter()
                    .position(|b| *b == b'\'')
                    .ok_or_else(|| Unsupported("an unbalanced single quote".into()))?;
                cur.quoted(&line[i + 1..i + 1 + close]);
                i += close + 2;
            }
            b'"' => {
                let (text, after) = double_quoted(bytes, i)?;
                cur.quoted(&text);
                i = after;
            }
            b'$' => return unsupported(dollar_feature(bytes.get(i + 1).copied())),
            b'`' => return unsupported("command substitution with backticks"),
            b'(' | b')' => {
                return unsupported(if i > 0 && matches!(bytes[i - 1], b'<' | b'>') {
                    "process substitution `<(…)` or `>(…)`"
                } else {
                    "a subshell, group or function `( … )`"
                })
            }
            b'*' | b'?' | b'[' => {
                cur.unquoted(byte);
                cur.word.glob = true;
                i += 1;
            }
            b'{' | b'}' => return unsupported("brace expansion or a command group `{ … }`"),
            b'~' => {
                cur.tilde(bytes.get(i + 1).copied())?;
                i += 1;
            }
            b'=' if !cur.started => {
                return unsupported("a word starting with `=` (zsh expands `=cmd`)")
            }
            b'^' if !cur.started || cur.after_slash => {
                return unsupported("a `^` pattern (zsh extended glob)")
            }
            b'|' | b'&' | b';' | b'<' | b'>' => {
                i += operator_after_word(&mut cur, &mut tokens, &bytes[i..], dialect)?;
            }
            other => {
                cur.unquoted(other);
                i += 1;
            }
        }
    }
    cur.finish(&mut tokens);
    Ok(tokens)
}

/// The text of the double-quoted part opening at `open` (in which only `$`, backtick and `\`
/// are special: the first two are refused) and the index after its closing quote.
fn double_quoted(bytes: &[u8], open: usize) -> Result<(String, usize), Unsupported> {
    let mut text = String::new();
    let mut j = open + 1;
    loop {
        match bytes.get(j) {
            None => return unsupported("an unbalanced double quote"),
            Some(b'"') => return Ok((text, j + 1)),
            Some(b'$') => return unsupported(dollar_feature(bytes.get(j + 1).copied())),
            Some(b'`') => return unsupported("command substitution with backticks"),
            Some(b'\\') => match bytes.get(j + 1) {
                Some(b'\n') => j += 2,
                Some(next @ (b'$' | b'`' | b'"' | b'\\')) => {
                    text.push(char::from(*next));
                    j += 2;
                }
                _ => {
                    text.push('\\');
                    j += 1;
                }
            },
            Some(other) => {
                text.push(char::from(*other));
                j += 1;
            }
        }
    }
}

/// The operator at the start of `rest`, after the word being built: a word of digits right
/// before `<` or `>` is the redirection's file descriptor, any other word ends there. The
/// operator's length.
fn operator_after_word(
    cur: &mut Builder,
    tokens: &mut Vec<Token>,
    rest: &[u8],
    dialect: Dialect,
) -> Result<usize, Unsupported> {
    let io_number = matches!(rest.first(), Some(b'<' | b'>'))
        && cur.started
        && !cur.word.quoted
        && !cur.word.tilde
        && !cur.word.text.is_empty()
        && cur.word.text.bytes().all(|b| b.is_ascii_digit());
    if io_number {
        let number = cur
            .word
            .text
            .parse::<u32>()
            .map_err(|_| Unsupported("a file descriptor number that is too large".into()))?;
        *cur = Builder::default();
        tokens.push(Token::IoNumber(number));
    } else {
        cur.finish(tokens);
    }
    let (token, len) = operator(rest, dialect)?;
    tokens.push(token);
    Ok(len)
}

/// The operator at the start of `rest` and its length, with zsh's clobbering forms
/// (`>!`, `>>|`, `&>!` ...) read as the redirection they are in zsh.
fn operator(rest: &[u8], dialect: Dialect) -> Result<(Token, usize), Unsupported> {
    let (token, len) = plain_operator(rest)?;
    if let Token::Redir(op) = token {
        if op == RedirOp::Input && numeric_glob(&rest[1..]) {
            return unsupported("zsh's numeric glob `<N-M>`");
        }
        let output = matches!(
            op,
            RedirOp::Output | RedirOp::Append | RedirOp::Both | RedirOp::DupOut
        );
        // `>|` is sh's too (`plain_operator` took it whole); `>!`, `>>!`, `>>|`, `&>!`,
        // `&>|`, `&>>!`, `&>>|`, `>&!`, `>&|` are zsh's.
        let clobber =
            !(op == RedirOp::Output && len == 2) && matches!(rest.get(len), Some(b'!' | b'|'));
        if output && clobber {
            return match dialect {
                Dialect::Zsh => Ok((token, len + 1)),
                Dialect::Sh => unsupported(
                    "zsh's clobbering redirection (`>!`, `>>|` ...), which sh reads differently",
                ),
            };
        }
    }
    Ok((token, len))
}

/// `N-M>` (either number optional) right after a `<`: a zsh glob, not a redirection.
fn numeric_glob(rest: &[u8]) -> bool {
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if rest.get(digits) != Some(&b'-') {
        return false;
    }
    let more = rest[digits + 1..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    rest.get(digits + 1 + more) == Some(&b'>')
}

fn plain_operator(rest: &[u8]) -> Result<(Token, usize), Unsupported> {
    let at = |i: usize| rest.get(i).copied();
    Ok(match (at(0), at(1), at(2)) {
        (Some(b'|'), Some(b'|'), _) => (Token::OrIf, 2),
        // `|&` pipes standard error too.
        (Some(b'|'), Some(b'&'), _) => (Token::Pipe, 2),
        (Some(b'|'), _, _) => (Token::Pipe, 1),
        (Some(b'&'), Some(b'&'), _) => (Token::AndIf, 2),
        (Some(b'&'), Some(b'>'), Some(b'>')) => (Token::Redir(RedirOp::Both), 3),
        (Some(b'&'), Some(b'>'), _) => (Token::Redir(RedirOp::Both), 2),
        (Some(b'&'), _, _) => return unsupported("a command run in the background (`&`)"),
        (Some(b';'), Some(b';' | b'&'), _) => return unsupported("a `case` statement (`;;`)"),
        (Some(b';'), _, _) => (Token::Semi, 1),
        (Some(b'<'), Some(b'<'), Some(b'<')) => (Token::Redir(RedirOp::HereString), 3),
        (Some(b'<'), Some(b'<'), _) => return unsupported("a heredoc (`<<`)"),
        (Some(b'<'), Some(b'&'), _) => (Token::Redir(RedirOp::DupIn), 2),
        (Some(b'<'), Some(b'>'), _) => (Token::Redir(RedirOp::ReadWrite), 2),
        (Some(b'<'), Some(b'('), _) => return unsupported("process substitution `<(…)`"),
        (Some(b'<'), _, _) => (Token::Redir(RedirOp::Input), 1),
        (Some(b'>'), Some(b'>'), _) => (Token::Redir(RedirOp::Append), 2),
        (Some(b'>'), Some(b'&'), _) => (Token::Redir(RedirOp::DupOut), 2),
        (Some(b'>'), Some(b'|'), _) => (Token::Redir(RedirOp::Output), 2),
        (Some(b'>'), Some(b'('), _) => return unsupported("process substitution `>(…)`"),
        (Some(b'>'), _, _) => (Token::Redir(RedirOp::Output), 1),
        _ => return unsupported("an unknown operator"),
    })
}

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    commands: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn skip_newlines(&mut self) {
        while self.peek() == Some(&Token::Newline) {
            self.at += 1;
        }
    }

    fn line(mut self) -> Result<Line, Unsupported> {
        let mut lists = Vec::new();
        self.skip_newlines();
        while self.peek().is_some() {
            lists.push(self.and_or()?);
            match self.peek() {
                None => break,
                Some(Token::Semi | Token::Newline) => {
                    self.at += 1;
                    self.skip_newlines();
                }
                Some(_) => return unsupported("a syntax error"),
            }
        }
        if lists.is_empty() {
            return unsupported("no command (only blanks or comments)");
        }
        Ok(lists)
    }

    fn and_or(&mut self) -> Result<AndOr, Unsupported> {
        let first = self.pipeline()?;
        let mut rest = Vec::new();
        loop {
            let join = match self.peek() {
                Some(Token::AndIf) => Join::And,
                Some(Token::OrIf) => Join::Or,
                _ => break,
            };
            self.at += 1;
            self.skip_newlines();
            rest.push((join, self.pipeline()?));
        }
        Ok(AndOr { first, rest })
    }

    fn pipeline(&mut self) -> Result<Vec<Command>, Unsupported> {
        let mut commands = vec![self.command()?];
        while self.peek() == Some(&Token::Pipe) {
            self.at += 1;
            self.skip_newlines();
            commands.push(self.command()?);
        }
        Ok(commands)
    }

    fn command(&mut self) -> Result<Command, Unsupported> {
        self.commands += 1;
        if self.commands > MAX_COMMANDS {
            return unsupported(format!("more than {MAX_COMMANDS} commands in one line"));
        }
        let mut command = Command::default();
        loop {
            match self.peek().cloned() {
                Some(Token::Word(word)) => {
                    self.at += 1;
                    if command.words.is_empty() && word.assignment.is_some() {
                        command.assignments.push(word);
                    } else if command.words.is_empty()
                        && command.assignments.is_empty()
                        && !word.quoted
                        && !word.tilde
                        && word.text == "time"
                    {
                        // `time` (bash's and zsh's keyword) only measures what follows; its
                        // `-p` only changes the format.
                        if let Some(Token::Word(next)) = self.peek() {
                            if next.text == "-p" && !next.quoted {
                                self.at += 1;
                            }
                        }
                    } else {
                        if command.words.is_empty()
                            && !word.quoted
                            && !word.tilde
                            && KEYWORDS.contains(&word.text.as_str())
                        {
                            return unsupported(format!("the shell keyword `{}`", word.text));
                        }
                        command.words.push(word);
                    }
                }
                Some(Token::IoNumber(fd)) => {
                    self.at += 1;
                    let Some(Token::Redir(op)) = self.peek().cloned() else {
                        return unsupported("a syntax error");
                    };
                    self.at += 1;
                    command.redirects.push(Redirect {
                        fd: Some(fd),
                        op,
                        target: self.target()?,
                    });
                }
                Some(Token::Redir(op)) => {
                    self.at += 1;
                    command.redirects.push(Redirect {
                        fd: None,
                        op,
                        target: self.target()?,
                    });
                }
                _ => break,
            }
        }
        if command.words.is_empty()
            && command.assignments.is_empty()
            && command.redirects.is_empty()
        {
            return unsupported("a syntax error (an empty command)");
        }
        Ok(command)
    }

    fn target(&mut self) -> Result<Word, Unsupported> {
        match self.peek().cloned() {
            Some(Token::Word(word)) => {
                self.at += 1;
                Ok(word)
            }
            _ => unsupported("a redirection without a target"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of every simple command, in order.
    fn words(line: &str) -> Vec<Vec<String>> {
        parse(line)
            .unwrap_or_else(|error| panic!("{line:?}: {error:?}"))
            .iter()
            .flat_map(|list| {
                std::iter::once(&list.first)
                    .chain(list.rest.iter().map(|(_, pipeline)| pipeline))
                    .flatten()
            })
            .map(|command| command.words.iter().map(Word::display).collect())
            .collect()
    }

    fn refused(line: &str) -> String {
        match parse(line) {
            Err(Unsupported(what)) => what,
            Ok(parsed) => panic!("{line:?} parsed: {parsed:?}"),
        }
    }

    #[test]
    fn quoting_and_escapes() {
        assert_eq!(
            words("echo 'a b' \"c d\" e\\ f"),
            vec![vec!["echo", "a b", "c d", "e f"]]
        );
        assert_eq!(
            words(r#"echo "a\"b" "a\b" 'a\b'"#),
            vec![vec!["echo", "a\"b", "a\\b", "a\\b"]]
        );
        assert_eq!(
            words("echo '$HOME' \"it's\" \\$x"),
            vec![vec!["echo", "$HOME", "it's", "$x"]]
        );
        assert_eq!(words("ec'h'o x''y"), vec![vec!["echo", "xy"]]);
        assert_eq!(words("ls \\\n-la"), vec![vec!["ls", "-la"]]);
        assert_eq!(words("echo ''"), vec![vec!["echo", ""]]);
        assert_eq!(
            words("git log HEAD~3 a#b"),
            vec![vec!["git", "log", "HEAD~3", "a#b"]]
        );
    }

    #[test]
    fn operators_split_commands() {
        assert_eq!(
            words("a && b || c ; d | e\nf |& g"),
            vec![
                vec!["a"],
                vec!["b"],
                vec!["c"],
                vec!["d"],
                vec!["e"],
                vec!["f"],
                vec!["g"]
            ]
        );
        assert_eq!(
            words("a&&b||c;d|e"),
            vec![vec!["a"], vec!["b"], vec!["c"], vec!["d"], vec!["e"]]
        );
        assert_eq!(words("a &&\n b"), vec![vec!["a"], vec!["b"]]);
        let line = parse("a && b || c; d").unwrap();
        assert_eq!(line.len(), 2);
        assert_eq!(
            line[0]
                .rest
                .iter()
                .map(|(join, _)| *join)
                .collect::<Vec<_>>(),
            vec![Join::And, Join::Or]
        );
    }

    #[test]
    fn comments() {
        assert_eq!(words("ls # rm -rf /"), vec![vec!["ls"]]);
        assert_eq!(
            words("ls #comment\nrm -rf /"),
            vec![vec!["ls"], vec!["rm", "-rf", "/"]]
        );
        assert_eq!(words("echo a#b '#c'"), vec![vec!["echo", "a#b", "#c"]]);
        assert_eq!(
            refused("# only a comment"),
            "no command (only blanks or comments)"
        );
    }

    #[test]
    fn redirections() {
        let line = parse("cmd 2>&1 >/dev/null 2>>log <in 3<>rw &>all <<<text >|f").unwrap();
        let command = &line[0].first[0];
        let got: Vec<(Option<u32>, RedirOp, String)> = command
            .redirects
            .iter()
            .map(|r| (r.fd, r.op, r.target.text.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                (Some(2), RedirOp::DupOut, "1".to_owned()),
                (None, RedirOp::Output, "/dev/null".to_owned()),
                (Some(2), RedirOp::Append, "log".to_owned()),
                (None, RedirOp::Input, "in".to_owned()),
                (Some(3), RedirOp::ReadWrite, "rw".to_owned()),
                (None, RedirOp::Both, "all".to_owned()),
                (None, RedirOp::HereString, "text".to_owned()),
                (None, RedirOp::Output, "f".to_owned()),
            ]
        );
        assert_eq!(command.words.len(), 1);
        // A quoted number is a word, not a descriptor.
        let line = parse("echo '2'>x").unwrap();
        assert_eq!(line[0].first[0].words.len(), 2);
        assert_eq!(refused("cat >"), "a redirection without a target");
    }

    #[test]
    fn assignments_and_tilde() {
        let line = parse("FOO=1 BAR='x y' cmd A=b").unwrap();
        let command = &line[0].first[0];
        assert_eq!(command.assignments.len(), 2);
        assert_eq!(command.assignments[0].assignment, Some(3));
        assert_eq!(
            command.words.len(),
            2,
            "an assignment after the program is an argument"
        );
        let line = parse("'FOO'=1 cmd").unwrap();
        assert!(
            line[0].first[0].assignments.is_empty(),
            "a quoted name is no assignment"
        );
        let line = parse("cat ~/x ~").unwrap();
        let words = &line[0].first[0].words;
        assert!(words[1].tilde && words[1].text == "/x");
        assert!(words[2].tilde && words[2].text.is_empty());
        let line = parse("cat '~/x'").unwrap();
        assert!(!line[0].first[0].words[1].tilde);
    }

    #[test]
    fn heredocs_and_substitutions_are_refused() {
        for (line, needle) in [
            ("cat <<EOF\nx\nEOF", "heredoc"),
            ("cat <<-EOF", "heredoc"),
            ("echo $(id)", "substitution `$("),
            ("echo `id`", "backticks"),
            ("echo \"`id`\"", "backticks"),
            ("echo \"$HOME\"", "variable expansion"),
            ("echo ${IFS}", "parameter expansion"),
            ("echo $'\\x72m'", "ANSI-C"),
            ("echo $((1+1))", "substitution `$("),
            ("cat <(ls)", "process substitution"),
            ("tee >(sh)", "process substitution"),
            ("(rm -rf /)", "subshell"),
            ("f() { rm; }", "subshell"),
            ("{ ls; }", "brace"),
            ("sleep 1 &", "background"),
            ("a & b", "background"),
            ("echo 'x", "unbalanced single quote"),
            ("echo \"x", "unbalanced double quote"),
            ("echo {a,b}", "brace"),
            ("cat ~root/x", "~user"),
            ("cat ~\"/x\"", "~user"),
            ("X=~/bin cmd", "after `=`"),
            ("cmd --prefix=~/x", "after `=`"),
            ("cat =ls", "`=`"),
            ("cat ^x", "zsh"),
            ("if true; then ls; fi", "keyword `if`"),
            ("! ls", "keyword `!`"),
            ("for x in a; do ls; done", "keyword `for`"),
            ("ls ;; ls", "case"),
            ("; ls", "syntax error"),
            ("ls &&", "syntax error"),
            ("ls | | ls", "syntax error"),
            ("ls \\", "backslash at the end"),
            ("", "no command"),
        ] {
            let what = refused(line);
            assert!(what.contains(needle), "{line:?}: {what}");
        }
    }

    #[test]
    fn globs_are_words_marked_as_globs() {
        let line = parse("wc -l src/*.rs a?b '*.md' x[12]").unwrap();
        let globs: Vec<(String, bool)> = line[0].first[0]
            .words
            .iter()
            .map(|w| (w.text.clone(), w.glob))
            .collect();
        assert_eq!(
            globs,
            vec![
                ("wc".to_owned(), false),
                ("-l".to_owned(), false),
                ("src/*.rs".to_owned(), true),
                ("a?b".to_owned(), true),
                ("*.md".to_owned(), false),
                ("x[12]".to_owned(), true),
            ]
        );
    }

    #[test]
    fn time_is_taken_off() {
        assert_eq!(words("time cargo test"), vec![vec!["cargo", "test"]]);
        assert_eq!(words("time -p make"), vec![vec!["make"]]);
        assert_eq!(words("'time' x"), vec![vec!["time", "x"]]);
    }

    #[test]
    fn zsh_redirections() {
        let targets = |line: &str| -> Vec<(RedirOp, String)> {
            parse_in(line, Dialect::Zsh).unwrap()[0].first[0]
                .redirects
                .iter()
                .map(|r| (r.op, r.target.text.clone()))
                .collect()
        };
        assert_eq!(
            targets("echo x >! a >>! b >>| c &>| d &>>! e >&! f >| g"),
            vec![
                (RedirOp::Output, "a".to_owned()),
                (RedirOp::Append, "b".to_owned()),
                (RedirOp::Append, "c".to_owned()),
                (RedirOp::Both, "d".to_owned()),
                (RedirOp::Both, "e".to_owned()),
                (RedirOp::DupOut, "f".to_owned()),
                (RedirOp::Output, "g".to_owned()),
            ]
        );
        for line in [
            "echo x >! a",
            "echo x >>! a",
            "echo x &>| a",
            "echo x >&! a",
        ] {
            assert!(refused(line).contains("zsh"), "{line}");
        }
        for dialect in [Dialect::Sh, Dialect::Zsh] {
            for line in [
                "cat <1-5>x",
                "cat <-9>",
                "ls =(ls)",
                "ls *(e:x:)",
                "ls (+f)",
            ] {
                assert!(parse_in(line, dialect).is_err(), "{line}");
            }
        }
        assert!(
            parse("echo x > !a").is_ok(),
            "a file named `!a` in both shells"
        );
    }

    #[test]
    fn command_count_is_bounded() {
        let line = vec!["true"; MAX_COMMANDS + 1].join(";");
        assert!(refused(&line).contains("more than"));
        let line = vec!["true"; MAX_COMMANDS].join(";");
        assert!(parse(&line).is_ok());
    }
}
