//! The console's sign-in sessions: a browser sends no bearer token, so the login form
//! ([`super::login`]) exchanges the admin token for a session cookie whose id this table knows.
//!
//! The id is 32 bytes from the operating system's CSPRNG (through the `ring` provider that
//! rustls already carries), sent as 64 hex digits; only its SHA-256 is kept, so the table never
//! holds a usable id. A presented id is hashed and compared with every live session's digest over
//! all 32 bytes, without an early exit (as the bearer tokens are). A session lives
//! [`SESSION_LIFETIME`] on the service clock from sign-in, or until logout; at most
//! [`MAX_SESSIONS`] live at once, a new one past that replacing the one nearest its end.
//!
//! Failed sign-ins are counted per peer address: past [`MAX_FAILURES`] in one
//! [`FAILURE_WINDOW`] the form is refused (429) without the token being looked at, which bounds a
//! guesser to a few tries a minute per address. That table is bounded too (`MAX_PEERS`: 1 024
//! addresses).

use std::net::IpAddr;
use std::time::Duration;

use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use ratelimitd_core::clock::Timestamp;

/// How long a console session lasts from sign-in (8 hours, a working day).
pub(crate) const SESSION_LIFETIME: Duration = Duration::from_secs(8 * 3600);

/// How many sessions may be live at once.
pub(crate) const MAX_SESSIONS: usize = 256;

/// Failed sign-ins a peer address may make per [`FAILURE_WINDOW`].
pub(crate) const MAX_FAILURES: u32 = 5;

/// The window over which failed sign-ins are counted.
pub(crate) const FAILURE_WINDOW: Duration = Duration::from_secs(60);

/// How many peer addresses the failure count tracks at once.
const MAX_PEERS: usize = 1024;

/// A session id's SHA-256.
type Digest32 = [u8; 32];

/// One live session.
#[derive(Debug, Clone)]
struct Session {
    digest: Digest32,
    /// The token's name (who signed in).
    who: String,
    ends: Timestamp,
}

/// The live sessions and the recent failed sign-ins.
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    live: Mutex<Vec<Session>>,
    /// Per peer address: when its window began and how many failures it holds.
    failures: Mutex<Vec<(IpAddr, Timestamp, u32)>>,
}

/// The operating system's random source could not give bytes.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the random source failed: no session id could be made")]
pub(crate) struct NoRandom;

impl Sessions {
    /// Starts a session for the token named `who` at `now`: its id (to be sent as the cookie).
    pub(crate) fn start(&self, who: &str, now: Timestamp) -> Result<String, NoRandom> {
        let mut bytes = [0u8; 32];
        rustls::crypto::ring::default_provider()
            .secure_random
            .fill(&mut bytes)
            .map_err(|_| NoRandom)?;
        let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mut live = self.live.lock();
        live.retain(|s| s.ends > now);
        if live.len() >= MAX_SESSIONS
            && let Some(oldest) = (0..live.len()).min_by_key(|&i| live[i].ends)
        {
            live.swap_remove(oldest);
        }
        live.push(Session {
            digest: digest(&id),
            who: who.to_string(),
            ends: now.saturating_add(SESSION_LIFETIME),
        });
        Ok(id)
    }

    /// Who the session `id` belongs to, if it is live at `now`.
    pub(crate) fn check(&self, id: &str, now: Timestamp) -> Option<String> {
        let given = digest(id);
        let mut live = self.live.lock();
        live.retain(|s| s.ends > now);
        // Every session is compared, whichever matches.
        let mut found = None;
        for s in live.iter() {
            if same(&s.digest, &given) {
                found = Some(s.who.clone());
            }
        }
        found
    }

    /// Ends the session `id` (nothing when there is none).
    pub(crate) fn end(&self, id: &str) {
        let given = digest(id);
        self.live.lock().retain(|s| !same(&s.digest, &given));
    }

