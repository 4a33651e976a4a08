//! What a stream keeps per bucket ([`Tracked`]): its recent demand, budget and last assignment,
//! what it last posted on the demand board ([`Posted`]), and when it was last reported — which
//! tells whether the bucket is still live (its assignment is renewed) and active (its share is
//! re-split when the board says its demands changed).

use std::time::Duration;

use super::bucket::Budget;
use super::demand::Recent;
use super::split::Assignment;
use ratelimitd_core::clock::{Stopwatch, Timestamp};

/// What the stream last posted on the board for a bucket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Posted {
    /// The demand, in thousandths of a request per second.
    pub milli: u64,
    /// When it was posted (service clock).
    pub at: Timestamp,
    /// When the entry expires on the board.
    pub until: Timestamp,
}

/// One bucket a stream tracks.
#[derive(Debug)]
pub(crate) struct Tracked {
    /// Requests over the last reports.
    pub recent: Recent,
    /// `None`: no limit matched (the unmatched default applies).
    pub budget: Option<Budget>,
    /// The last assignment sent.
    pub sent: Option<Assignment>,
    /// When the last action for this bucket went out (real time: Envoy's assignments expire on
    /// Envoy's clock).
    pub sent_at: Option<Stopwatch>,
    /// The demand last posted on the board.
    pub posted: Option<Posted>,
    /// When the bucket was last reported (service clock).
    pub reported: Timestamp,
}

impl Tracked {
    /// Reported within `ttl`: the Envoy still holds the bucket, so its assignment is renewed.
    pub(crate) fn live(&self, now: Timestamp, ttl: Duration) -> bool {
        self.reported.saturating_add(ttl) > now
    }

    /// Live, under a rate, and with requests: its share follows the other reporters' demand.
    pub(crate) fn active(&self, now: Timestamp, ttl: Duration) -> bool {
        self.live(now, ttl)
            && matches!(self.budget, Some(Budget::Rate { .. }))
            && self.recent.per_second() > 0.0
    }

    /// Whether a demand of `milli` must be written to the board at `now`: it changed since the
    /// last post, or that post is half-way to expiry and the bucket was reported since (a
    /// bucket that is no longer reported, or whose demand is zero, is left to lapse: renewing
    /// it would cost a call per bucket for a demand nobody states).
    pub(crate) fn post_due(&self, milli: u64, now: Timestamp, ttl: Duration) -> bool {
        match self.posted {
            None => true,
            Some(p) => {
                p.milli != milli
                    || (milli > 0 && self.reported > p.at && now >= p.at.saturating_add(ttl / 2))
            }
        }
    }

    /// Whether posting `milli` at `now` changes the board as others see it (a new or different
    /// demand, or one whose entry had expired): the change is announced.
    pub(crate) fn post_changes(&self, milli: u64, now: Timestamp) -> bool {
        self.posted
            .is_none_or(|p| p.milli != milli || !self.on_board(now))
    }

    /// Whether an entry this stream posted may still be live on the board at `now` (leaving
    /// the board costs a store call only then).
    pub(crate) fn on_board(&self, now: Timestamp) -> bool {
        self.posted.is_some_and(|p| p.until > now)
    }
}
