//! The admin page's second factor: TOTP (RFC 6238: HMAC-SHA1, 6 digits, 30-second steps, a
//! step of drift either side) and its ten one-time recovery codes. Here are the rules: a new
//! secret, the `otpauth://` address an authenticator app reads, which step a code belongs to,
//! and the recovery codes with the digests they are stored as. That a step is accepted once
//! (the last one used is remembered) and a recovery code once is the writer's
//! (`storage/users.rs`), which decides both in one transaction.

use sha2::{Digest as _, Sha256};
use totp_rs::{Algorithm, Builder, Secret, Totp};

/// The issuer an authenticator app shows beside the user's name.
pub const ISSUER: &str = "tracker";
/// A TOTP code's digits.
pub const DIGITS: usize = 6;
/// A step's seconds.
pub const STEP_S: u64 = 30;
/// Steps of drift either side of now that are still accepted (a phone's clock a little off).
pub const DRIFT_STEPS: u16 = 1;
/// The secret's bytes: 160 bits, as RFC 4226 recommends.
pub const SECRET_BYTES: usize = 20;
/// Recovery codes given when the second factor is turned on.
pub const RECOVERY_CODES: usize = 10;
/// Random characters of a recovery code (`xxxxx-xxxxx`): 50 bits each.
const RECOVERY_CHARS: usize = 10;
/// The letters of a recovery code: base32's, lowercase, without 0, 1, 8 and 9 to misread.
const RECOVERY_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A user's second factor as stored: the secret (kept, since each login computes codes from
/// it), the last step a code was accepted for, and the digests of the recovery codes not used
/// yet. `Debug` leaves the secret and digests out.
#[derive(Clone, PartialEq, Eq)]
pub struct SecondFactor {
    pub secret: Vec<u8>,
    pub last_step: u64,
    pub recovery: Vec<[u8; 32]>,
}

impl std::fmt::Debug for SecondFactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecondFactor")
            .field("secret", &"[redacted]")
            .field("last_step", &self.last_step)
            .field("recovery_codes_left", &self.recovery.len())
            .finish()
    }
}

