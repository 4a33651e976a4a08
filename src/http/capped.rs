//! The protojson descriptor list of `/json` and `POST /check`, decoded under the request caps:
//! the decoder counts descriptors and entries as it reads them and stops at the first one past
//! `MAX_DESCRIPTORS_PER_REQUEST` / `MAX_ENTRIES_PER_DESCRIPTOR`, so a body of a million empty
//! descriptors costs the parse of 65 of them, not a million allocations. Which cap stopped it is
//! kept beside serde's error ([`Caps::hit`]), so the edges can name the setting.

use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::json::{JsonDescriptor, JsonEntry};
use ratelimitd_core::limiter::{Limits, OverCap};

/// The caps a decode runs under, and the one it stopped at.
#[derive(Debug)]
pub(super) struct Caps<'a> {
    limits: &'a Limits,
    hit: Cell<Option<OverCap>>,
}

impl<'a> Caps<'a> {
    /// A decode under `limits`.
    pub(super) fn new(limits: &'a Limits) -> Caps<'a> {
        Caps {
            limits,
            hit: Cell::new(None),
        }
    }

    /// The cap the decode stopped at, if it stopped at one.
    pub(super) fn hit(&self) -> Option<OverCap> {
        self.hit.get()
    }

    fn check<E: de::Error>(&self, r: Result<(), OverCap>) -> Result<(), E> {
        r.map_err(|over| {
            self.hit.set(Some(over));
            E::custom(over)
        })
    }
}

/// Seed for the `descriptors` member: `null` or a list, at most `MAX_DESCRIPTORS_PER_REQUEST`.
pub(super) struct Descriptors<'c, 'a>(pub &'c Caps<'a>);

impl<'de> DeserializeSeed<'de> for Descriptors<'_, '_> {
    type Value = Vec<JsonDescriptor>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(List {
            caps: self.0,
            of: self,
        })
    }
}

/// What a [`List`] holds: how it reads its next element and how many it may hold.
trait Item<'de> {
    type Value;
    /// What the list is, for serde's "invalid type" message.
    const WHAT: &'static str;
    /// The element at `index`, or `None` at the end of the list.
    fn next<A: SeqAccess<'de>>(
        &self,
        seq: &mut A,
        index: usize,
    ) -> Result<Option<Self::Value>, A::Error>;
    /// Whether `count` elements are within the cap.
    fn within(&self, caps: &Caps<'_>, count: usize) -> Result<(), OverCap>;
}

impl<'de> Item<'de> for Descriptors<'_, '_> {
    type Value = JsonDescriptor;
    const WHAT: &'static str = "a list of descriptors";

    fn next<A: SeqAccess<'de>>(
        &self,
        seq: &mut A,
        index: usize,
    ) -> Result<Option<JsonDescriptor>, A::Error> {
        seq.next_element_seed(Descriptor {
            caps: self.0,
            index,
        })
    }

    fn within(&self, caps: &Caps<'_>, count: usize) -> Result<(), OverCap> {
        caps.limits.descriptors(count)
    }
}

/// `null` (an empty list) or a list of `I`, refused at the first element past its cap: the
/// elements beyond it are never built.
struct List<'c, 'a, I> {
    caps: &'c Caps<'a>,
    of: I,
}

impl<'de, I: Item<'de>> Visitor<'de> for List<'_, '_, I> {
    type Value = Vec<I::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(I::WHAT)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_some<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(item) = self.of.next(&mut seq, out.len())? {
            out.push(item);
            self.caps.check(self.of.within(self.caps, out.len()))?;
        }
        Ok(out)
    }
}

/// Seed for one descriptor object (protojson names, `snake_case` accepted, unknown fields refused).
struct Descriptor<'c, 'a> {
    caps: &'c Caps<'a>,
    index: usize,
}

const DESCRIPTOR_FIELDS: &[&str] = &["entries", "limit", "hitsAddend", "isNegativeHits"];

impl<'de> DeserializeSeed<'de> for Descriptor<'_, '_> {
    type Value = JsonDescriptor;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

/// Sets `slot` once; a member given twice is refused, as serde's derive does.
pub(super) fn once<T, E: de::Error>(
    slot: &mut Option<T>,
    name: &'static str,
    v: T,
) -> Result<(), E> {
    if slot.replace(v).is_some() {
        return Err(E::duplicate_field(name));
    }
    Ok(())
}

impl<'de> Visitor<'de> for Descriptor<'_, '_> {
    type Value = JsonDescriptor;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a descriptor object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut d = JsonDescriptor::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "entries" => {
                    let seed = Entries {
                        caps: self.caps,
                        descriptor: self.index,
                    };
                    once(&mut d.entries, "entries", map.next_value_seed(seed)?)?;
                }
                "limit" => once(&mut d.limit, "limit", map.next_value()?)?,
                "hitsAddend" | "hits_addend" => {
                    once(&mut d.hits_addend, "hitsAddend", map.next_value()?)?;
                }
                "isNegativeHits" | "is_negative_hits" => {
                    once(&mut d.is_negative_hits, "isNegativeHits", map.next_value()?)?;
                }
                other => return Err(de::Error::unknown_field(other, DESCRIPTOR_FIELDS)),
            }
        }
        Ok(d)
    }
}

/// Seed for a descriptor's `entries`: `null` or a list, at most `MAX_ENTRIES_PER_DESCRIPTOR`.
struct Entries<'c, 'a> {
    caps: &'c Caps<'a>,
    descriptor: usize,
}

impl<'de> DeserializeSeed<'de> for Entries<'_, '_> {
    type Value = Vec<JsonEntry>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_option(List {
            caps: self.caps,
            of: self,
        })
    }
}

impl<'de> Item<'de> for Entries<'_, '_> {
    type Value = JsonEntry;
    const WHAT: &'static str = "a list of entries";

    fn next<A: SeqAccess<'de>>(
        &self,
        seq: &mut A,
        _: usize,
    ) -> Result<Option<JsonEntry>, A::Error> {
        seq.next_element::<JsonEntry>()
    }

    fn within(&self, caps: &Caps<'_>, count: usize) -> Result<(), OverCap> {
        caps.limits.entries(self.descriptor, count)
    }
}

impl<'de> DeserializeSeed<'de> for ScalarSeed {
    type Value = serde_json::Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// Seed for a member read only for its type (`/check`'s scalar fields): nested lists and
/// objects are skipped without being built, and stand in as an empty list or object.
pub(super) struct ScalarSeed;

impl<'de> Visitor<'de> for ScalarSeed {
    type Value = serde_json::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(serde_json::Value::Null, Into::into))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(v.into())
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(serde_json::Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(serde_json::Value::Array(Vec::new()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(serde_json::Value::Object(serde_json::Map::new()))
    }
}
