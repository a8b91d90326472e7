//! The running server's view of which credentials are valid: a map from digest to space.
//!
//! Authentication per request is [`recognise`](crate::domain::credential::recognise) (a checksum),
//! one SHA-256 and one map look-up. A look-up keyed by the digest of a 128-bit random value leaks
//! nothing through timing: the caller cannot steer the digest, so learning how far a look-up got
//! says nothing about any stored credential. The map is rebuilt from the data file by the writer
//! after every commit that changes credentials, before that commit is answered, so a rotation or
//! revocation takes effect at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use crate::domain::credential::{self, CredentialDigest, Kind};
use crate::error::Error;

/// The space a request acts in, once authenticated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpaceRef {
    pub no: u32,
    pub name: Arc<str>,
}

/// One valid (or formerly valid) credential, as the keyring keeps it.
#[derive(Debug)]
pub struct KeyEntry {
    pub space: SpaceRef,
    pub kind: Kind,
    /// `Some(t)`: replaced by a rotation, accepted until `t` (exclusive).
    pub valid_until_ms: Option<u64>,
    pub revoked: bool,
    /// Updated in memory on every use; written to the data file by the writer now and then.
    pub last_used_ms: AtomicU64,
}

/// A lock poisoned by a panic is recovered, not passed on to every later request: the map is
/// only ever replaced whole, so a panic while holding it leaves the old map, never half of one.
#[derive(Default)]
pub struct Keyring {
    entries: RwLock<HashMap<CredentialDigest, Arc<KeyEntry>>>,
}

impl Keyring {
    /// Replaces the whole map; last-used times already seen in memory are kept.
    pub fn replace(&self, entries: Vec<(CredentialDigest, KeyEntry)>) {
        let mut map = self.entries.write().unwrap_or_else(PoisonError::into_inner);
        let fresh = entries
            .into_iter()
            .map(|(digest, entry)| {
                if let Some(old) = map.get(&digest) {
                    let seen = old.last_used_ms.load(Ordering::Relaxed);
                    entry.last_used_ms.fetch_max(seen, Ordering::Relaxed);
                }
                (digest, Arc::new(entry))
            })
            .collect();
        *map = fresh;
    }

    /// The space of a bearer secret from an `Authorization` header value.
    pub fn bearer(&self, header: Option<&str>, now_ms: u64) -> Result<SpaceRef, Error> {
        let Some(header) = header else {
            return Err(Error::unauthorized(
                "this endpoint needs the space's secret: send `Authorization: Bearer <secret>`",
            ));
        };
        let Some(text) = bearer_credential(header) else {
            return Err(Error::unauthorized(
                "the Authorization header must be `Bearer <secret>`",
            ));
        };
        match credential::recognise(text) {
            Some(Kind::Ingest) => Err(Error::unauthorized(
                "an ingest token is accepted only as `token=` on GET /e and GET /bind; send the \
                 space's secret here",
            )),
            Some(Kind::Secret) => self.lookup(text, Kind::Secret, now_ms),
            None => Err(Error::bad_credential()),
        }
    }

    /// The space of an ingest token from a `token=` query parameter.
    pub fn ingest_token(&self, token: Option<&str>, now_ms: u64) -> Result<SpaceRef, Error> {
        let Some(token) = token else {
            return Err(Error::unauthorized(
                "this endpoint needs the space's ingest token in the query: `token=<ingest token>`",
            ));
        };
        match credential::recognise(token) {
            Some(Kind::Secret) => Err(Error::unauthorized(
                "a secret must never be sent in a URL, where logs keep it; use the space's ingest \
                 token here, and rotate the secret you just sent",
            )),
            Some(Kind::Ingest) => self.lookup(token, Kind::Ingest, now_ms),
            None => Err(Error::bad_credential()),
        }
    }

    fn lookup(&self, text: &str, kind: Kind, now_ms: u64) -> Result<SpaceRef, Error> {
        let digest = credential::digest(text);
        let map = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        let entry = map.get(&digest).ok_or_else(Error::bad_credential)?;
        let expired = entry.valid_until_ms.is_some_and(|until| now_ms >= until);
        if entry.kind != kind || entry.revoked || expired {
            return Err(Error::bad_credential());
        }
        entry.last_used_ms.fetch_max(now_ms, Ordering::Relaxed);
        Ok(entry.space.clone())
    }

