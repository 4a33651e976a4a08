//! The opaque cursor of `GET /v1/violations`: the position (time, id) of the last record of a
//! page, hex-encoded so that clients treat it as a token. The next page starts strictly after it
//! in newest-first order, so pages neither repeat nor skip records written meanwhile behind it.

use crate::clock::Timestamp;

/// Where a page ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The last record's time.
    pub at: Timestamp,
    /// The last record's id.
    pub id: String,
}

impl Cursor {
    /// The token clients pass back as `cursor`.
    pub fn encode(&self) -> String {
        let plain = format!("{}:{}", self.at.as_micros(), self.id);
        plain.bytes().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads a token made by [`Cursor::encode`]; `None` when it is not one.
    pub fn decode(token: &str) -> Option<Cursor> {
        if !token.len().is_multiple_of(2) || token.len() > 256 {
            return None;
        }
        let bytes: Option<Vec<u8>> = (0..token.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
            .collect();
        let plain = String::from_utf8(bytes?).ok()?;
        let (at, id) = plain.split_once(':')?;
        let valid_id = !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        valid_id.then_some(())?;
        Some(Cursor {
            at: Timestamp::from_micros(at.parse().ok()?),
            id: id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_refused() {
        let c = Cursor {
            at: Timestamp::from_micros(1_234_000_567),
            id: "vi_00ff00ff00ff00ff".into(),
        };
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        for bad in ["", "zz", "abc", "3132", "313a", "3a7669"] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }
}
