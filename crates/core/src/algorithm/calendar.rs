//! Calendar windows: a fixed window that starts and ends at local calendar boundaries of a time
//! zone (midnight, Monday, the first of the month, the first of January) instead of at multiples
//! of its length since the Unix epoch. A calendar month is the real month (28 to 31 days), a
//! calendar day around a daylight-saving change lasts 23 or 25 hours, and a week starts on Monday.
//!
//! [`Calendar::bounds`] is the one function that places `now` in its window; everything else (the
//! key suffix, the Redis and memcached TTLs, `duration_until_reset`, Retry-After) is read from the
//! bounds it returns. Zones come from the IANA database bundled in the binary, so every host
//! answers the same whatever tzdata it has.

use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Span, Timestamp as JiffTimestamp};
use parking_lot::Mutex;

/// The units a calendar window can have. Shorter units need no calendar: every zone's seconds
/// and minutes are the epoch's, and a local hour is an epoch hour in all but a few zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CalendarUnit {
    /// From local midnight to the next.
    Day,
    /// From Monday 00:00 local to the next Monday.
    Week,
    /// From the first of the month 00:00 local to the first of the next.
    Month,
    /// From January 1st 00:00 local to the next.
    Year,
}

impl CalendarUnit {
    /// The lower-case name, as in `/rlconfig` and the safe cache key.
    pub fn name(self) -> &'static str {
        match self {
            CalendarUnit::Day => "day",
            CalendarUnit::Week => "week",
            CalendarUnit::Month => "month",
            CalendarUnit::Year => "year",
        }
    }
}

/// A time zone of the bundled IANA database, by its canonical name. Zones are resolved once per
/// name and kept for the life of the process (there are a few hundred at most), which lets a
/// window hold a plain reference and stay `Copy`.
pub struct Zone {
    name: &'static str,
    tz: TimeZone,
    /// The last one-unit window placed in this zone, per [`CalendarUnit`]: see [`Calendar::bounds`].
    recent: [AtomicU64; 4],
}

impl Zone {
    /// The zone called `name` (IANA, case-insensitive: `Europe/Paris`, `utc`); `None` when the
    /// bundled database has no such zone.
    pub fn get(name: &str) -> Option<&'static Zone> {
        static ZONES: OnceLock<Mutex<HashMap<String, &'static Zone>>> = OnceLock::new();
        let tz = TimeZone::get(name).ok()?;
        // Interned by canonical name: however a client spells a zone, at most one per
        // database entry is ever kept.
        let canonical = tz.iana_name()?.to_owned();
        let mut zones = ZONES.get_or_init(Mutex::default).lock();
        let zone = zones.entry(canonical).or_insert_with_key(|canonical| {
            let name = Box::leak(canonical.clone().into_boxed_str());
            Box::leak(Box::new(Zone::new(name, tz)))
        });
        Some(*zone)
    }

    fn new(name: &'static str, tz: TimeZone) -> Zone {
        Zone {
            name,
            tz,
            recent: Default::default(),
        }
    }

    /// UTC, the zone of calendar windows when none is named.
    pub fn utc() -> &'static Zone {
        static UTC: OnceLock<Zone> = OnceLock::new();
        // The bundled database always has it; the fixed zone stands in all the same.
        Zone::get("UTC").unwrap_or_else(|| UTC.get_or_init(|| Zone::new("UTC", TimeZone::UTC)))
    }

    /// The zone's canonical IANA name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

impl Hash for Zone {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.name.hash(state);
    }
}

impl PartialOrd for Zone {
    fn partial_cmp(&self, other: &Zone) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Zone {
    fn cmp(&self, other: &Zone) -> std::cmp::Ordering {
        self.name.cmp(other.name)
    }
}

/// The calendar of a window: `count` calendar `unit`s in `zone`. Windows of several units are
/// counted from the same origin as Go's epoch windows, 1970-01-01 local (weeks: Monday
/// 1969-12-29), so three months are the quarters January–March, April–June...
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Calendar {
    unit: CalendarUnit,
    count: u32,
    zone: &'static Zone,
}

/// Where a window lies: `[start, end)` in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// The first second of the window.
    pub start: u64,
    /// The first second of the next window.
    pub end: u64,
}

impl Calendar {
    /// `count` (at least 1; 0 is taken as 1) `unit`s in `zone`.
    pub fn new(unit: CalendarUnit, count: u32, zone: &'static Zone) -> Calendar {
        Calendar {
            unit,
            count: count.max(1),
            zone,
        }
    }

