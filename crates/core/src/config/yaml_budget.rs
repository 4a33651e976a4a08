//! Limits on one config file checked before any YAML value is built, so a hostile file in the
//! watched directory costs little: a size cap (checked on the file's metadata, before reading)
//! and a node budget for the first document with aliases replayed.
//!
//! An alias bomb is small on disk and huge once expanded: ten anchors that each repeat the
//! previous one ten times make ten billion nodes. serde_yaml replays aliases while building
//! values, and its own repetition limit (a multiple of the file's events) lets gigabytes be
//! built first. Here the first document is walked by a visitor that counts nodes and keeps
//! nothing, stopping at the budget; memory stays at the size of the parsed events.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// Largest config file read, in bytes (1 MiB): larger files are refused unread.
pub(super) const MAX_FILE_BYTES: u64 = 1 << 20;

/// Most YAML nodes the first document of one file may have once aliases are replayed. A 1 MiB
/// file without aliases has fewer (every node takes at least two bytes).
pub(super) const MAX_NODES: u64 = 1_000_000;

/// Why a file is refused by [`check_nodes`].
pub(crate) fn too_many_nodes() -> String {
    format!(
        "YAML aliases expand too far (over {MAX_NODES} nodes, or past the parser's limit on \
         alias replays): an alias bomb? The file is not loaded"
    )
}

/// `Err` with the reason when the first document of `contents` expands to more than
/// [`MAX_NODES`] nodes. Syntax errors pass: the real parse reports them with its own wording.
pub(crate) fn check_nodes(contents: &str) -> Result<(), String> {
    let Some(doc) = serde_yaml::Deserializer::from_str(contents).next() else {
        return Ok(());
    };
    let seen = Cell::new(0u64);
    match Counter(&seen).deserialize(doc) {
        // serde_yaml's own limit on alias replays can stop the walk first; the real parse would
        // stop at the same point, but only after building what it had replayed.
        Err(e) if seen.get() > MAX_NODES || e.to_string().contains("repetition limit") => {
            Err(too_many_nodes())
        }
        _ => Ok(()),
    }
}

/// Counts every node it is shown into the shared cell, and fails once past the budget.
#[derive(Clone, Copy)]
struct Counter<'a>(&'a Cell<u64>);

impl Counter<'_> {
    fn bump<E: de::Error>(self) -> Result<(), E> {
        self.0.set(self.0.get() + 1);
        if self.0.get() > MAX_NODES {
            return Err(E::custom("node budget exceeded"));
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Counter<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Counter<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML node")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.bump()
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.bump()
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.bump()
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.bump()
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.bump()
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.bump()
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.bump()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        self.deserialize(d)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.bump()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.bump()?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }

    /// A tagged node (`!tag value`): the tag is skipped, the value counted.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        let (_, value) = data.variant::<de::IgnoredAny>()?;
        value.newtype_variant_seed(self)
    }
}
