//! The "unexecuted action" heuristic: does a piece of text announce a client action (read, run,
//! check, ...) instead of requesting it with a `<tool>` envelope?
//!
//! Case-insensitive, on whole words (letters, digits and `_`; an apostrophe, straight or curly,
//! between two letters is part of a word, so `I'll` and `I’ll` are one word). Action verbs:
//! read, inspect, examine, edit, fix, run, check, test, start. It fires when:
//!
//! 1. "next step(s)", "next task(s)" (so also "immediate next step") or "planned action(s)" is
//!    followed by a verb within [`PLAN_WINDOW`] characters;
//! 2. "I'll", "I will" or "let me" is followed by a verb in the same sentence, within
//!    [`INTENT_WINDOW`] characters. "let me know" is not an intent (it closes many final answers:
//!    "let me know if I should run the tests");
//! 3. "next step(s):", "next immediate step/task:", "immediate next step/task:" or
//!    "planned action(s):" is directly followed by a verb;
//! 4. "still" or "now", then "need", "needs" or "required", then "to" and a verb;
//! 5. "test(s)" + "have/has/were/was not" (or "haven't", "hasn't", "weren't", "wasn't"), then
//!    optionally "yet" and "been", then "run".
//!
//! The words of a phrase must be separated by whitespace only. A sentence ends at a line break or
//! at `.`, `!` or `?` followed by whitespace or the end of the text (so `main.rs` does not end
//! one). Distances count characters between the end of the phrase and the start of the verb.
//!
//! # Time
//!
//! Linear, and in ordinary prose a small fraction of a full tokenization. Every rule starts at
//! one of a few *starter* words (next, immediate, planned, I'll, I, let, still, now, test,
//! tests), so a [`NarrationCheck`] first looks for those with vectorised substring searches (`memchr`'s
//! `memmem` over an ASCII-lowercased copy of one chunk at a time: "next", "planned", "will",
//! "let", "still", "now", "test", and every apostrophe for "I'll"), keeps the hits that begin a
//! word whose next word could continue one of its phrases (a look at one letter, see
//! [`starter`]), and tokenizes exactly only a *region* from each such word onwards. Everything
//! elsewhere is never tokenized.
//!
//! The verdict is the one a tokenization of the whole text gives, because:
//! - a region starts at a word start, so it yields the same keywords as the whole text from
//!   there on (positions and sentence numbers shifted alike; the rules only compare them), and
//!   the one value that can differ, the gap before its first keyword, is never consulted;
//! - every rule reads forwards only, and a region ends only where no keyword in it can reach
//!   further: after a non-keyword (the gap is [`Gap::Other`], so no phrase or colon continues
//!   across) and more than [`PLAN_WINDOW`] characters after the end of the last phrase that a
//!   verb may follow within a window ("next step", "planned action", "I'll", "I will", "let me"
//!   unless "know" follows). So a rule that fires on the whole text fires in the region holding
//!   its first word, and a region never fires on its own: a keyword it lacks only ever makes a
//!   rule fail;
//! - a rule starting at "immediate" fires exactly when the same rule starting at the "next"
//!   after it does (the optional word changes nothing else), and "I will" is found from its
//!   "will". Only ASCII letters lowercase into the starters and their continuations (of the
//!   other characters, the Kelvin sign becomes a `k`, in none of them, and `İ` an `i` with a
//!   combining dot, which none spells), so the ASCII-lowercased search misses none.
//!
//! Regions do not overlap (a hit inside the last region is skipped), and a region is tokenized
//! in one pass: each rule then looks at a fixed number of neighbours plus a precomputed "next
//! verb" index, with no backtracking.

use memchr::memchr2_iter;
use memchr::memmem::Finder;

/// Rule 1 window, in characters (the larger window; regions keep this much after a phrase).
const PLAN_WINDOW: usize = 320;
/// Rule 2 window, in characters.
const INTENT_WINDOW: usize = 160;
// A region keeps [`PLAN_WINDOW`] characters after any phrase end, which must cover both rules.
const _: () = assert!(INTENT_WINDOW <= PLAN_WINDOW);
/// Longer words cannot be keywords; stop collecting their characters.
const MAX_KEYWORD_CHARS: usize = 9;