/// A new secret of [`SECRET_BYTES`] random bytes.
///
/// # Panics
/// If the operating system has no random numbers to give.
#[must_use]
pub fn new_secret() -> Vec<u8> {
    let mut bytes = vec![0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    bytes
}

fn totp(secret: &[u8], account: &str) -> Totp {
    Builder::new()
        .with_algorithm(Algorithm::SHA1)
        .with_digits(DIGITS as u8)
        .with_skew(DRIFT_STEPS)
        .with_step_duration(STEP_S)
        .with_secret(Secret::from(secret.to_vec()))
        .with_account_name(account)
        .with_issuer(Some(ISSUER))
        // Our own secrets are 160 bits and names a-z, 0-9 and '-': always within the RFC.
        .build_noncompliant()
}

/// The secret as an authenticator app takes it typed in: base32, without padding.
#[must_use]
pub fn secret_text(secret: &[u8]) -> String {
    Secret::from(secret.to_vec()).to_base32()
}

/// The `otpauth://totp/...` address of user `name`'s secret, which the QR code holds.
#[must_use]
pub fn otpauth_uri(secret: &[u8], name: &str) -> String {
    totp(secret, name)
        .to_url()
        .unwrap_or_else(|_| format!("otpauth://totp/{ISSUER}?secret={}", secret_text(secret)))
}

/// The step (`unix seconds / 30`) whose code `code` is, within [`DRIFT_STEPS`] of `now_ms`; none
/// if it is no such code. Spaces within the code are ignored, as apps show `123 456`.
#[must_use]
pub fn matching_step(secret: &[u8], code: &str, now_ms: u64) -> Option<u64> {
    let code: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    if code.len() != DIGITS || !code.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    totp(secret, "").check(&code, now_ms / 1000)
}

/// The code of step `step` (for tests and the setup page's examples, never shown otherwise).
#[must_use]
pub fn code_of_step(secret: &[u8], step: u64) -> String {
    totp(secret, "").generate(step * STEP_S).to_string()
}

/// Whether `text` is written as a TOTP code (digits) rather than a recovery code.
#[must_use]
pub fn looks_like_code(text: &str) -> bool {
    let digits = text.chars().filter(|c| !c.is_whitespace());
    digits.clone().count() == DIGITS && digits.into_iter().all(|c| c.is_ascii_digit())
}

/// [`RECOVERY_CODES`] new recovery codes, to be shown once, and their digests, to be stored.
///
/// # Panics
/// If the operating system has no random numbers to give.
#[must_use]
pub fn new_recovery_codes() -> (Vec<String>, Vec<[u8; 32]>) {
    let mut codes = Vec::with_capacity(RECOVERY_CODES);
    for _ in 0..RECOVERY_CODES {
        let mut bytes = [0u8; RECOVERY_CHARS];
        getrandom::fill(&mut bytes).expect("the OS random number generator failed");
        let chars: String = bytes
            .iter()
            .map(|b| char::from(RECOVERY_ALPHABET[usize::from(b & 31)]))
            .collect();
        codes.push(format!("{}-{}", &chars[..5], &chars[5..]));
    }
    let digests = codes.iter().map(|c| recovery_digest(c)).collect();
    (codes, digests)
}

/// The SHA-256 of a recovery code as typed, with case, spaces and dashes left out: its 50
/// random bits need no salt or slow hash.
#[must_use]
pub fn recovery_digest(code: &str) -> [u8; 32] {
    let kept: String = code
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    Sha256::digest(kept.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6238, appendix B: the SHA-1 secret "12345678901234567890", whose 8-digit codes the
    /// RFC lists; a 6-digit code is the last six of them.
    const RFC_SECRET: &[u8] = b"12345678901234567890";

    #[test]
    fn codes_are_those_of_rfc_6238() {
        for (unix_s, eight) in [
            (59, "94287082"),
            (1_111_111_109, "07081804"),
            (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"),
        ] {
            assert_eq!(code_of_step(RFC_SECRET, unix_s / STEP_S), eight[2..]);
            assert_eq!(
                matching_step(RFC_SECRET, &eight[2..], unix_s * 1000),
                Some(unix_s / STEP_S)
            );
        }
    }

    #[test]
    fn a_code_is_accepted_one_step_either_side_and_no_further() {
        let now_ms = 1_800_000_000_000;
        let step = now_ms / 1000 / STEP_S;
        for drift in [-1i64, 0, 1] {
            let at = step.checked_add_signed(drift).unwrap();
            let code = code_of_step(RFC_SECRET, at);
            assert_eq!(
                matching_step(RFC_SECRET, &code, now_ms),
                Some(at),
                "{drift}"
            );
        }
        for drift in [-2i64, 2] {
            let code = code_of_step(RFC_SECRET, step.checked_add_signed(drift).unwrap());
            assert_eq!(matching_step(RFC_SECRET, &code, now_ms), None, "{drift}");
        }
        let code = code_of_step(RFC_SECRET, step);
        let spaced = format!("{} {}", &code[..3], &code[3..]);
        assert_eq!(matching_step(RFC_SECRET, &spaced, now_ms), Some(step));
        assert_eq!(matching_step(RFC_SECRET, &code[..5], now_ms), None);
        assert_eq!(matching_step(RFC_SECRET, &format!("{code}0"), now_ms), None);
        assert_eq!(matching_step(RFC_SECRET, "abcdef", now_ms), None);
    }

    #[test]
    fn the_otpauth_address_names_the_issuer_the_user_and_the_secret() {
        let uri = otpauth_uri(RFC_SECRET, "anna");
        assert!(uri.starts_with("otpauth://totp/tracker:anna?"), "{uri}");
        assert!(
            uri.contains("secret=GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"),
            "{uri}"
        );
        assert!(uri.contains("issuer=tracker"), "{uri}");
        assert_eq!(secret_text(RFC_SECRET), "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ");
        assert_eq!(new_secret().len(), SECRET_BYTES);
        assert_ne!(new_secret(), new_secret());
    }

    #[test]
    fn recovery_codes_are_ten_new_ones_stored_as_digests_of_what_is_typed() {
        let (codes, digests) = new_recovery_codes();
        assert_eq!(codes.len(), RECOVERY_CODES);
        assert_eq!(digests.len(), RECOVERY_CODES);
        for (code, digest) in codes.iter().zip(&digests) {
            assert_eq!(code.len(), 11, "{code}");
            assert_eq!(recovery_digest(code), *digest);
            assert_eq!(
                recovery_digest(&code.to_uppercase().replace('-', " ")),
                *digest
            );
            assert!(!looks_like_code(code));
        }
        let mut unique = codes.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), RECOVERY_CODES);
        assert!(looks_like_code("123 456"));
        assert!(!looks_like_code("12345"));
    }

    #[test]
    fn a_second_factor_shows_no_secret_in_debug() {
        let factor = SecondFactor {
            secret: b"very secret bytes!!!".to_vec(),
            last_step: 3,
            recovery: vec![[7; 32]],
        };
        let shown = format!("{factor:?}");
        assert!(!shown.contains("118"), "{shown}");
        assert!(shown.contains("redacted"), "{shown}");
    }
}
