//! The records of the admin page's users (`USERS`) and of the audit log (`AUDIT`).

use serde::{Deserialize, Serialize};

use super::codec::Record;
use crate::domain::audit::AuditEntry;
use crate::domain::totp::SecondFactor;
use crate::domain::user::{Invitation, Role, User};
use crate::storage::error::StoreError;

/// A user, under its name. `role` is `Role::stored`; `invitation` the SHA-256 of a token and
/// when it stops working; `second_factor` (version 2) the TOTP secret, the last step a code
/// was accepted for and the recovery codes' SHA-256. Version 1 (no second factor) is read as
/// it is.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub role: u8,
    pub spaces: Vec<String>,
    pub password_hash: Option<String>,
    pub invitation: Option<([u8; 32], u64)>,
    pub second_factor: Option<SecondFactorRecord>,
}
impl Record for UserRecord {
    const VERSION: u8 = 2;
    const NAME: &'static str = "user";

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        match version {
            1 => {
                let mut v2 = body.to_vec();
                // The `None` of a second factor.
                v2.push(0);
                super::codec::from_postcard(&v2)
            }
            2 => super::codec::from_postcard(body),
            other => Err(super::codec::unreadable_version::<Self>(other)),
        }
    }
}

/// A user's second factor (`domain::totp::SecondFactor`), in their [`UserRecord`].
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct SecondFactorRecord {
    pub secret: Vec<u8>,
    pub last_step: u64,
    pub recovery: Vec<[u8; 32]>,
}

/// An entry of the audit log: `AuditEntry`'s fields in order, which the golden test below
/// holds.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct AuditRecord(pub AuditEntry);
impl Record for AuditRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "audit";
}

impl UserRecord {
    #[must_use]
    pub fn of(user: &User) -> UserRecord {
        UserRecord {
            role: user.role.stored(),
            spaces: user.spaces.clone(),
            password_hash: user.password_hash.clone(),
            invitation: user.invitation.as_ref().map(|i| (i.digest, i.expires_ms)),
            second_factor: user.second_factor.as_ref().map(|f| SecondFactorRecord {
                secret: f.secret.clone(),
                last_step: f.last_step,
                recovery: f.recovery.clone(),
            }),
        }
    }

    /// The user named `name` this record stores.
    pub fn into_user(self, name: &str) -> Result<User, StoreError> {
        let role = Role::from_stored(self.role).ok_or_else(|| {
            StoreError::Corrupt(format!("user {name:?} has unknown role {}", self.role))
        })?;
        Ok(User {
            name: name.to_owned(),
            role,
            spaces: self.spaces,
            password_hash: self.password_hash,
            invitation: self
                .invitation
                .map(|(digest, expires_ms)| Invitation { digest, expires_ms }),
            second_factor: self.second_factor.map(|f| SecondFactor {
                secret: f.secret,
                last_step: f.last_step,
                recovery: f.recovery,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::{decode, encode};

    /// Version 2's bytes, written out by hand: a change of layout fails here first.
    #[test]
    fn a_user_record_has_its_stored_bytes() {
        let record = UserRecord {
            role: 2,
            spaces: vec!["a".into()],
            password_hash: Some("h".into()),
            invitation: None,
            second_factor: Some(SecondFactorRecord {
                secret: vec![9, 8],
                last_step: 300,
                recovery: vec![[5; 32]],
            }),
        };
        let bytes = encode(&record);
        let mut expected = vec![2, 2, 1, 1, b'a', 1, 1, b'h', 0, 1, 2, 9, 8, 0xac, 0x02, 1];
        expected.extend_from_slice(&[5; 32]);
        assert_eq!(bytes, expected);
        assert_eq!(decode::<UserRecord>(&bytes).unwrap(), record);
    }

    /// Version 1's bytes, as schema 21 wrote them: read with no second factor.
    #[test]
    fn a_user_record_of_version_1_is_read_without_a_second_factor() {
        let record = decode::<UserRecord>(&[1, 2, 1, 1, b'a', 1, 1, b'h', 0]).unwrap();
        assert_eq!(
            record,
            UserRecord {
                role: 2,
                spaces: vec!["a".into()],
                password_hash: Some("h".into()),
                invitation: None,
                second_factor: None,
            }
        );
        assert!(decode::<UserRecord>(&[1, 2, 1, 1, b'a', 1, 1, b'h', 0, 0]).is_err());
    }

    #[test]
    fn an_audit_record_has_its_stored_bytes() {
        let record = AuditRecord(AuditEntry {
            at_ms: 1,
            who: "a".into(),
            address: None,
            action: "b".into(),
            space: Some("c".into()),
            subject: None,
        });
        let bytes = encode(&record);
        assert_eq!(bytes, [1, 1, 1, b'a', 0, 1, b'b', 1, 1, b'c', 0]);
        assert_eq!(decode::<AuditRecord>(&bytes).unwrap(), record);
    }
}
