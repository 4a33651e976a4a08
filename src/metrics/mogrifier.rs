//! DogStatsD mogrifiers, as the Go service reads them (`USE_DOG_STATSD_MOGRIFIERS`): each named
//! mogrifier is a regular expression over a stat name (`DOG_STATSD_MOGRIFIER_<NAME>_PATTERN`), a
//! new name (`_NAME`) and tags (`_TAGS`, `k:v,...`), where `$0`, `$1`, ... stand for the match and
//! its groups. The first mogrifier in the list whose pattern is found anywhere in a name rewrites
//! it; a name no pattern matches is sent unchanged. The tags come after `EXTRA_TAGS` on the line.
//!
//! The pattern syntax is the `regex` crate's, which is Go's RE2 syntax for everything a stat name
//! needs (groups, classes, anchors, repetition); both refuse backreferences and look-around.

use regex::Regex;

/// Why a mogrifier's variables cannot be used: the variable at fault and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MogrifierError {
    /// `_PATTERN` or `_NAME` is unset or empty.
    #[error("required by the mogrifier {mogrifier} (USE_DOG_STATSD_MOGRIFIERS)")]
    Missing {
        /// The mogrifier's name.
        mogrifier: String,
    },
    /// `_PATTERN` is not a regular expression.
    #[error("not a regular expression: {0}")]
    Pattern(String),
    /// A `_TAGS` item is not `key:value` with both parts non-empty.
    #[error("expected key:value pairs separated by commas (both non-empty), got {0:?}")]
    Tag(String),
}

/// A `$n` template: literal text and group references, resolved against one match.
#[derive(Debug, Clone)]
struct Template(Vec<Piece>);

#[derive(Debug, Clone)]
enum Piece {
    Text(String),
    Group(usize),
}

impl Template {
    /// Splits `text` at every `$` followed by digits. As in Go, a reference to a group the
    /// pattern does not have stays in the output as written.
    fn parse(text: &str, groups: usize) -> Template {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            literal.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            let index = after[..digits]
                .parse::<usize>()
                .ok()
                .filter(|&i| i < groups);
            match index {
                Some(i) => {
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(Piece::Group(i));
                }
                None => literal.push_str(&rest[at..at + 1 + digits]),
            }
            rest = &after[digits..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Template(pieces)
    }

    /// The text with each group replaced by what it matched (a group that took no part: empty).
    fn expand(&self, caps: &regex::Captures<'_>) -> String {
        let mut out = String::new();
        for piece in &self.0 {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Group(i) => out.push_str(caps.get(*i).map_or("", |m| m.as_str())),
            }
        }
        out
    }
}

/// One named mogrifier.
#[derive(Debug, Clone)]
pub struct Mogrifier {
    pattern: Regex,
    name: Template,
    tags: Vec<(String, Template)>,
}

impl Mogrifier {
    /// The pattern from `_PATTERN`; `Err` names what is wrong with it.
    pub fn pattern(mogrifier: &str, pattern: &str) -> Result<Regex, MogrifierError> {
        if pattern.is_empty() {
            return Err(MogrifierError::Missing {
                mogrifier: mogrifier.into(),
            });
        }
        Regex::new(pattern).map_err(|e| MogrifierError::Pattern(e.to_string()))
    }

    /// The mogrifier of `pattern`, the `_NAME` template `name` (non-empty) and the `_TAGS` pairs.
    pub fn new(pattern: Regex, name: &str, tags: Vec<(String, String)>) -> Mogrifier {
        let groups = pattern.captures_len();
        Mogrifier {
            name: Template::parse(name, groups),
            tags: tags
                .into_iter()
                .map(|(k, v)| (k, Template::parse(&v, groups)))
                .collect(),
            pattern,
        }
    }

    /// `_TAGS`: `k:v,...` as Go reads it (exactly one `:` per item, neither side empty; a key
    /// given twice keeps its last value), in the order written.
    pub fn tags(text: &str) -> Result<Vec<(String, String)>, MogrifierError> {
        let mut out: Vec<(String, String)> = Vec::new();
        if text.trim().is_empty() {
            return Ok(out);
        }
        for item in text.split(',') {
            let mut parts = item.split(':');
            let (Some(k), Some(v), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(MogrifierError::Tag(item.into()));
            };
            if k.is_empty() || v.is_empty() {
                return Err(MogrifierError::Tag(item.into()));
            }
            match out.iter_mut().find(|(key, _)| key == k) {
                Some(slot) => slot.1 = v.into(),
                None => out.push((k.into(), v.into())),
            }
        }
        Ok(out)
    }
}

/// Rewrites `name` with the first of `mogrifiers` whose pattern it contains: the new name and
/// the tags (`k:v`), or `None` when none matches.
pub(crate) fn mogrify(mogrifiers: &[Mogrifier], name: &str) -> Option<(String, Vec<String>)> {
    mogrifiers.iter().find_map(|m| {
        let caps = m.pattern.captures(name)?;
        let tags = m
            .tags
            .iter()
            .map(|(k, v)| format!("{k}:{}", v.expand(&caps)))
            .collect();
        Some((m.name.expand(&caps), tags))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, name: &str, tags: &str) -> Mogrifier {
        let re = Mogrifier::pattern("T", pattern).unwrap();
        Mogrifier::new(re, name, Mogrifier::tags(tags).unwrap())
    }

    #[test]
    fn groups_fill_the_name_and_the_tags() {
        let ms = [m(
            r"^ratelimit\.service\.rate_limit\.([^.]+)\.(.*)\.([^.]+)$",
            "ratelimit.service.rate_limit.$3",
            "domain:$1,descriptor:$2",
        )];
        let (name, tags) = mogrify(
            &ms,
            "ratelimit.service.rate_limit.api.client_key.total_hits",
        )
        .unwrap();
        assert_eq!(name, "ratelimit.service.rate_limit.total_hits");
        assert_eq!(tags, ["domain:api", "descriptor:client_key"]);
        assert_eq!(mogrify(&ms, "ratelimit_server.X.total_requests"), None);
    }

    #[test]
    fn the_first_match_wins_and_the_search_is_unanchored() {
        let ms = [m("total", "first", ""), m("hits", "second", "k:v")];
        assert_eq!(mogrify(&ms, "a.total_hits"), Some(("first".into(), vec![])));
        assert_eq!(
            mogrify(&ms, "a.over_hits"),
            Some(("second".into(), vec!["k:v".into()]))
        );
    }

    #[test]
    fn unknown_groups_stay_literal_and_absent_groups_are_empty() {
        let ms = [m("^(a)(x)?", "$0-$1-$2-$9-$-$x", "")];
        assert_eq!(mogrify(&ms, "ab").unwrap().0, "a-a--$9-$-$x");
    }

    #[test]
    fn bad_tags_and_patterns_are_refused() {
        for bad in ["k", "k:v:w", ":v", "k:", "a:b,"] {
            assert!(Mogrifier::tags(bad).is_err(), "{bad}");
        }
        assert_eq!(
            Mogrifier::tags("a:1,b:$1,a:2").unwrap(),
            [("a".into(), "2".into()), ("b".into(), "$1".into())]
        );
        assert!(matches!(
            Mogrifier::pattern("T", "("),
            Err(MogrifierError::Pattern(_))
        ));
        assert!(matches!(
            Mogrifier::pattern("T", ""),
            Err(MogrifierError::Missing { .. })
        ));
    }
}