/// The words the rules look at; every other word is [`Word::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Word {
    // Action verbs.
    Read,
    Inspect,
    Examine,
    Edit,
    Fix,
    Run,
    Check,
    Test,
    Start,
    // Rule 1 and 3.
    Next,
    Immediate,
    Step,
    Task,
    Planned,
    Action,
    // Rule 2.
    ILl,
    I,
    Will,
    Let,
    Me,
    Know,
    // Rule 4.
    Still,
    Now,
    Need,
    Required,
    To,
    // Rule 5.
    Tests,
    Have,
    Not,
    HaveNot,
    Yet,
    Been,
    Other,
}

impl Word {
    fn classify(word: &str) -> Self {
        match word {
            "read" => Self::Read,
            "inspect" => Self::Inspect,
            "examine" => Self::Examine,
            "edit" => Self::Edit,
            "fix" => Self::Fix,
            "run" => Self::Run,
            "check" => Self::Check,
            "test" => Self::Test,
            "start" => Self::Start,
            "next" => Self::Next,
            "immediate" => Self::Immediate,
            "step" | "steps" => Self::Step,
            "task" | "tasks" => Self::Task,
            "planned" => Self::Planned,
            "action" | "actions" => Self::Action,
            "i'll" => Self::ILl,
            "i" => Self::I,
            "will" => Self::Will,
            "let" => Self::Let,
            "me" => Self::Me,
            "know" => Self::Know,
            "still" => Self::Still,
            "now" => Self::Now,
            "need" | "needs" => Self::Need,
            "required" => Self::Required,
            "to" => Self::To,
            "tests" => Self::Tests,
            "have" | "has" | "were" | "was" => Self::Have,
            "not" => Self::Not,
            "haven't" | "hasn't" | "weren't" | "wasn't" => Self::HaveNot,
            "yet" => Self::Yet,
            "been" => Self::Been,
            _ => Self::Other,
        }
    }

    fn is_verb(self) -> bool {
        matches!(
            self,
            Self::Read
                | Self::Inspect
                | Self::Examine
                | Self::Edit
                | Self::Fix
                | Self::Run
                | Self::Check
                | Self::Test
                | Self::Start
        )
    }
}

/// What separates a keyword from the keyword before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gap {
    /// Whitespace only.
    Space,
    /// Whitespace around one or more colons.
    Colon,
    /// Anything else, including another word.
    Other,
}

#[derive(Debug, Clone, Copy)]
struct Keyword {
    word: Word,
    /// Character offsets of the word.
    start: usize,
    end: usize,
    gap_before: Gap,
    sentence: usize,
}

/// The narration check over one output: the searchers and buffers its pieces share.
pub(crate) struct NarrationCheck {
    /// One searcher per trigger of [`TRIGGERS`], in that order.
    finders: Vec<Finder<'static>>,
    /// The current chunk, ASCII-lowercased.
    lower: Vec<u8>,
    /// Byte offsets of the starter words found in the current chunk.
    starts: Vec<usize>,
    /// The keywords of the current region and the tokenizer's buffers, reused across regions
    /// (a text can hold tens of thousands of short ones).
    scratch: Scratch,
}

/// Buffers of [`tokenize`] and [`fires`].
#[derive(Default)]
struct Scratch {
    keywords: Vec<Keyword>,
    /// The word being read, lowercased.
    word: String,
    next_verb: Vec<Option<usize>>,
}

/// The lowercase substrings searched for; each leads to a starter word ([`starter`] says how).
/// "I'll" is found from its apostrophe instead, which no substring search in lowercase covers
/// for the three apostrophes at once.
const TRIGGERS: [&str; 7] = ["next", "planned", "will", "let", "still", "now", "test"];

/// Bytes lowercased and searched at a time: small enough to stay in the first-level cache for
/// the seven searches, large enough that the per-chunk set-up does not matter.
const CHUNK_BYTES: usize = 16 * 1024;

