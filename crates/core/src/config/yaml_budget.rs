//! Limits on one config file checked before any YAML value is built, so a hostile file in the
//! watched directory costs little: a size cap (checked on the file's metadata, before reading;
//! `CONFIG_MAX_FILE_BYTES`, passed to each load in `loader::LoadOptions`) and a node budget for
//! the first document with aliases replayed, in proportion to the file's own size.
//!
//! An alias bomb is small on disk and huge once expanded: ten anchors that each repeat the
//! previous one ten times make ten billion nodes. `serde_yaml` replays aliases while building
//! values, and its own repetition limit (a multiple of the file's events) lets gigabytes be
//! built first. Here the first document is walked by a visitor that counts nodes and keeps
//! nothing, stopping at the budget; memory stays at the size of the parsed events.

use std::cell::Cell;
use std::fmt;

use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor,
};

/// Default largest config file, in bytes (16 MiB): about 190 000 per-client descriptors of one
/// line each, or 100 000 written out over several lines (docs/configuration.md measures them).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 16 << 20;

/// The node budget of every file, however small: a million nodes once aliases are replayed.
pub(crate) const MIN_NODES: u64 = 1_000_000;

/// The node budget of a file of `len` bytes: [`MIN_NODES`], or one node per byte for a larger
/// file. A file without aliases has fewer nodes than bytes (every node takes at least two), so
/// only aliases can reach it, and they expand a file to at most its own size's worth of nodes:
/// large honest files fit, and an alias bomb stays as small as the file it hides in.
pub(crate) fn node_budget(len: usize) -> u64 {
    MIN_NODES.max(len as u64)
}

/// Why a file is refused by [`check_nodes`].
pub(crate) fn too_many_nodes(budget: u64) -> String {
    format!(
        "YAML aliases expand too far (over {budget} nodes, or past the parser's limit on \
         alias replays): an alias bomb? The file is not loaded"
    )
}

/// `Err` with the reason when the first document of `contents` expands to more than its
/// [`node_budget`]. Syntax errors pass: the real parse reports them with its own wording.
pub(crate) fn check_nodes(contents: &str) -> Result<(), String> {
    let Some(doc) = serde_yaml::Deserializer::from_str(contents).next() else {
        return Ok(());
    };
    let budget = node_budget(contents.len());
    let seen = Cell::new(0u64);
    match (Counter {
        seen: &seen,
        budget,
    })
    .deserialize(doc)
    {
        // serde_yaml's own limit on alias replays can stop the walk first; the real parse would
        // stop at the same point, but only after building what it had replayed.
        Err(e) if seen.get() > budget || e.to_string().contains("repetition limit") => {
            Err(too_many_nodes(budget))
        }
        _ => Ok(()),
    }
}

/// Counts every node it is shown into the shared cell, and fails once past the budget.
#[derive(Clone, Copy)]
struct Counter<'a> {
    seen: &'a Cell<u64>,
    budget: u64,
}

impl Counter<'_> {
    fn bump<E: de::Error>(self) -> Result<(), E> {
        self.seen.set(self.seen.get() + 1);
        if self.seen.get() > self.budget {
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
