//! The Go stats library's stat-name sanitiser: `:` and `|` become `_`, and so do the dots of
//! dotted IPv4 quads, so a value cannot inject statsd syntax or split a name. Used at load for the
//! default stats key of every limit and per request for keys that carry runtime values.

use std::borrow::Cow;

/// Applies the Go stat-name sanitiser; borrows when nothing changes (the common case).
pub fn sanitize(key: Cow<'_, str>) -> Cow<'_, str> {
    let needs = key.contains([':', '|']) || ipv4_spans(&key).next().is_some();
    if !needs {
        return key;
    }
    let mut bytes = key.replace([':', '|'], "_").into_bytes();
    let spans: Vec<(usize, usize)> = ipv4_spans(&String::from_utf8_lossy(&bytes)).collect();
    for (start, end) in spans {
        for b in &mut bytes[start..end] {
            if *b == b'.' {
                *b = b'_';
            }
        }
    }
    // Only ASCII dots were replaced by ASCII underscores, so this stays valid UTF-8.
    Cow::Owned(String::from_utf8_lossy(&bytes).into_owned())
}

/// Byte ranges of dotted quads (`\d{1,3}(\.\d{1,3}){3}`), leftmost first, non-overlapping, found
/// the way an unanchored regex scan finds them.
fn ipv4_spans(s: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let b = s.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            if let Some(end) = quad_at(b, i) {
                let start = i;
                i = end;
                return Some((start, end));
            }
            i += 1;
        }
        None
    })
}

/// End of a dotted quad starting at `i`, preferring the longest match (greedy `\d{1,3}`).
fn quad_at(b: &[u8], i: usize) -> Option<usize> {
    fn group(b: &[u8], at: usize, left: u8) -> Option<usize> {
        let digits = b[at..]
            .iter()
            .take(3)
            .take_while(|c| c.is_ascii_digit())
            .count();
        // Backtrack from the longest digit run, as a regex engine would.
        (1..=digits).rev().find_map(|n| {
            let end = at + n;
            if left == 0 {
                return Some(end);
            }
            (b.get(end) == Some(&b'.'))
                .then(|| group(b, end + 1, left - 1))
                .flatten()
        })
    }
    group(b, i, 3)
}
