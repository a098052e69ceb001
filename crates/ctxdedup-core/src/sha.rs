//! SHA-256 checksums: the only digest ctxdedup ever shows or persists.

use sha2::{Digest, Sha256};

/// SHA-256 digests of several messages, in order. With the x86 SHA extensions two messages are
/// hashed at once (see `sha_ni`), which nearly halves the time of a batch of similar sizes;
/// elsewhere each is hashed in turn by the `sha2` crate.
pub fn sha256_many(messages: &[&[u8]]) -> Vec<[u8; 32]> {
    #[cfg(target_arch = "x86_64")]
    if messages.len() > 1 && crate::sha_ni::available() {
        // SAFETY: the CPU has the instructions `sha256_lanes` needs (checked just above).
        return unsafe { crate::sha_ni::sha256_lanes(messages) };
    }
    messages.iter().map(|m| Sha256::digest(m).into()).collect()
}

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for byte in digest {
        out.push(char::from_digit(u32::from(byte >> 4), 16).unwrap_or('0'));
        out.push(char::from_digit(u32::from(byte & 0x0f), 16).unwrap_or('0'));
    }
    out
}

#[cfg(test)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "test data: small indices and byte values"
)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn one_at_a_time(messages: &[Vec<u8>]) -> Vec<[u8; 32]> {
        messages.iter().map(|m| Sha256::digest(m).into()).collect()
    }

    #[test]
    fn many_matches_one_at_a_time_around_every_padding_boundary() {
        // Lengths where the padding takes one or two blocks, and multi-block bodies.
        let lengths = [
            0usize, 1, 3, 54, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000,
        ];
        let messages: Vec<Vec<u8>> = lengths
            .iter()
            .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        assert_eq!(sha256_many(&slices), one_at_a_time(&messages));
        // Every pair, so each length meets each other in the other lane.
        for a in &messages {
            for b in &messages {
                assert_eq!(sha256_many(&[a, b]), one_at_a_time(&[a.clone(), b.clone()]));
            }
        }
        assert!(sha256_many(&[]).is_empty());
    }

    proptest! {
        #[test]
        fn many_matches_one_at_a_time(
            messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..700), 0..9)
        ) {
            let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
            prop_assert_eq!(sha256_many(&slices), one_at_a_time(&messages));
        }
    }

    #[test]
    fn known_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