    /// The space of a credential the tracker issued, whatever its state (expired, revoked, of
    /// the wrong kind for the endpoint): a refused request is logged under it. `None` for
    /// anything else.
    #[must_use]
    pub fn issuer_space(&self, credential_text: &str) -> Option<SpaceRef> {
        credential::recognise(credential_text)?;
        let digest = credential::digest(credential_text);
        let map = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        map.get(&digest).map(|entry| entry.space.clone())
    }

    /// Last-used times seen since start, for the writer to persist and `space list` to show.
    #[must_use]
    pub fn last_used(&self) -> Vec<(CredentialDigest, u64)> {
        let map = self.entries.read().unwrap_or_else(PoisonError::into_inner);
        map.iter()
            .map(|(d, e)| (*d, e.last_used_ms.load(Ordering::Relaxed)))
            .filter(|(_, t)| *t > 0)
            .collect()
    }
}

/// The credential of an `Authorization: Bearer <credential>` header value. The scheme name is
/// case-insensitive (RFC 9110 section 11.1).
#[must_use]
pub fn bearer_credential(header: &str) -> Option<&str> {
    header
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, credential)| credential.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    fn ring(valid_until_ms: Option<u64>, revoked: bool) -> (Keyring, String, String) {
        let secret = credential::generate(Kind::Secret);
        let token = credential::generate(Kind::Ingest);
        let space = SpaceRef {
            no: 1,
            name: "default".into(),
        };
        let entry = |kind| KeyEntry {
            space: space.clone(),
            kind,
            valid_until_ms,
            revoked,
            last_used_ms: AtomicU64::new(0),
        };
        let k = Keyring::default();
        k.replace(vec![
            (secret.digest, entry(Kind::Secret)),
            (token.digest, entry(Kind::Ingest)),
        ]);
        (k, secret.text, token.text)
    }

    #[test]
    fn each_kind_only_where_it_belongs() {
        let (k, secret, token) = ring(None, false);
        assert_eq!(
            k.bearer(Some(&format!("Bearer {secret}")), 1).unwrap().no,
            1
        );
        assert_eq!(k.ingest_token(Some(&token), 1).unwrap().no, 1);
        assert_eq!(
            k.bearer(Some(&format!("Bearer {token}")), 1)
                .unwrap_err()
                .code,
            Code::Unauthorized
        );
        let in_url = k.ingest_token(Some(&secret), 1).unwrap_err();
        assert!(in_url.message.contains("URL"));
        assert!(k.bearer(None, 1).is_err());
        assert!(k.bearer(Some(&secret), 1).is_err(), "no Bearer scheme");
        assert_eq!(
            k.bearer(Some(&format!("BEARER {secret}")), 1).unwrap().no,
            1
        );
        assert!(k.bearer(Some(&format!("Basic {secret}")), 1).is_err());
        assert!(k.ingest_token(Some("trk_it_nonsense"), 1).is_err());
    }

    #[test]
    fn grace_ends_at_its_deadline_and_revocation_at_once() {
        let (k, secret, _) = ring(Some(100), false);
        let h = format!("Bearer {secret}");
        assert!(k.bearer(Some(&h), 99).is_ok());
        assert!(k.bearer(Some(&h), 100).is_err());
        let (k, secret, _) = ring(None, true);
        assert!(k.bearer(Some(&format!("Bearer {secret}")), 1).is_err());
    }

    #[test]
    fn unknown_credential_gets_the_same_answer_as_revoked() {
        let (k, _, _) = ring(None, false);
        let (revoked, secret, _) = ring(None, true);
        let stranger = credential::generate(Kind::Secret).text;
        let a = k
            .bearer(Some(&format!("Bearer {stranger}")), 1)
            .unwrap_err();
        let b = revoked
            .bearer(Some(&format!("Bearer {secret}")), 1)
            .unwrap_err();
        assert_eq!(a, b);
    }

    #[test]
    fn a_panic_while_the_lock_is_held_does_not_refuse_every_later_request() {
        let (k, secret, token) = ring(None, false);
        std::thread::scope(|s| {
            let holder = s.spawn(|| {
                let _map = k.entries.write().unwrap();
                panic!("a bug while the keyring is locked");
            });
            assert!(holder.join().is_err());
        });
        assert!(k.entries.is_poisoned());
        let header = format!("Bearer {secret}");
        assert_eq!(k.bearer(Some(&header), 1).unwrap().no, 1);
        assert_eq!(k.issuer_space(&token).unwrap().no, 1);
        assert_eq!(k.last_used().len(), 1);
        k.replace(Vec::new());
        assert!(k.bearer(Some(&header), 1).is_err());
    }
}