    /// True when `peer` may try to sign in at `now` (fewer than [`MAX_FAILURES`] failures in its
    /// current window).
    pub(crate) fn may_try(&self, peer: IpAddr, now: Timestamp) -> bool {
        let failures = self.failures.lock();
        !failures.iter().any(|&(ip, began, count)| {
            ip == peer && now < began.saturating_add(FAILURE_WINDOW) && count >= MAX_FAILURES
        })
    }

    /// Counts a failed sign-in of `peer` at `now`.
    pub(crate) fn failed(&self, peer: IpAddr, now: Timestamp) {
        let mut failures = self.failures.lock();
        failures.retain(|&(_, began, _)| now < began.saturating_add(FAILURE_WINDOW));
        if let Some(entry) = failures.iter_mut().find(|(ip, _, _)| *ip == peer) {
            entry.2 = entry.2.saturating_add(1);
            return;
        }
        if failures.len() >= MAX_PEERS
            && let Some(oldest) = (0..failures.len()).min_by_key(|&i| failures[i].1)
        {
            failures.swap_remove(oldest);
        }
        failures.push((peer, now, 1));
    }

    /// When `peer` may try again after being refused at `now` (whole seconds, at least 1).
    pub(crate) fn retry_after(&self, peer: IpAddr, now: Timestamp) -> u64 {
        let failures = self.failures.lock();
        let left = failures
            .iter()
            .find(|(ip, _, _)| *ip == peer)
            .map_or(0, |&(_, began, _)| {
                began
                    .saturating_add(FAILURE_WINDOW)
                    .as_micros()
                    .saturating_sub(now.as_micros())
            });
        left.div_ceil(1_000_000).max(1)
    }
}

fn digest(id: &str) -> Digest32 {
    Sha256::digest(id.as_bytes()).into()
}

/// Compares two digests over all their bytes, without returning early on the first difference.
fn same(a: &Digest32, b: &Digest32) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_lives_until_its_end_or_logout() {
        let s = Sessions::default();
        let t0 = Timestamp::from_secs(1000);
        let id = s.start("admin", t0).unwrap();
        assert_eq!(id.len(), 64);
        assert_ne!(id, s.start("admin", t0).unwrap(), "ids are random");
        assert_eq!(s.check(&id, t0).as_deref(), Some("admin"));
        assert_eq!(s.check("0".repeat(64).as_str(), t0), None);
        let last = Timestamp::from_secs(1000 + SESSION_LIFETIME.as_secs() - 1);
        assert_eq!(s.check(&id, last).as_deref(), Some("admin"));
        assert_eq!(s.check(&id, t0.saturating_add(SESSION_LIFETIME)), None);
        let other = s.start("ops", t0).unwrap();
        s.end(&other);
        assert_eq!(s.check(&other, t0), None);
    }

    #[test]
    fn the_table_is_bounded_and_drops_the_session_nearest_its_end() {
        let s = Sessions::default();
        let first = s.start("a", Timestamp::from_secs(1)).unwrap();
        for i in 0..MAX_SESSIONS {
            s.start("b", Timestamp::from_secs(2 + i as u64)).unwrap();
        }
        assert_eq!(s.live.lock().len(), MAX_SESSIONS);
        assert_eq!(s.check(&first, Timestamp::from_secs(500)), None);
    }

    #[test]
    fn failures_are_bounded_per_peer_and_window() {
        let s = Sessions::default();
        let (a, b) = ("127.0.0.1".parse().unwrap(), "::1".parse().unwrap());
        let t0 = Timestamp::from_secs(100);
        for _ in 0..MAX_FAILURES {
            assert!(s.may_try(a, t0));
            s.failed(a, t0);
        }
        assert!(!s.may_try(a, t0));
        assert_eq!(s.retry_after(a, t0), 60);
        assert!(s.may_try(b, t0), "another peer is not held back");
        assert!(s.may_try(a, t0.saturating_add(FAILURE_WINDOW)));
    }
}
