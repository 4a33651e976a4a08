//! Cache keys: which counter a limit of a descriptor uses.
//!
//! The Go service's key, `PREFIX + domain + "_" + (key + "_" + value + "_")* + window_start`, is not
//! injective: entries `a`/`b_c` and `a_b`/`c` share one counter, so a caller who controls a header
//! value can spend someone else's budget. The default format here length-prefixes every part, which
//! makes the key injective, wraps the identity in `{…}` so Redis Cluster puts all keys of one limit
//! in one slot, and ends with the algorithm, the window length (or calendar, `month@Europe/Paris`)
//! and (for fixed windows) the window start, so state is never read by the wrong algorithm and an old window's counter simply expires. [`KeyFormat::Go`] reproduces the Go key byte for byte, for fleets that mix Go and Rust
//! instances on one Redis during a migration (and with it, the Go collision).

use std::fmt::Write;
use std::ops::Range;

use super::split::{self, SubKey};

use crate::algorithm::fixed_window::window_start;
use crate::algorithm::{Algorithm, LimitSpec};
use crate::clock::Timestamp;

/// `CACHE_KEY_FORMAT`: which cache key layout the limiter builds (see this module).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KeyFormat {
    /// Injective, hash-tagged, algorithm-aware (the default).
    #[default]
    Safe,
    /// envoyproxy/ratelimit's exact fixed-window key (collides; see this module).
    Go,
}

/// Builds cache keys for one service: a prefix and a format.
#[derive(Debug, Clone, Default)]
pub struct KeyBuilder {
    prefix: String,
    format: KeyFormat,
}

impl KeyBuilder {
    /// A builder prepending `prefix` (verbatim, as `CACHE_KEY_PREFIX`) to keys of `format`.
    pub fn new(prefix: impl Into<String>, format: KeyFormat) -> KeyBuilder {
        KeyBuilder {
            prefix: prefix.into(),
            format,
        }
    }

    /// How every key of `domain` begins: the default format's `PREFIX{len:domain`, and under
    /// [`KeyFormat::Go`] also the Go key's `PREFIXdomain_` (first limits of fixed windows use it,
    /// every other key the default format). A text starting with the first cannot be a key of
    /// another domain (the length says where the domain ends); the Go one can, when another
    /// domain's name starts with `domain_`.
    pub fn domain_roots(&self, domain: &str) -> (String, Option<String>) {
        let mut safe = self.prefix.clone();
        safe.push('{');
        push_part(&mut safe, domain);
        let go = (self.format == KeyFormat::Go).then(|| format!("{}{domain}_", self.prefix));
        (safe, go)
    }

    /// The key for `spec` over `entries` (key, value as counted: the wildcard pattern for
    /// `share_threshold` levels) in `domain` at `now`.
    pub fn build<'a>(
        &self,
        domain: &str,
        entries: impl Iterator<Item = (&'a str, &'a str)>,
        spec: &LimitSpec,
        now: Timestamp,
    ) -> String {
        self.build_split(false, domain, entries, spec, now).0
    }

    /// The key of a further limit of `rate_limits` (not the first): always the default format,
    /// because Go keys of two fixed windows of one descriptor can coincide (the start of a day is
    /// also the start of a second), and Go instances never share such limits anyway.
    pub fn build_extra<'a>(
        &self,
        domain: &str,
        entries: impl Iterator<Item = (&'a str, &'a str)>,
        spec: &LimitSpec,
        now: Timestamp,
    ) -> String {
        self.build_split(true, domain, entries, spec, now).0
    }

    /// The key of [`KeyBuilder::build`] (or, when `extra`, of [`KeyBuilder::build_extra`]) and
    /// the length of its counter's identity across windows: a fixed window's key without its
    /// window start (and the separator before it), every other key whole. A share that follows
    /// demand is kept per identity, so that it carries over from one window to the next.
    pub fn build_split<'a>(
        &self,
        extra: bool,
        domain: &str,
        entries: impl Iterator<Item = (&'a str, &'a str)>,
        spec: &LimitSpec,
        now: Timestamp,
    ) -> (String, usize) {
        let (key, identity, _) = self.build_sub(extra, None, domain, entries, spec, now);
        (key, identity)
    }

    /// [`KeyBuilder::build_split`] for sub-key `sub` of a split limit ([`super::split`]), also
    /// giving where its marker sits in the key (`None` without `sub`). A sub-key is always of the
    /// default format: its marker lives in the hash tag, which a Go key does not have.
    pub fn build_sub<'a>(
        &self,
        extra: bool,
        sub: Option<SubKey>,
        domain: &str,
        entries: impl Iterator<Item = (&'a str, &'a str)>,
        spec: &LimitSpec,
        now: Timestamp,
    ) -> (String, usize, Option<Range<usize>>) {
        // The Go key names a window start, which only fixed windows have; other algorithms (which
        // Go instances cannot share anyway) always use the default format.
        let format = match spec.algorithm {
            Algorithm::FixedWindow if !extra && sub.is_none() => self.format,
            _ => KeyFormat::Safe,
        };
        let mut key = String::with_capacity(self.prefix.len() + domain.len() + 48);
        let mut identity = None;
        let mut marker = None;
        key.push_str(&self.prefix);
        match format {
            KeyFormat::Go => {
                key.push_str(domain);
                key.push('_');
                for (k, v) in entries {
                    key.push_str(k);
                    key.push('_');
                    key.push_str(v);
                    key.push('_');
                }
                // Without the `_` before the window start.
                identity = Some(key.len().saturating_sub(1));
                push_number(&mut key, window_start(spec.window, now));
            }
            KeyFormat::Safe => {
                // `{len:domain|len:key=len:value...}`: a length before every part makes any two
                // different (domain, entries) lists give different strings.
                key.push('{');
                push_part(&mut key, domain);
                for (k, v) in entries {
                    key.push('|');
                    push_part(&mut key, k);
                    key.push('=');
                    push_part(&mut key, v);
                }
                // After the last length-prefixed part, `#` cannot be read as part of a value.
                if let Some(sub) = sub {
                    let start = key.len();
                    split::push_marker(&mut key, sub);
                    marker = Some(start..key.len());
                }
                key.push_str("}:");
                key.push_str(spec.algorithm.key_tag());
                key.push(':');
                // A calendar window names its calendar where others name their length, so a
                // limit switched to or from a calendar never reads the other's counter.
                match spec.window.calendar() {
                    Some(calendar) => {
                        let _ = write!(key, "{calendar}");
                    }
                    None => push_number(&mut key, spec.window.secs()),
                }
                if spec.algorithm == Algorithm::FixedWindow {
                    identity = Some(key.len());
                    key.push(':');
                    push_number(&mut key, window_start(spec.window, now));
                }
            }
        }
        let identity = identity.unwrap_or(key.len());
        (key, identity, marker)
    }
}

