//! Step 1 of a decision: the request is well formed (Go's messages) and within the caps of
//! [`Limits`], checked before anything is planned, keyed or counted. A request over a cap is the
//! caller's error (`INVALID_ARGUMENT`, `/json` 400), and the message names the cap's setting but
//! never echoes the oversized value.

use super::Limits;
use super::RequestError;
use super::request::{Request, USAGE_ENTRY_KEY};
use crate::algorithm::concurrency::MAX_HOLDER_LEN;

/// Checks `req` against `caps`.
pub(crate) fn check(req: &Request, caps: &Limits) -> Result<(), RequestError> {
    if req.domain.is_empty() {
        return Err(RequestError::EmptyDomain);
    }
    if req.descriptors.is_empty() {
        return Err(RequestError::NoDescriptors);
    }
    let too_long = |what: String, len: usize| RequestError::TooLong {
        what,
        len,
        max: caps.max_value_bytes,
    };
    if req.domain.len() > caps.max_value_bytes {
        return Err(too_long("domain".into(), req.domain.len()));
    }
    if req.descriptors.len() > caps.max_descriptors {
        return Err(RequestError::TooManyDescriptors {
            count: req.descriptors.len(),
            max: caps.max_descriptors,
        });
    }
    for (i, d) in req.descriptors.iter().enumerate() {
        check_holder(i, d.holder.as_deref())?;
        if d.entries.len() > caps.max_entries {
            return Err(RequestError::TooManyEntries {
                descriptor: i,
                count: d.entries.len(),
                max: caps.max_entries,
            });
        }
        for (j, e) in d.entries.iter().enumerate() {
            // `Descriptor::split_report` took every `report` marker out; any other is a typo.
            if e.key == USAGE_ENTRY_KEY {
                return Err(RequestError::BadUsageEntry {
                    descriptor: i,
                    value: e.value.chars().take(64).collect(),
                });
            }
            if e.key.len() > caps.max_value_bytes {
                return Err(too_long(
                    format!("descriptor {i} entry {j} key"),
                    e.key.len(),
                ));
            }
            if e.value.len() > caps.max_value_bytes {
                return Err(too_long(
                    format!("descriptor {i} entry {j} value"),
                    e.value.len(),
                ));
            }
        }
    }
    Ok(())
}

/// A holder id, when one is named, is 1 to [`MAX_HOLDER_LEN`] bytes: an empty one would take an
/// anonymous slot nobody can release, a long one costs every holder table it enters.
fn check_holder(descriptor: usize, holder: Option<&str>) -> Result<(), RequestError> {
    let reason = match holder {
        Some("") => "must not be empty".to_string(),
        Some(h) if h.len() > MAX_HOLDER_LEN => {
            format!(
                "is {} bytes; at most {MAX_HOLDER_LEN} are accepted",
                h.len()
            )
        }
        _ => return Ok(()),
    };
    Err(RequestError::BadHolder { descriptor, reason })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::{Descriptor, Entry};

    fn caps() -> Limits {
        Limits {
            max_descriptors: 2,
            max_entries: 2,
            max_value_bytes: 8,
            ..Limits::default()
        }
    }

    #[test]
    fn every_cap_is_enforced_and_named() {
        let ok = Request::new("d", vec![Descriptor::of(&[("k", "v")])]);
        assert_eq!(check(&ok, &caps()), Ok(()));
        let three = Request::new("d", vec![Descriptor::of(&[("k", "v")]); 3]);
        let e = check(&three, &caps()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "request has 3 descriptors; at most 2 are accepted (MAX_DESCRIPTORS_PER_REQUEST)"
        );
        let wide = Request::new(
            "d",
            vec![Descriptor::of(&[("a", ""), ("b", ""), ("c", "")])],
        );
        let e = check(&wide, &caps()).unwrap_err();
        assert!(
            e.to_string()
                .contains("descriptor 0 has 3 entries; at most 2"),
            "{e}"
        );
        let mut long = ok.clone();
        long.descriptors[0]
            .entries
            .push(Entry::new("k2", "123456789"));
        let e = check(&long, &caps()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "descriptor 0 entry 1 value is 9 bytes; at most 8 are accepted (MAX_DESCRIPTOR_VALUE_BYTES)"
        );
        assert!(e.is_invalid_argument());
        let e = check(&Request::new("123456789", ok.descriptors.clone()), &caps()).unwrap_err();
        assert!(e.to_string().starts_with("domain is 9 bytes"), "{e}");
    }

    #[test]
    fn a_holder_is_refused_when_empty_or_over_its_cap() {
        let with = |holder: &str| {
            let mut d = Descriptor::of(&[("k", "v")]);
            d.holder = Some(holder.into());
            Request::new("d", vec![Descriptor::of(&[("k", "v")]), d])
        };
        let caps = Limits::default();
        assert_eq!(check(&with("h"), &caps), Ok(()));
        assert_eq!(check(&with(&"h".repeat(MAX_HOLDER_LEN)), &caps), Ok(()));
        let e = check(&with(""), &caps).unwrap_err();
        assert_eq!(
            e.to_string(),
            "descriptor 1: ratelimitd.holder must not be empty"
        );
        assert!(e.is_invalid_argument());
        let e = check(&with(&"h".repeat(MAX_HOLDER_LEN + 1)), &caps).unwrap_err();
        assert_eq!(
            e.to_string(),
            "descriptor 1: ratelimitd.holder is 129 bytes; at most 128 are accepted"
        );
    }
}
