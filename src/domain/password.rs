//! The admin password: its rule, its argon2id hash, and the check of a login against the hash.
//!
//! Only the hash is stored (a PHC string, `$argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>`), with
//! OWASP's minimum parameters for argon2id: 19 MiB of memory, two passes, one lane. A check is
//! slow on purpose (its cost: BENCHMARKS.md, "The admin password check"), which is why the
//! admin page throttles logins before it ever calls [`verify`] (`web::session::LoginThrottle`).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};

use crate::error::{Code, Error};

/// A password in flight (the control socket's request, a login form): `Debug` never shows it.
#[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password([redacted])")
    }
}

/// Any other secret in flight through a typed request (a destination's access token): `Debug`
/// never shows it, so a log line of the request does not carry it.
#[derive(Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct SecretText(pub String);

impl std::fmt::Debug for SecretText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretText([redacted])")
    }
}

/// The shortest password accepted: long enough that throttled guessing cannot find it.
pub const MIN_CHARS: usize = 12;
/// The longest: a bound on the work a login asks of the hash.
pub const MAX_BYTES: usize = 1024;

/// OWASP's minimum for argon2id (memory in KiB, passes, lanes).
const MEMORY_KIB: u32 = 19 * 1024;
const PASSES: u32 = 2;
const LANES: u32 = 1;

fn hasher() -> Argon2<'static> {
    let params =
        Params::new(MEMORY_KIB, PASSES, LANES, None).expect("OWASP's parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Checks a new password against the rule.
pub fn check_rule(password: &str) -> Result<(), Error> {
    let chars = password.chars().count();
    if chars < MIN_CHARS {
        return Err(Error::field(
            Code::InvalidField,
            "password",
            format!("the admin password must be at least {MIN_CHARS} characters; got {chars}"),
        ));
    }
    if password.len() > MAX_BYTES {
        return Err(Error::field(
            Code::InvalidField,
            "password",
            format!(
                "the admin password must be at most {MAX_BYTES} bytes; got {}",
                password.len()
            ),
        ));
    }
    Ok(())
}

/// The argon2id PHC string of a password that passed [`check_rule`], with a new random salt.
///
/// # Panics
/// If the operating system has no random numbers to give.
pub fn hash(password: &str) -> Result<String, Error> {
    check_rule(password)?;
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).expect("the OS random number generator failed");
    let salt = SaltString::encode_b64(&salt).expect("16 bytes is a valid salt");
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::new(Code::Internal, format!("hashing the password failed: {e}")))
}

/// Whether `password` is the one `stored` is the hash of. A stored hash that does not parse
/// matches nothing. The parameters are read from the stored string, so a hash made with other
/// parameters still checks.
#[must_use]
pub fn verify(password: &str, stored: &str) -> bool {
    if password.len() > MAX_BYTES {
        return false;
    }
    match PasswordHash::new(stored) {
        Ok(parsed) => hasher()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// A new password for the first start: 24 base62 characters, a-z, A-Z and 0-9 (143 bits).
///
/// # Panics
/// If the operating system has no random numbers to give.
#[must_use]
pub fn generate() -> String {
    use crate::domain::base62::DIGITS;
    let mut out = String::with_capacity(24);
    while out.len() < 24 {
        let mut random = [0u8; 32];
        getrandom::fill(&mut random).expect("the OS random number generator failed");
        // 256 is not a multiple of 62: bytes past the last whole multiple (248) would favour
        // the first letters, so they are skipped.
        for b in random.into_iter().filter(|b| *b < 248) {
            if out.len() < 24 {
                out.push(char::from(DIGITS[usize::from(b) % DIGITS.len()]));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_holds_at_its_bounds() {
        assert!(check_rule(&"x".repeat(MIN_CHARS)).is_ok());
        let short = check_rule(&"x".repeat(MIN_CHARS - 1)).unwrap_err();
        assert_eq!(short.field, Some("password"));
        assert!(short.message.contains("at least 12"), "{}", short.message);
        // Characters, not bytes: twelve two-byte letters pass.
        assert!(check_rule(&"é".repeat(MIN_CHARS)).is_ok());
        assert!(check_rule(&"x".repeat(MAX_BYTES)).is_ok());
        let long = check_rule(&"x".repeat(MAX_BYTES + 1)).unwrap_err();
        assert!(long.message.contains("at most 1024"), "{}", long.message);
    }

    #[test]
    fn a_hash_verifies_its_password_and_nothing_else() {
        let stored = hash("correct horse battery").unwrap();
        assert!(
            stored.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{stored}"
        );
        assert!(!stored.contains("correct horse"));
        assert!(verify("correct horse battery", &stored));
        assert!(!verify("correct horse batterY", &stored));
        assert!(!verify("", &stored));
        assert!(!verify("correct horse battery", "not a hash"));
        // A new salt each time.
        assert_ne!(stored, hash("correct horse battery").unwrap());
    }

    #[test]
    fn debug_never_shows_a_password() {
        let shown = format!("{:?}", Password("hunter2hunter2".to_owned()));
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    /// How long one [`verify`] takes here: a measurement, not a test of speed (it asserts only
    /// that the check answers). `cargo test --release --lib verify_time -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement; run in a release build"]
    fn verify_time() {
        let stored = hash("correct horse battery").unwrap();
        let mut times: Vec<std::time::Duration> = (0..25)
            .map(|_| {
                let started = std::time::Instant::now();
                assert!(verify("correct horse battery", &stored));
                started.elapsed()
            })
            .collect();
        times.sort();
        eprintln!(
            "argon2id verify ({}): min {:?}, median {:?}, max {:?} over {} runs",
            stored.split('$').nth(3).unwrap_or_default(),
            times[0],
            times[times.len() / 2],
            times[times.len() - 1],
            times.len()
        );
    }

    #[test]
    fn a_generated_password_passes_the_rule() {
        let p = generate();
        assert_eq!(p.len(), 24);
        assert!(p.bytes().all(|b| b.is_ascii_alphanumeric()));
        check_rule(&p).unwrap();
        assert_ne!(p, generate());
    }
}
