//! The trace buffer: sections separated by a horizontal rule, written straight into the final
//! prompt so the text is built once, without intermediate copies.

/// Between two trace sections.
pub(crate) const SECTION_SEPARATOR: &str = "\n\n---\n\n";

pub(crate) struct Trace {
    out: String,
    start: usize,
    sections: usize,
    /// Where each message's sections end (byte offsets in `out`), in message order.
    message_ends: Vec<usize>,
}

impl Trace {
    /// A trace that continues `out` (which already holds the preamble).
    pub(crate) fn after(out: String) -> Self {
        let start = out.len();
        Self {
            out,
            start,
            sections: 0,
            message_ends: Vec::new(),
        }
    }

    /// A trace in `out` (empty) that continues one whose earlier sections are elsewhere: its
    /// first section is separated from them as every later section is.
    pub(crate) fn continuing(out: String) -> Self {
        Self {
            sections: 1,
            ..Self::after(out)
        }
    }

    /// Bytes written so far (preamble included).
    pub(crate) fn len(&self) -> usize {
        self.out.len()
    }

    /// Records that a message's sections are complete.
    pub(crate) fn end_message(&mut self) {
        self.message_ends.push(self.out.len());
    }

    /// Starts a section with `header` and its line break, and returns the buffer for its body.
    pub(crate) fn section(&mut self, header: &str) -> &mut String {
        if self.sections > 0 {
            self.out.push_str(SECTION_SEPARATOR);
        }
        self.sections += 1;
        self.out.push_str(header);
        self.out.push('\n');
        &mut self.out
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.sections == 0
    }

    /// The whole text, the byte offset where the trace begins, and where each message ends.
    pub(crate) fn finish(self) -> (String, usize, Vec<usize>) {
        (self.out, self.start, self.message_ends)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_separated_by_a_rule() {
        let mut trace = Trace::after("pre\n".to_owned());
        assert!(trace.is_empty());
        trace.section("[A]").push_str("one");
        trace.end_message();
        trace.section("[B]").push_str("two");
        trace.end_message();
        assert!(!trace.is_empty());
        let (text, start, ends) = trace.finish();
        assert_eq!(text, "pre\n[A]\none\n\n---\n\n[B]\ntwo");
        assert_eq!(start, 4);
        assert_eq!(ends, vec![11, text.len()]);
    }
}
