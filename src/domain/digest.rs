//! The 128-bit digest the data file uses as a key: the first 128 bits of a SHA-256, read as a
//! big-endian `u128`.
//!
//! Dedup keys (`dedup.rs`) and the fbclid index (`click.rs`) are both stored under this digest,
//! so it is written once, here. Its output is part of the on-disk format: changing what it
//! returns for any input (another hash, other bits, another byte order) orphans every stored key
//! and is a schema version (a numbered migration and a fixture, see `storage/schema.rs`).

use sha2::{Digest as _, Sha256};

/// Finishes `hasher` and returns the first 128 bits of its SHA-256 as a big-endian `u128`.
/// The caller decides what is hashed (and how fields are separated); this decides what is kept.
#[must_use]
pub fn first_128_bits(hasher: Sha256) -> u128 {
    let digest = hasher.finalize();
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest[..16]);
    u128::from_be_bytes(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SHA-256("abc") is ba7816bf 8f01cfea 414140de 5dae2223 b00361a3 ...: the FIPS 180-2 test
    /// vector, so this pins the hash and the byte order against a value from outside the code.
    #[test]
    fn keeps_the_first_16_bytes_big_endian() {
        assert_eq!(
            first_128_bits(Sha256::new_with_prefix(b"abc")),
            0xba78_16bf_8f01_cfea_4141_40de_5dae_2223
        );
    }
}