    /// The unit.
    pub fn unit(self) -> CalendarUnit {
        self.unit
    }

    /// How many units one window spans.
    pub fn count(self) -> u32 {
        self.count
    }

    /// The time zone.
    pub fn zone(self) -> &'static Zone {
        self.zone
    }

    /// The window containing `now` (Unix seconds), or `None` when `now` is outside the years
    /// the calendar covers (−9999 to 9999) or its window would start before the Unix epoch (an
    /// instant in the first window after 1970 local time, in a zone east of UTC) — both far from
    /// any clock a server runs on.
    ///
    /// Placing an instant in a zone's calendar costs about a microsecond, and a request asks
    /// several times (key, decision, TTL), so the last one-unit window of each zone and unit is
    /// kept, packed in one atomic word: any thread's window is a correct one, and it answers only
    /// for the instants it contains (windows tile time).
    pub fn bounds(self, now: u64) -> Option<Bounds> {
        let recent = (self.count == 1).then(|| &self.zone.recent[self.unit as usize]);
        if let Some(packed) = recent.map(|r| r.load(Ordering::Relaxed)) {
            let (start, end) = (packed >> 32, packed & u64::from(u32::MAX));
            if start <= now && now < end {
                return Some(Bounds { start, end });
            }
        }
        let bounds = self.place(now)?;
        // Windows past 2106 do not fit the packing and are simply not kept.
        if let (Some(recent), Ok(start), Ok(end)) = (
            recent,
            u32::try_from(bounds.start),
            u32::try_from(bounds.end),
        ) {
            recent.store((u64::from(start) << 32) | u64::from(end), Ordering::Relaxed);
        }
        Some(bounds)
    }

    /// [`Self::bounds`], computed.
    fn place(self, now: u64) -> Option<Bounds> {
        let at = JiffTimestamp::from_second(i64::try_from(now).ok()?).ok()?;
        let today = at.to_zoned_datetime(self.zone.tz.clone()).date();
        let index = self.index_of(today)?;
        let first = index - index.rem_euclid(i64::from(self.count));
        let start = self.first_second(first)?;
        let end = self.first_second(first + i64::from(self.count))?;
        Some(Bounds { start, end })
    }

    /// Which unit since the origin `day` falls in.
    fn index_of(self, day: Date) -> Option<i64> {
        Some(match self.unit {
            CalendarUnit::Day => days_since_origin(day)?,
            CalendarUnit::Week => (days_since_origin(day)? + MONDAY_BEFORE).div_euclid(7),
            CalendarUnit::Month => months_since_origin(day),
            CalendarUnit::Year => i64::from(day.year()) - ORIGIN_YEAR,
        })
    }

    /// The Unix second at which unit number `index` begins in this zone: its first day's local
    /// midnight, or the first instant after a daylight-saving gap that swallows midnight.
    fn first_second(self, index: i64) -> Option<u64> {
        let origin = origin();
        let day = match self.unit {
            CalendarUnit::Day => origin.checked_add(Span::new().try_days(index).ok()?),
            CalendarUnit::Week => {
                let days = index.checked_mul(7)? - MONDAY_BEFORE;
                origin.checked_add(Span::new().try_days(days).ok()?)
            }
            CalendarUnit::Month => origin.checked_add(Span::new().try_months(index).ok()?),
            CalendarUnit::Year => origin.checked_add(Span::new().try_years(index).ok()?),
        }
        .ok()?;
        let start = day.to_zoned_datetime(self.zone.tz.clone()).ok()?;
        u64::try_from(start.timestamp().as_second()).ok()
    }
}

impl fmt::Display for Calendar {
    /// `month@Europe/Paris`, `3month@UTC`: what the safe cache key and `/rlconfig` show.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count > 1 {
            write!(f, "{}", self.count)?;
        }
        write!(f, "{}@{}", self.unit.name(), self.zone.name)
    }
}

/// The year multi-unit windows count from, as Go's windows count from the Unix epoch.
const ORIGIN_YEAR: i64 = 1970;

/// 1970-01-01 was a Thursday: the Monday before it is three days earlier.
const MONDAY_BEFORE: i64 = 3;

fn origin() -> Date {
    jiff::civil::date(1970, 1, 1)
}

fn days_since_origin(day: Date) -> Option<i64> {
    Some(i64::from(origin().until(day).ok()?.get_days()))
}

fn months_since_origin(day: Date) -> i64 {
    (i64::from(day.year()) - ORIGIN_YEAR) * 12 + i64::from(day.month()) - 1
}

#[cfg(test)]
mod tests;