/// Bytes a chunk's copy extends past its end, so a trigger starting in the chunk is found whole.
const TRIGGER_OVERLAP: usize = 8;

impl NarrationCheck {
    pub(crate) fn new() -> Self {
        Self {
            finders: TRIGGERS
                .iter()
                .map(|trigger| Finder::new(*trigger))
                .collect(),
            lower: Vec::new(),
            starts: Vec::new(),
            scratch: Scratch::default(),
        }
    }

    /// True when `text` narrates an action it does not request. See the module documentation.
    pub(crate) fn narrates(&mut self, text: &str) -> bool {
        self.narrates_in_chunks(text, CHUNK_BYTES)
    }

    fn narrates_in_chunks(&mut self, text: &str, chunk_bytes: usize) -> bool {
        let bytes = text.as_bytes();
        // The last region tokenized, as byte offsets: a starter inside it was already seen there.
        let mut region = 0..0;
        let mut from = 0;
        while from < bytes.len() {
            let own_end = from.saturating_add(chunk_bytes).min(bytes.len());
            let copy_end = own_end.saturating_add(TRIGGER_OVERLAP).min(bytes.len());
            self.lower.clear();
            self.lower.extend_from_slice(&bytes[from..copy_end]);
            self.lower.make_ascii_lowercase();
            self.starts.clear();
            for (finder, trigger) in self.finders.iter().zip(TRIGGERS) {
                for hit in finder.find_iter(&self.lower) {
                    // Hits are in order; one starting in the overlap belongs to the next chunk.
                    if from + hit >= own_end {
                        break;
                    }
                    self.starts.extend(starter(text, from + hit, trigger));
                }
            }
            for hit in memchr2_iter(b'\'', 0xE2, &bytes[from..own_end]) {
                self.starts.extend(contraction_starter(text, from + hit));
            }
            self.starts.sort_unstable();
            self.starts.dedup();
            for &start in &self.starts {
                if region.contains(&start) {
                    continue;
                }
                let end = tokenize(&text[start..], true, &mut self.scratch);
                if fires(&self.scratch.keywords, &mut self.scratch.next_verb) {
                    return true;
                }
                region = start..start + end;
            }
            from = own_end;
        }
        false
    }
}

/// The starter word a trigger found at byte `at` leads to, if a rule starting there can fire:
/// the word itself when it starts there, or for "will" the "I" before it, separated by
/// whitespace only.
///
/// A starter whose next word cannot continue any of its phrases is dropped: a phrase's words
/// are separated by whitespace only, so the word must be exactly the trigger and the next one,
/// after whitespace, must begin with a letter that one of its possible continuations begins
/// with (ASCII: no other character lowercases to these letters). "The tests pass" then costs
/// no region at all. Lenient is safe (a region where no rule fires costs a few words); dropping
/// a starter a rule can start at is not, hence the letters of every continuation below.
fn starter(text: &str, at: usize, trigger: &str) -> Option<usize> {
    if trigger == "will" {
        let before = text.get(..at)?.trim_end();
        if before.len() == at {
            return None; // no whitespace between: not a separate word
        }
        let i = before.len().checked_sub(1)?;
        return (matches!(before.as_bytes()[i], b'i' | b'I') && starts_word(text, i)).then_some(i);
    }
    let mut end = at + trigger.len();
    let continuations: &[u8] = match trigger {
        // [immediate] next step/task, next immediate step/task.
        "next" => b"sti",
        // planned action(s).
        "planned" => b"a",
        // let me.
        "let" => b"m",
        // still/now need(s)/required to.
        "still" | "now" => b"nr",
        // test(s) have/has/were/was not, haven't/hasn't/weren't/wasn't.
        _ => {
            if text
                .as_bytes()
                .get(end)
                .is_some_and(|b| b.eq_ignore_ascii_case(&b's'))
            {
                end += 1;
            }
            b"hw"
        }
    };
    let after = text.get(end..)?;
    let next = after.trim_start();
    let continues = next.len() < after.len()
        && next
            .as_bytes()
            .first()
            .is_some_and(|b| continuations.contains(&b.to_ascii_lowercase()));
    (continues && starts_word(text, at)).then_some(at)
}

