//! The per-request side of priority shedding and soft limits ([`crate::config::shedding`]): the
//! class entry is taken out of a descriptor before it is matched and keyed (every class counts on
//! one counter), and each op of a limit that sheds is judged against its effective limit.

use crate::algorithm::LimitSpec;
use crate::config::{Domain, Limit, effective_limit};
use crate::limiter::request::{Descriptor, Entry};
use crate::random::Random;

/// How one request stands against a limit that sheds: its class, and the bounds its effective
/// limit was drawn between, so stats can tell a shed, a soft denial and a hard denial apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shed {
    /// The request's class (an index into the limit's [`crate::config::Priorities`]); `None`
    /// when the limit has no classes.
    pub class: Option<usize>,
    /// The class's share of the limit, without the soft zone: usage above it is shed or soft.
    pub hard: u64,
    /// The highest usage the soft zone can admit (= `hard` without one): the draw `u` is below
    /// 1, so usage at `up_to × limit` and above is always denied.
    pub top: u64,
    /// The limit this request was judged against, between `hard` and `top`.
    pub effective: u64,
}

impl Shed {
    /// True when a denial at usage `after` came from the soft zone's draw, not from a bound.
    pub fn soft_denial(&self, over_limit: bool, after: u64) -> bool {
        over_limit && after > self.hard && after <= self.top
    }

    /// True when a denial at usage `after` came from the class's share, below the full limit.
    pub fn shed(&self, over_limit: bool, after: u64, limit: u64) -> bool {
        over_limit && after <= limit && !self.soft_denial(over_limit, after)
    }
}

/// The entry of `d` that names its class in `domain`, if the domain sheds by class at all: the
/// first entry whose key is one of the domain's priority keys.
pub(super) fn class_entry<'a>(domain: &Domain, d: &'a Descriptor) -> Option<&'a Entry> {
    if domain.priority_keys.is_empty() {
        return None;
    }
    d.entries
        .iter()
        .find(|e| domain.priority_keys.contains(&e.key))
}

/// The entries of `d` that are matched and keyed: all but those with the class entry's key. The
/// first one names the class; later ones with that key are dropped, neither matched nor read.
pub(super) fn matched_entries<'a>(
    d: &'a Descriptor,
    class: Option<&'a Entry>,
) -> impl Iterator<Item = &'a Entry> {
    d.entries
        .iter()
        .filter(move |e| class.is_none_or(|c| c.key != e.key))
}

/// Judges `spec` (of `limit`) for a request whose class entry is `class`, or whose descriptor
/// names the class `fallback` ([`Descriptor::priority`]) when it has no entry of the limit's
/// `priority_key`: the spec with the request's effective limit, and how it was drawn; `None`
/// (the spec unchanged) for a limit that does not shed. Draws from `random` only when the limit
/// has a soft zone.
pub(super) fn judge(
    limit: &Limit,
    spec: LimitSpec,
    class: Option<&Entry>,
    fallback: Option<&str>,
    random: &dyn Random,
) -> Option<(LimitSpec, Shed)> {
    let shedding = limit.shedding.as_deref()?;
    let (class, share) = match &shedding.priorities {
        Some(p) => {
            let value = class
                .filter(|e| e.key == p.key)
                .map(|e| e.value.as_str())
                .or(fallback);
            let index = p.class_of(value);
            (Some(index), p.share(index))
        }
        None => (None, 1.0),
    };
    let up_to = shedding.soft.map_or(1.0, |s| s.up_to);
    let u = if up_to > 1.0 { random.unit() } else { 0.0 };
    let hard = effective_limit(spec.limit, share, 1.0, 0.0);
    let shed = Shed {
        class,
        hard,
        top: if up_to > 1.0 {
            let real = spec.limit as f64 * share * up_to;
            ((real - 1e-9).ceil() as u64).saturating_sub(1).max(hard)
        } else {
            hard
        },
        effective: effective_limit(spec.limit, share, up_to, u),
    };
    Some((
        LimitSpec {
            limit: shed.effective,
            ..spec
        },
        shed,
    ))
}
