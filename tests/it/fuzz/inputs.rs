//! Shared generators: JSON documents written as text (so that numbers can be any token, not only
//! what an f64 prints), hostile strings, boundary numbers, and byte-level mutations of an encoded
//! input. Every generator is bounded in size.

use proptest::prelude::*;

/// A JSON document as text is written: numbers are raw tokens (`1e400`, `-0`, 2^64), objects
/// keep their order and may repeat a key.
#[derive(Debug, Clone)]
pub(super) enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

/// The fields that are there, in order: an object's (or a YAML mapping's) `(key, value)` pairs
/// from `(key, maybe value)` ones, a generator having left some out.
pub(super) fn present<V>(
    named: impl IntoIterator<Item = (&'static str, Option<V>)>,
) -> Vec<(String, V)> {
    named
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v)))
        .collect()
}

impl J {
    /// An object from `(key, value)` pairs.
    pub(super) fn obj<const N: usize>(pairs: [(&str, J); N]) -> J {
        J::Obj(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    /// A string value.
    pub(super) fn s(s: impl Into<String>) -> J {
        J::Str(s.into())
    }

    /// A number token (any integer the inputs use).
    pub(super) fn n(n: impl Into<i128>) -> J {
        J::Num(n.into().to_string())
    }

    /// The document's text.
    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            J::Null => out.push_str("null"),
            J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            J::Num(n) => out.push_str(n),
            J::Str(s) => out.push_str(&serde_json::Value::from(s.as_str()).to_string()),
            J::Arr(items) => {
                out.push('[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            J::Obj(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    J::Str(k.clone()).write(out);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Number tokens at the boundaries the decoders check (u32, u64, i64, f64, the `/check` caps),
/// plus arbitrary integers and floats.
pub(super) fn number_text() -> impl Strategy<Value = String> {
    let edges = prop::sample::select(vec![
        "0",
        "1",
        "2",
        "-1",
        "-0",
        "2.0",
        "2.5",
        "1e3",
        "1E2",
        "1e400",
        "-1e400",
        "0.0000001",
        "4294967295",
        "4294967296",
        "9007199254740993",
        "9223372036854775807",
        "9223372036854775808",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775809",
        "1000000000",
        "1000000001",
        "60000",
        "60001",
        "1e9",
        "1.0e9",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        4 => edges,
        2 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| f.to_string()),
        2 => (0u64..100).prop_map(|n| n.to_string()),
    ]
}

/// Integers that reach every branch of a `u64` field: small counts, the u32 and i64 edges, the
/// top of the range.
pub(super) fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        4 => 0u64..8,
        1 => Just(u64::from(u32::MAX)),
        1 => Just(u64::from(u32::MAX) + 1),
        1 => Just(1u64 << 53),
        1 => Just(i64::MAX as u64),
        1 => Just(1u64 << 63),
        1 => Just(u64::MAX),
        1 => any::<u64>(),
    ]
}

/// Strings a hostile client sends: empty, control characters, separators of cache keys and log
/// lines, wildcards, non-ASCII, over the 4 096-byte value cap, and arbitrary text.
pub(super) fn nasty_string() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "",
        "a",
        "b",
        "*",
        "user:42",
        "\0",
        "line\nforged=1",
        "\r\n",
        "\u{202e}evil",
        "é",
        "🦀",
        "_",
        ".",
        "|1:x",
        "%s%n",
        "\\",
        "\"",
        "null",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        6 => fixed,
        3 => "[ -~]{0,12}",
        2 => "\\PC{0,8}",
        1 => (4090usize..4100).prop_map(|n| "v".repeat(n)),
    ]
}

/// Any JSON value, nested up to a few levels (wrong types for every field).
pub(super) fn any_json() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        number_text().prop_map(J::Num),
        nasty_string().prop_map(J::Str),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
            prop::collection::vec(("[a-z_]{0,10}", inner), 0..4).prop_map(J::Obj),
        ]
    })
}

/// Arrays or objects nested `depth` deep, past `serde_json`'s recursion limit (128) on purpose.
pub(super) fn deep_nesting() -> impl Strategy<Value = String> {
    (1usize..3000, any::<bool>(), any::<bool>()).prop_map(|(depth, arrays, closed)| {
        let (open, close) = if arrays { ("[", "]") } else { ("{\"a\":", "}") };
        let mut s = open.repeat(depth);
        s.push('1');
        if closed {
            s.push_str(&close.repeat(depth));
        }
        s
    })
}

/// One byte-level edit of an encoded input.
#[derive(Debug, Clone)]
pub(super) enum Edit {
    Truncate(prop::sample::Index),
    Flip(prop::sample::Index, u8),
    Insert(prop::sample::Index, u8),
    Remove(prop::sample::Index),
    Duplicate(prop::sample::Index, prop::sample::Index),
}

/// Up to `max` edits.
pub(super) fn edits(max: usize) -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        any::<prop::sample::Index>().prop_map(Edit::Truncate),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        (any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<prop::sample::Index>().prop_map(Edit::Remove),
        (any::<prop::sample::Index>(), any::<prop::sample::Index>())
            .prop_map(|(a, b)| Edit::Duplicate(a, b)),
    ];
    prop::collection::vec(edit, 0..=max)
}

/// `bytes` with `edits` applied in order.
pub(super) fn mutate(mut bytes: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let at = |i: &prop::sample::Index, len: usize| i.index(len + 1);
        match e {
            Edit::Truncate(i) => {
                let n = at(i, bytes.len());
                bytes.truncate(n);
            }
            Edit::Flip(i, b) if !bytes.is_empty() => {
                let n = i.index(bytes.len());
                bytes[n] ^= b | 1;
            }
            Edit::Insert(i, b) => {
                let n = at(i, bytes.len());
                bytes.insert(n, *b);
            }
            Edit::Remove(i) if !bytes.is_empty() => {
                let n = i.index(bytes.len());
                bytes.remove(n);
            }
            Edit::Duplicate(a, b) if !bytes.is_empty() => {
                let (x, y) = (a.index(bytes.len()), b.index(bytes.len()));
                let (from, to) = (x.min(y), x.max(y).min(x.min(y) + 64));
                let piece = bytes[from..to].to_vec();
                bytes.splice(to..to, piece);
            }
            _ => {}
        }
    }
    bytes
}