/// The "I" of an "I'll" whose apostrophe (`'`, `’` or `‘`) is at byte `at`, if it starts a word.
fn contraction_starter(text: &str, at: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    let after = match bytes.get(at..at + 3)? {
        [b'\'', ..] => at + 1,
        [0xE2, 0x80, 0x98 | 0x99] => at + 3,
        _ => return None,
    };
    let ll = bytes.get(after..after + 2)?;
    let i = at.checked_sub(1)?;
    (ll.eq_ignore_ascii_case(b"ll") && matches!(bytes[i], b'i' | b'I') && starts_word(text, i))
        .then_some(i)
}

/// Whether a word begins at byte `at` (which holds an ASCII letter) for the tokenizer: the
/// character before is not part of a word, and is not an apostrophe joining the letter to a
/// word before it.
fn starts_word(text: &str, at: usize) -> bool {
    let Some(before) = text.get(..at) else {
        return false;
    };
    let mut previous = before.chars().rev().map(fold_apostrophe);
    match previous.next() {
        None => true,
        Some(c) if is_word_char(c) => false,
        // An apostrophe joins a word when a word character precedes it and a letter follows.
        Some('\'') => !previous.next().is_some_and(is_word_char),
        Some(_) => true,
    }
}

/// Whether a rule fires on `keywords`, the keywords of a region or of a whole text.
fn fires(keywords: &[Keyword], next_verb: &mut Vec<Option<usize>>) -> bool {
    // Every rule ends on a verb ("run" for rule 5): without one, none can fire. Most regions
    // stop here.
    if !keywords.iter().any(|k| k.word.is_verb()) {
        return false;
    }
    next_verb_index(keywords, next_verb);
    let next_verb = next_verb.as_slice();
    (0..keywords.len()).any(|at| {
        plan_then_verb(keywords, next_verb, at)
            || intent_then_verb(keywords, next_verb, at)
            || still_need_to(keywords, at)
            || tests_not_run(keywords, at)
    })
}

/// One pass over the characters: the keywords into `keywords` (cleared first), with positions,
/// gaps and sentence numbers, and the byte offset where the pass stopped.
///
/// For a whole text (`region` false) the pass reads to the end. For a region it stops at the
/// first point after which no keyword it holds can matter (see the module documentation): a
/// non-word character with the gap at [`Gap::Other`] more than [`PLAN_WINDOW`] characters
/// after the end of the last phrase that opens a verb window ([`window_change`]).
fn tokenize(text: &str, region: bool, scratch: &mut Scratch) -> usize {
    let Scratch { keywords, word, .. } = scratch;
    keywords.clear();
    word.clear();
    let mut word_chars = 0;
    let mut word_start = 0;
    let mut gap = Gap::Space;
    let mut sentence = 0;
    // A `.`, `!` or `?` that ends the sentence if whitespace follows.
    let mut pending_stop = false;
    // Characters before which a verb may still matter to a phrase already seen.
    let mut horizon = 0;
    // The horizon before the last "let me", to restore if "know" follows it.
    let mut before_let_me = None;

    let mut chars = text
        .char_indices()
        .map(|(byte, c)| (byte, fold_apostrophe(c)))
        .enumerate()
        .peekable();
    while let Some((at, (byte, c))) = chars.next() {
        let in_word = word_chars > 0;
        let joins_word = is_word_char(c)
            || (c == '\'' && in_word && chars.peek().is_some_and(|&(_, (_, n))| n.is_alphabetic()));
        if joins_word {
            if !in_word {
                word_start = at;
            }
            word_chars += 1;
            if word_chars <= MAX_KEYWORD_CHARS {
                // The same lowercase; ASCII, nearly every character, skips the Unicode tables.
                if c.is_ascii() {
                    word.push(c.to_ascii_lowercase());
                } else {
                    word.extend(c.to_lowercase());
                }
            }
            pending_stop = false;
            continue;
        }
        if in_word {
            let kind = finish_word(
                keywords, word, word_chars, word_start, at, &mut gap, sentence,
            );
            if kind != Word::Other {
                // Set only by the keyword just before this one.
                let let_me = before_let_me.take();
                match window_change(keywords) {
                    Window::Keep => {}
                    Window::Open => horizon = at + PLAN_WINDOW,
                    Window::OpenUnlessKnow => {
                        before_let_me = Some(horizon);
                        horizon = at + PLAN_WINDOW;
                    }
                    Window::Close => horizon = let_me.unwrap_or(horizon),
                }
            }
            word.clear();
            word_chars = 0;
        }
        if pending_stop && c.is_whitespace() {
            sentence += 1;
        }
        pending_stop = matches!(c, '.' | '!' | '?');
        if c == '\n' {
            sentence += 1;
        }
        gap = match (gap, c) {
            (Gap::Other, _) => Gap::Other,
            (_, ':') => Gap::Colon,
            (current, c) if c.is_whitespace() => current,
            _ => Gap::Other,
        };
        if region && gap == Gap::Other && at > horizon {
            return byte + c.len_utf8();
        }
    }
    if word_chars > 0 {
        let end = word_start + word_chars;
        let _ = finish_word(
            keywords, word, word_chars, word_start, end, &mut gap, sentence,
        );
    }
    text.len()
}

