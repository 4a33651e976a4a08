//! Which server a key lives on, and the key memcached is sent. Both follow Go's memcache client
//! (gomemcache) so that a fleet mixing Go and ratelimitd instances counts on the same server and
//! the same key: the server is `crc32(key) % servers` (IEEE CRC-32, servers in
//! `MEMCACHE_HOST_PORT` order), and a key memcached accepts is sent verbatim.

use std::borrow::Cow;
use std::fmt::Write;

use sha2::{Digest, Sha256};

/// memcached's longest key.
const MAX_KEY: usize = 250;

/// The IEEE CRC-32 (the one Go's `crc32.ChecksumIEEE` computes), bit by bit: keys are short.
pub(super) fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

/// The index of the server `key` lives on, among `servers` (at least one).
pub(super) fn pick(key: &str, servers: usize) -> usize {
    if servers <= 1 {
        return 0;
    }
    (crc32(key.as_bytes()) % servers as u32) as usize
}

/// The key sent to memcached: `key` itself when memcached accepts it (at most 250 bytes, no
/// space or control character), otherwise `sha256:` and the key's SHA-256 in hex. Go's client
/// refuses such keys (its memcache backend then never counts them); hashing keeps them counted
/// here, with a key of bounded length that no legal key can equal (legal keys never need it).
pub(super) fn wire_key(key: &str) -> Cow<'_, str> {
    let legal = key.len() <= MAX_KEY && key.bytes().all(|b| b > b' ' && b != 0x7f);
    if legal && !key.starts_with("sha256:") {
        return Cow::Borrowed(key);
    }
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in Sha256::digest(key.as_bytes()) {
        let _ = write!(out, "{b:02x}");
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_is_the_ieee_checksum() {
        // The check value of CRC-32/ISO-HDLC, and Go's crc32.ChecksumIEEE([]byte("hello")).
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"hello"), 0x3610_A686);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn servers_are_picked_by_crc32_modulo_their_count() {
        assert_eq!(pick("anything", 1), 0);
        let key = "domain_key_value_1700000000";
        assert_eq!(pick(key, 3), (crc32(key.as_bytes()) % 3) as usize);
        let spread: std::collections::HashSet<_> =
            (0..64).map(|i| pick(&format!("k{i}"), 3)).collect();
        assert_eq!(spread.len(), 3, "keys spread over every server");
    }

    #[test]
    fn legal_keys_go_verbatim_and_others_are_hashed() {
        assert_eq!(wire_key("d_k_v_60"), "d_k_v_60");
        for bad in ["has space", "tab\there", &"x".repeat(251), "sha256:abc"] {
            let w = wire_key(bad);
            assert!(w.starts_with("sha256:") && w.len() == 71, "{bad:?} -> {w}");
            assert!(w.bytes().all(|b| b > b' '));
        }
        assert_ne!(wire_key("a b"), wire_key("a  b"));
    }
}
