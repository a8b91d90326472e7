//! The records of the admin page's users (`USERS`) and of the audit log (`AUDIT`).

use serde::{Deserialize, Serialize};

use super::codec::Record;
use crate::domain::audit::AuditEntry;
use crate::domain::user::{Invitation, Role, User};
use crate::storage::error::StoreError;

/// A user, under its name. `role` is `Role::stored`; `invitation` the SHA-256 of a token and
/// when it stops working.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub role: u8,
    pub spaces: Vec<String>,
    pub password_hash: Option<String>,
    pub invitation: Option<([u8; 32], u64)>,
}
impl Record for UserRecord {
    const VERSION: u8 = 1;
    const NAME: &'static str = "user";
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::records::{decode, encode};

    /// Version 1's bytes, written out by hand: a change of layout fails here first.
    #[test]
    fn a_user_record_has_its_stored_bytes() {
        let record = UserRecord {
            role: 2,
            spaces: vec!["a".into()],
            password_hash: Some("h".into()),
            invitation: None,
        };
        let bytes = encode(&record);
        assert_eq!(bytes, [1, 2, 1, 1, b'a', 1, 1, b'h', 0]);
        assert_eq!(decode::<UserRecord>(&bytes).unwrap(), record);
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