/// What the keyword just recorded does to the verb window a region keeps open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Window {
    Keep,
    /// It ends a phrase that a verb may follow within a window (rules 1 and 2).
    Open,
    /// It ends "let me", which is no intent if "know" comes next.
    OpenUnlessKnow,
    /// It is the "know" of "let me know": the window "let me" opened is not needed.
    Close,
}

/// Which phrase, if any, the last of `keywords` ends. The phrases are those of
/// [`plan_phrase`] and [`intent_then_verb`], taken a little wide where that is simpler
/// ("immediate step" opens a window too): a window opened for nothing only makes a region
/// longer.
fn window_change(keywords: &[Keyword]) -> Window {
    use Word::*;
    let Some((last, before)) = keywords.split_last() else {
        return Window::Keep;
    };
    let previous = before
        .last()
        .filter(|_| last.gap_before == Gap::Space)
        .map(|k| k.word);
    match (previous, last.word) {
        (_, ILl) | (Some(Next | Immediate), Step | Task) | (Some(Planned), Action) => Window::Open,
        (Some(I), Will) => Window::Open,
        (Some(Let), Me) => Window::OpenUnlessKnow,
        (Some(Me), Know) => Window::Close,
        _ => Window::Keep,
    }
}

/// Records a finished word if it is a keyword; any word resets the gap that follows it.
/// Returns what the word is.
fn finish_word(
    keywords: &mut Vec<Keyword>,
    word: &str,
    chars: usize,
    start: usize,
    end: usize,
    gap: &mut Gap,
    sentence: usize,
) -> Word {
    let kind = if chars > MAX_KEYWORD_CHARS {
        Word::Other
    } else {
        Word::classify(word)
    };
    if kind == Word::Other {
        // An unrelated word between two keywords breaks any phrase across it.
        *gap = Gap::Other;
        return kind;
    }
    keywords.push(Keyword {
        word: kind,
        start,
        end,
        gap_before: *gap,
        sentence,
    });
    *gap = Gap::Space;
    kind
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Curly apostrophes (’ and ‘) read as `'`.
fn fold_apostrophe(c: char) -> char {
    match c {
        '\u{2019}' | '\u{2018}' => '\'',
        c => c,
    }
}

/// For each keyword index, the index of the first verb at or after it.
fn next_verb_index(keywords: &[Keyword], next: &mut Vec<Option<usize>>) {
    next.clear();
    next.resize(keywords.len() + 1, None);
    for at in (0..keywords.len()).rev() {
        next[at] = if keywords[at].word.is_verb() {
            Some(at)
        } else {
            next[at + 1]
        };
    }
}

/// Whether `words` start at keyword `at`, each separated from the previous one by whitespace.
/// `None` in `words` is an optional word: it matches when present and is skipped otherwise.
/// Returns the index of the last matched keyword.
fn phrase(keywords: &[Keyword], at: usize, words: &[(Word, bool)]) -> Option<usize> {
    let mut next = at;
    let mut last = None;
    for &(word, optional) in words {
        let matches = keywords
            .get(next)
            .is_some_and(|k| k.word == word && (last.is_none() || k.gap_before == Gap::Space));
        if matches {
            last = Some(next);
            next += 1;
        } else if !optional {
            return None;
        }
    }
    last
}

const fn req(word: Word) -> (Word, bool) {
    (word, false)
}

const fn opt(word: Word) -> (Word, bool) {
    (word, true)
}

/// The last keyword of a plan phrase starting at `at` ("[immediate] next step/task", "next
/// immediate step/task", "planned action"), if one starts there.
fn plan_phrase(keywords: &[Keyword], at: usize) -> Option<usize> {
    use Word::*;
    phrase(keywords, at, &[opt(Immediate), req(Next), req(Step)])
        .or_else(|| phrase(keywords, at, &[opt(Immediate), req(Next), req(Task)]))
        .or_else(|| phrase(keywords, at, &[req(Next), req(Immediate), req(Step)]))
        .or_else(|| phrase(keywords, at, &[req(Next), req(Immediate), req(Task)]))
        .or_else(|| phrase(keywords, at, &[req(Planned), req(Action)]))
}

/// Rules 1 and 3.
fn plan_then_verb(keywords: &[Keyword], next_verb: &[Option<usize>], at: usize) -> bool {
    let Some(last) = plan_phrase(keywords, at) else {
        return false;
    };
    // Rule 3: "next step: run ..." (the colon and the verb directly after the phrase).
    if let Some(following) = keywords.get(last + 1) {
        if following.gap_before == Gap::Colon && following.word.is_verb() {
            return true;
        }
    }
    // Rule 1: a verb anywhere within the window.
    verb_within(keywords, next_verb, last, PLAN_WINDOW, false)
}

/// Rule 2.
fn intent_then_verb(keywords: &[Keyword], next_verb: &[Option<usize>], at: usize) -> bool {
    use Word::*;
    let last = phrase(keywords, at, &[req(ILl)])
        .or_else(|| phrase(keywords, at, &[req(I), req(Will)]))
        .or_else(|| match phrase(keywords, at, &[req(Let), req(Me)]) {
            Some(me) if phrase(keywords, me, &[req(Me), req(Know)]).is_some() => None,
            other => other,
        });
    match last {
        Some(last) => verb_within(keywords, next_verb, last, INTENT_WINDOW, true),
        None => false,
    }
}

/// Whether a verb follows keyword `last` within `window` characters (and, if asked, in the same
/// sentence).
fn verb_within(
    keywords: &[Keyword],
    next_verb: &[Option<usize>],
    last: usize,
    window: usize,
    same_sentence: bool,
) -> bool {
    let Some(verb) = next_verb.get(last + 1).copied().flatten() else {
        return false;
    };
    let (from, to) = (&keywords[last], &keywords[verb]);
    to.start.saturating_sub(from.end) <= window && (!same_sentence || to.sentence == from.sentence)
}

/// Rule 4: "still/now need(s)/required to <verb>".
fn still_need_to(keywords: &[Keyword], at: usize) -> bool {
    use Word::*;
    [Still, Now].into_iter().any(|adverb| {
        [Need, Required].into_iter().any(|need| {
            phrase(keywords, at, &[req(adverb), req(need), req(To)])
                .and_then(|to| keywords.get(to + 1))
                .is_some_and(|verb| verb.gap_before == Gap::Space && verb.word.is_verb())
        })
    })
}

/// Rule 5: "test(s) have/has/were/was not [yet] [been] run" and the contracted forms.
fn tests_not_run(keywords: &[Keyword], at: usize) -> bool {
    use Word::*;
    [Tests, Test].into_iter().any(|subject| {
        phrase(
            keywords,
            at,
            &[
                req(subject),
                req(Have),
                req(Not),
                opt(Yet),
                opt(Been),
                req(Run),
            ],
        )
        .or_else(|| {
            phrase(
                keywords,
                at,
                &[req(subject), req(HaveNot), opt(Yet), opt(Been), req(Run)],
            )
        })
        .is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keywords(text: &str) -> Vec<Keyword> {
        let mut scratch = Scratch::default();
        assert_eq!(tokenize(text, false, &mut scratch), text.len());
        scratch.keywords
    }

    /// The reference: the rules on a tokenization of the whole text.
    fn narrates_whole(text: &str) -> bool {
        fires(&keywords(text), &mut Vec::new())
    }

    fn narrates(text: &str) -> bool {
        let verdict = NarrationCheck::new().narrates(text);
        assert_eq!(verdict, narrates_whole(text), "{text:?}");
        verdict
    }

    fn words(text: &str) -> Vec<(Word, usize, usize, Gap, usize)> {
        keywords(text)
            .into_iter()
            .map(|k| (k.word, k.start, k.end, k.gap_before, k.sentence))
            .collect()
    }

    #[test]
    fn tokenizer_keeps_keywords_with_positions_gaps_and_sentences() {
        use Word::*;
        assert_eq!(
            words("I’ll run it. Next step: Read main.rs"),
            vec![
                (ILl, 0, 4, Gap::Space, 0),
                (Run, 5, 8, Gap::Space, 0),
                (Next, 13, 17, Gap::Other, 1),
                (Step, 18, 22, Gap::Space, 1),
                (Read, 24, 28, Gap::Colon, 1),
            ]
        );
    }

    #[test]
    fn long_words_and_apostrophes_at_edges_are_not_keywords() {
        let found: Vec<_> = keywords("readreadread 'run' tests' don't i'll")
            .into_iter()
            .map(|k| k.word)
            .collect();
        assert_eq!(found, [Word::Run, Word::Tests, Word::ILl]);
    }

    #[test]
    fn verb_must_follow_the_phrase() {
        assert!(!narrates("Run it, I will."));
        assert!(narrates("I will run it."));
    }

    /// Every verdict of the check, at several chunk sizes, against the whole-text reference.
    fn agrees(text: &str) -> bool {
        let whole = narrates_whole(text);
        let mut check = NarrationCheck::new();
        for chunk_bytes in [CHUNK_BYTES, 64, 9, 1] {
            assert_eq!(
                check.narrates_in_chunks(text, chunk_bytes),
                whole,
                "chunks of {chunk_bytes}: {text:?}"
            );
        }
        whole
    }

    #[test]
    fn starters_are_found_in_every_spelling_and_position() {
        for text in [
            "NEXT STEP: RUN",
            "nExT sTeP iS tO rUn",
            "immediate next task: fix",
            "Planned actions: edit",
            "I\u{a0}will\u{2003}run",
            "i will\n\n\n\n\nrun",
            "I‘LL run",
            "I’ll run",
            "x. I'll run",
            "(let me run)",
            "_still need to run",
            "still need to run",
            "Now needs to check",
            "TESTS were not yet been run",
            "test wasn’t run",
            "é next step: run",
            "énext step: run",
            "don't let me run",
            "don'tlet me run",
            "a'next step: run",
            "'next step: run",
            "İ will run",
            "\u{212A}now. Let me know, I'll run",
        ] {
            agrees(text);
        }
        assert!(agrees("I’ll run"));
        assert!(agrees("'next step: run"));
        assert!(!agrees("a'next step: run"), "one word a'next");
        assert!(!agrees("énext step: run"));
        assert!(!agrees("İ will run"), "İ lowercases to i and a dot");
        assert!(!agrees("_still need to run"));
    }

    #[test]
    fn regions_reach_as_far_as_the_rules_do() {
        let spaces = " ".repeat(2_000);
        let filler = "word ".repeat(60); // 300 characters
        for text in [
            // Phrases joined by long whitespace, which no window bounds.
            format!("next{spaces}step:{spaces}run"),
            format!("still{spaces}need{spaces}to{spaces}run"),
            format!("tests{spaces}have{spaces}not{spaces}been{spaces}run"),
            format!("I{spaces}will run"),
            // Verbs at the edge of the windows, past filler words that end nothing.
            format!("The next step is {filler}{} run", "x".repeat(16)),
            format!("The next step is {filler}{} run", "x".repeat(17)),
            format!("The next step is {filler}{} run", "x".repeat(19)),
            format!("I will {} run", "word ".repeat(31)),
            format!("I will {} run", "word ".repeat(32)),
            // Windows open only where a phrase ends, and "let me know" closes the one "let me"
            // opened, but only that one.
            format!("let me me know {} run", "word ".repeat(20)),
            format!("let me know {} run", "word ".repeat(20)),
            format!("let me know me {} run", "word ".repeat(20)),
            format!("tell me {} run", "word ".repeat(20)),
            format!("immediate step {} run", "word ".repeat(20)),
            format!("next immediate task {} run", "word ".repeat(40)),
            format!(
                "planned {} action {} run",
                "word ".repeat(2),
                "word ".repeat(20)
            ),
            format!("I'll {} run", "word ".repeat(25)),
            // A region that would end before a later one starts, and one that runs on.
            format!("next step {filler} now {filler} let me {filler} run"),
            format!("{}I will run", "next step now let me ".repeat(100)),
        ] {
            agrees(&text);
        }
    }

    #[test]
    fn the_check_agrees_with_the_whole_text_on_generated_texts() {
        let words = [
            "next",
            "Next",
            "NEXT",
            "immediate",
            "step",
            "Steps",
            "task",
            "tasks",
            "planned",
            "action",
            "actions",
            "I'll",
            "I’ll",
            "i‘ll",
            "I",
            "i",
            "will",
            "Will",
            "let",
            "me",
            "know",
            "still",
            "now",
            "need",
            "needs",
            "required",
            "to",
            "tests",
            "test",
            "have",
            "has",
            "were",
            "was",
            "not",
            "haven't",
            "wasn’t",
            "yet",
            "been",
            "read",
            "inspect",
            "examine",
            "edit",
            "fix",
            "run",
            "RUN",
            "check",
            "start",
            "the",
            "code",
            "éa",
            "İ",
            "\u{212A}now",
            "nowhere",
            "context",
            "let's",
            "don't",
            "a'next",
            "willing",
            "rerun",
            "main.rs",
            "readreadread",
            "next step",
            "immediate next task:",
            "next immediate step",
            "planned action:",
            "I will",
            "let me",
            "let me know",
            "still need to",
            "now required to",
            "tests have not",
            "test wasn’t yet been",
            "haven't been",
            "Next Steps:\n",
        ];
        let separators = [
            " ", " ", " ", "  ", "\n", "\t", "\u{a0}", "\u{2003}", ". ", "! ", "? ", ".", ":",
            " : ", ",", "'", "’", "-", "_", "é",
        ];
        let long = [" ".repeat(330), "word ".repeat(64), "x".repeat(150)];
        let mut random = crate::tests::robustness::XorShift(0x5eed_0f9a_7d01);
        let mut fired = 0;
        for _ in 0..4_000 {
            let mut text = String::new();
            for _ in 0..random.next() % 30 {
                text.push_str(words[random.next() % words.len()]);
                match random.next() % 20 {
                    0 => text.push_str(&long[random.next() % long.len()]),
                    1..=9 => text.push(' '),
                    _ => text.push_str(separators[random.next() % separators.len()]),
                }
            }
            fired += usize::from(agrees(&text));
        }
        // Both verdicts occur, so the comparison means something.
        assert!((800..3_200).contains(&fired), "{fired} fired");
    }
}
