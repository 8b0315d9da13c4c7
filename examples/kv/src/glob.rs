//! Redis's glob matcher (`stringmatchlen`), used by `CONFIG GET` patterns.

/// Matches `*`, `?`, `[abc]`, `[^a-z]` and `\x` escapes like Redis does.
pub(crate) fn glob_match(pattern: &[u8], text: &[u8], nocase: bool) -> bool {
    let (mut p, mut t) = (0usize, 0usize);
    // Backtracking point for the most recent `*`: one star suffices for linear-ish behaviour.
    let mut star: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, t));
                    continue;
                }
                _ if t < text.len() => {
                    if let Some(next_p) = match_one(pattern, p, text[t], nocase) {
                        p = next_p;
                        t += 1;
                        continue;
                    }
                }
                _ => {}
            }
        } else if t == text.len() {
            return true;
        }
        // Mismatch: let the last star swallow one more byte.
        match star {
            Some((star_p, star_t)) if star_t < text.len() => {
                star = Some((star_p, star_t + 1));
                p = star_p;
                t = star_t + 1;
            }
            _ => return false,
        }
    }
}

/// Matches the single pattern element at `p` (not `*`) against `c`; returns the index after it.
fn match_one(pattern: &[u8], p: usize, c: u8, nocase: bool) -> Option<usize> {
    let eq = |a: u8, b: u8| {
        if nocase {
            a.eq_ignore_ascii_case(&b)
        } else {
            a == b
        }
    };
    match pattern[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => eq(pattern[p + 1], c).then_some(p + 2),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut matched = false;
            while i < pattern.len() && pattern[i] != b']' {
                if pattern[i] == b'\\' && i + 1 < pattern.len() {
                    matched |= eq(pattern[i + 1], c);
                    i += 2;
                } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']'
                {
                    let (mut lo, mut hi) = (pattern[i], pattern[i + 2]);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let mut c = c;
                    if nocase {
                        (c, lo, hi) = (
                            c.to_ascii_lowercase(),
                            lo.to_ascii_lowercase(),
                            hi.to_ascii_lowercase(),
                        );
                    }
                    matched |= (lo..=hi).contains(&c);
                    i += 3;
                } else {
                    matched |= eq(pattern[i], c);
                    i += 1;
                }
            }
            // An unterminated class ends at the pattern's end, as in Redis.
            let after = (i + 1).min(pattern.len());
            (matched != negate).then_some(after)
        }
        literal => eq(literal, c).then_some(p + 1),
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn stars_and_question_marks() {
        assert!(glob_match(b"*", b"anything", false));
        assert!(glob_match(b"*", b"", false));
        assert!(glob_match(b"app*", b"appendonly", false));
        assert!(glob_match(b"*only", b"appendonly", false));
        assert!(glob_match(b"a*d*y", b"appendonly", false));
        assert!(!glob_match(b"a*x", b"appendonly", false));
        assert!(glob_match(b"s?ve", b"save", false));
        assert!(!glob_match(b"s?ve", b"sve", false));
    }

    #[test]
    fn classes_escapes_and_case() {
        assert!(glob_match(b"[sx]ave", b"save", false));
        assert!(!glob_match(b"[^s]ave", b"save", false));
        assert!(glob_match(b"[a-z]ave", b"save", false));
        assert!(glob_match(b"\\*", b"*", false));
        assert!(!glob_match(b"\\*", b"a", false));
        assert!(glob_match(b"SAVE", b"save", true));
        assert!(!glob_match(b"SAVE", b"save", false));
    }
}
