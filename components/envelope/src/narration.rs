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
//! Time is linear: one pass turns the text into the few words that matter (keywords) with their
//! positions, then each rule looks at a fixed number of neighbours plus a precomputed "next verb"
//! index; there is no backtracking.

/// Rule 1 window, in characters.
const PLAN_WINDOW: usize = 320;
/// Rule 2 window, in characters.
const INTENT_WINDOW: usize = 160;
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

/// True when `text` narrates an action it does not request. See the module documentation.
pub(crate) fn narrates(text: &str) -> bool {
    let keywords = keywords(text);
    let next_verb = next_verb_index(&keywords);
    (0..keywords.len()).any(|at| {
        plan_then_verb(&keywords, &next_verb, at)
            || intent_then_verb(&keywords, &next_verb, at)
            || still_need_to(&keywords, at)
            || tests_not_run(&keywords, at)
    })
}

/// One pass over the characters: the keywords, with positions, gaps and sentence numbers.
fn keywords(text: &str) -> Vec<Keyword> {
    let mut keywords = Vec::new();
    let mut word = String::new();
    let mut word_chars = 0;
    let mut word_start = 0;
    let mut gap = Gap::Space;
    let mut sentence = 0;
    // A `.`, `!` or `?` that ends the sentence if whitespace follows.
    let mut pending_stop = false;

    let mut chars = text.chars().map(fold_apostrophe).enumerate().peekable();
    while let Some((at, c)) = chars.next() {
        let in_word = word_chars > 0;
        let joins_word = is_word_char(c)
            || (c == '\'' && in_word && chars.peek().is_some_and(|&(_, n)| n.is_alphabetic()));
        if joins_word {
            if !in_word {
                word_start = at;
            }
            word_chars += 1;
            if word_chars <= MAX_KEYWORD_CHARS {
                word.extend(c.to_lowercase());
            }
            pending_stop = false;
            continue;
        }
        if in_word {
            finish_word(
                &mut keywords,
                &word,
                word_chars,
                word_start,
                at,
                &mut gap,
                sentence,
            );
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
    }
    if word_chars > 0 {
        let end = word_start + word_chars;
        finish_word(
            &mut keywords,
            &word,
            word_chars,
            word_start,
            end,
            &mut gap,
            sentence,
        );
    }
    keywords
}

/// Records a finished word if it is a keyword; any word resets the gap that follows it.
fn finish_word(
    keywords: &mut Vec<Keyword>,
    word: &str,
    chars: usize,
    start: usize,
    end: usize,
    gap: &mut Gap,
    sentence: usize,
) {
    let kind = if chars > MAX_KEYWORD_CHARS {
        Word::Other
    } else {
        Word::classify(word)
    };
    if kind == Word::Other {
        // An unrelated word between two keywords breaks any phrase across it.
        *gap = Gap::Other;
        return;
    }
    keywords.push(Keyword {
        word: kind,
        start,
        end,
        gap_before: *gap,
        sentence,
    });
    *gap = Gap::Space;
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
fn next_verb_index(keywords: &[Keyword]) -> Vec<Option<usize>> {
    let mut next = vec![None; keywords.len() + 1];
    for at in (0..keywords.len()).rev() {
        next[at] = if keywords[at].word.is_verb() {
            Some(at)
        } else {
            next[at + 1]
        };
    }
    next
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
}
