//! "Did you mean" for config keys: the closest allowed name by edit distance, offered only when it
//! is close enough to be a plausible typo (`rate_limt` → `rate_limit`), never a random guess.

/// The candidate nearest to `word`, if at most a third of its letters (and at least one) differ.
pub(crate) fn nearest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let allowed = (word.chars().count() / 3).max(1);
    candidates
        .into_iter()
        .map(|c| (distance(word, c), c))
        .filter(|(d, _)| *d <= allowed)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance (insertions, deletions, substitutions), case-insensitive, on chars. Keys
/// are short, so the two-row table costs nothing worth bounding further.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.to_lowercase().chars().collect();
    let b: Vec<char> = b.to_lowercase().chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut row = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            row[j + 1] = substitute.min(prev[j + 1] + 1).min(row[j] + 1);
        }
        std::mem::swap(&mut prev, &mut row);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_a_close_key_and_nothing_for_a_far_one() {
        let keys = ["rate_limit", "requests_per_unit", "unit", "descriptors"];
        assert_eq!(nearest("rate_limt", keys), Some("rate_limit"));
        assert_eq!(nearest("ratelimit", keys), Some("rate_limit"));
        assert_eq!(nearest("requestsperunit", keys), Some("requests_per_unit"));
        assert_eq!(nearest("Unit", keys), Some("unit"));
        assert_eq!(nearest("colour", keys), None);
    }

    #[test]
    fn distance_counts_single_edits() {
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("same", "same"), 0);
    }
}
