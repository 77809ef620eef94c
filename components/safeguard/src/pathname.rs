//! Lexical path folding, the one piece of path handling the context needs while it is read
//! (a leaf: [`crate::paths`] resolves and checks paths against the context).

/// Folds `.`, `..` and repeated `/` of an absolute path (`..` never climbs above `/`).
pub(crate) fn normalize(absolute: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in absolute.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    let mut out = String::with_capacity(absolute.len());
    for part in &parts {
        out.push('/');
        out.push_str(part);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}