/// Appends `len:part`.
fn push_part(key: &mut String, part: &str) {
    push_number(key, part.len() as u64);
    key.push(':');
    key.push_str(part);
}

/// Appends `n` in decimal. Every key is built on the request path, with three to seven numbers
/// in it: `itoa`'s digits cost a fraction of `core::fmt`'s machinery.
fn push_number(key: &mut String, n: u64) {
    key.push_str(itoa::Buffer::new().format(n));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(window_secs: u64) -> LimitSpec {
        LimitSpec {
            algorithm: Algorithm::FixedWindow,
            limit: 10,
            window: crate::algorithm::Window::from_secs(window_secs).unwrap(),
            burst: 0,
        }
    }

    #[test]
    fn numbers_are_written_as_decimal_text() {
        for n in [
            0,
            7,
            9,
            10,
            99,
            100,
            1234,
            1_000_000,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut key = String::from("k");
            push_number(&mut key, n);
            assert_eq!(key, format!("k{n}"));
        }
        let long = "v".repeat(123);
        let mut key = String::new();
        push_part(&mut key, &long);
        assert_eq!(key, format!("123:{long}"));
    }

    #[test]
    fn every_key_of_a_domain_starts_with_one_of_its_roots() {
        for format in [KeyFormat::Safe, KeyFormat::Go] {
            let b = KeyBuilder::new("p:", format);
            let (safe, go) = b.domain_roots("api");
            let first = b.build(
                "api",
                [("u", "a")].into_iter(),
                &spec(60),
                Timestamp::from_secs(5),
            );
            let extra = b.build_extra(
                "api",
                [("u", "a")].into_iter(),
                &spec(60),
                Timestamp::from_secs(5),
            );
            assert!(extra.starts_with(&safe), "{extra} {safe}");
            match go {
                Some(go) => assert!(first.starts_with(&go), "{first} {go}"),
                None => assert!(first.starts_with(&safe), "{first} {safe}"),
            }
            let other = b.build(
                "apix",
                [("u", "a")].into_iter(),
                &spec(60),
                Timestamp::from_secs(5),
            );
            assert!(!other.starts_with(&safe));
        }
    }

    #[test]
    fn go_format_is_byte_for_byte_the_go_key() {
        let b = KeyBuilder::new("prefix:", KeyFormat::Go);
        let k = b.build(
            "domain",
            [("key", "value")].into_iter(),
            &spec(1),
            Timestamp::from_secs(1234),
        );
        assert_eq!(k, "prefix:domain_key_value_1234");
        let b = KeyBuilder::new("", KeyFormat::Go);
        let entries = [("key2", "value2"), ("subkey2", "subvalue2")];
        let k = b.build(
            "domain",
            entries.into_iter(),
            &spec(60),
            Timestamp::from_secs(1234),
        );
        assert_eq!(k, "domain_key2_value2_subkey2_subvalue2_1200");
    }

    #[test]
    fn go_format_collides_and_the_default_does_not() {
        let now = Timestamp::from_secs(0);
        let go = KeyBuilder::new("", KeyFormat::Go);
        let a = go.build("d", [("a", "b_c")].into_iter(), &spec(60), now);
        let b = go.build("d", [("a_b", "c")].into_iter(), &spec(60), now);
        assert_eq!(
            a, b,
            "the Go format shares one counter between different descriptors"
        );
        let safe = KeyBuilder::default();
        let a = safe.build("d", [("a", "b_c")].into_iter(), &spec(60), now);
        let b = safe.build("d", [("a_b", "c")].into_iter(), &spec(60), now);
        assert_ne!(a, b);
        assert_eq!(a, "{1:d|1:a=3:b_c}:fw:60:0");
    }

    #[test]
    fn buckets_have_one_key_across_windows_even_in_go_format() {
        let tb = LimitSpec {
            algorithm: Algorithm::TokenBucket,
            ..spec(60)
        };
        let go = KeyBuilder::new("p:", KeyFormat::Go);
        let a = go.build("d", [("k", "v")].into_iter(), &tb, Timestamp::from_secs(0));
        let b = go.build(
            "d",
            [("k", "v")].into_iter(),
            &tb,
            Timestamp::from_secs(600),
        );
        assert_eq!(a, b);
        assert_eq!(a, "p:{1:d|1:k=1:v}:tb:60");
    }

    #[test]
    fn a_calendar_window_names_its_calendar_and_ends_with_its_start() {
        use crate::algorithm::calendar::{Calendar, CalendarUnit, Zone};
        let zone = Zone::get("Europe/Berlin").unwrap();
        let calendar = Calendar::new(CalendarUnit::Month, 1, zone);
        let month = LimitSpec {
            window: spec(2_592_000).window.with_calendar(calendar),
            ..spec(2_592_000)
        };
        // 2026-02-28T22:00:00Z is in Berlin's February, which began at 2026-01-31T23:00:00Z.
        let now = Timestamp::from_secs(1_772_316_000);
        let safe = KeyBuilder::default().build("d", [("k", "v")].into_iter(), &month, now);
        assert_eq!(safe, "{1:d|1:k=1:v}:fw:month@Europe/Berlin:1769900400");
        let epoch =
            KeyBuilder::default().build("d", [("k", "v")].into_iter(), &spec(2_592_000), now);
        assert_eq!(epoch, "{1:d|1:k=1:v}:fw:2592000:1770336000");
        let go =
            KeyBuilder::new("", KeyFormat::Go).build("d", [("k", "v")].into_iter(), &month, now);
        assert_eq!(go, "d_k_v_1769900400");
    }

    /// A fixed window's identity is the same in every window (its key without the window start),
    /// in both formats; other algorithms' keys name no window and are their own identity.
    #[test]
    fn a_fixed_windows_identity_is_the_same_in_every_window() {
        let split = |b: &KeyBuilder, spec: &LimitSpec, secs: u64| {
            let entries = [("k", "v1")].into_iter();
            let (key, n) = b.build_split(false, "d", entries, spec, Timestamp::from_secs(secs));
            (key[..n].to_string(), key)
        };
        for (format, identity) in [
            (KeyFormat::Safe, "p:{1:d|1:k=2:v1}:fw:60"),
            (KeyFormat::Go, "p:d_k_v1"),
        ] {
            let b = KeyBuilder::new("p:", format);
            let (a, key_a) = split(&b, &spec(60), 60);
            let (later, key_later) = split(&b, &spec(60), 600);
            assert_ne!(key_a, key_later);
            assert_eq!(
                (a.as_str(), later.as_str()),
                (identity, identity),
                "{format:?}"
            );
            let tb = LimitSpec {
                algorithm: Algorithm::TokenBucket,
                ..spec(60)
            };
            let (bucket, key) = split(&b, &tb, 60);
            assert_eq!(bucket, key);
        }
    }

    #[test]
    fn default_format_separates_windows_and_delimiter_tricks() {
        let now = Timestamp::from_secs(0);
        let safe = KeyBuilder::default();
        let one = safe.build("d", [("k", "v|1:x=1:y")].into_iter(), &spec(60), now);
        let two = safe.build("d", [("k", "v"), ("x", "y")].into_iter(), &spec(60), now);
        assert_ne!(one, two);
        let minute = safe.build("d", [("k", "v")].into_iter(), &spec(60), now);
        let hour = safe.build("d", [("k", "v")].into_iter(), &spec(3600), now);
        assert_ne!(minute, hour);
    }
}
