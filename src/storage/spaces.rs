//! Spaces and their credentials in the data file, for the writer (methods of [`Txn`]): creating
//! a space with its first credentials, rotating and revoking them, writing back when each was
//! last used; and the admin password's hash. The keyring the server checks credentials against
//! is read after a commit that changed them (`credentials_changed`; `read::keyring_entries`).

use redb::ReadableTable;

use crate::domain::credential::{self, Kind};
use crate::domain::outcome::NewCredential;
use crate::error::{Code, Error};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::records::{self, CredentialRecord, SpaceRecord};
use crate::storage::schema::{ADMIN_PASSWORD, META_SPACE_SEQ};

impl Txn<'_> {
    /// Replaces the admin password's hash (a PHC string; never the password).
    pub fn set_admin_password(&mut self, hash: &str) -> Result<(), StoreError> {
        self.admin.open()?.insert(ADMIN_PASSWORD, hash.as_bytes())?;
        Ok(())
    }
    /// Creates space `name` with its first secret and ingest token; answers its number.
    pub fn create_space(
        &mut self,
        name: &str,
        secret: &NewCredential,
        ingest: &NewCredential,
        now_ms: u64,
    ) -> Result<u32, StoreError> {
        if self.spaces.open()?.get(name)?.is_some() {
            return Err(StoreError::Refused(Error::field(
                Code::Conflict,
                "space",
                format!("space {name:?} already exists; choose another name"),
            )));
        }
        let no = self.meta.get(META_SPACE_SEQ)?.map_or(0, |v| v.value()) + 1;
        let no =
            u32::try_from(no).map_err(|_| StoreError::Corrupt("space numbers exhausted".into()))?;
        self.meta.insert(META_SPACE_SEQ, u64::from(no))?;
        let record = SpaceRecord {
            no,
            created_at_ms: now_ms,
        };
        self.spaces
            .open()?
            .insert(name, records::encode(&record).as_slice())?;
        self.insert_credential(no, secret, now_ms)?;
        self.insert_credential(no, ingest, now_ms)?;
        self.credentials_changed = true;
        Ok(no)
    }

    /// Makes `new` the active credential of its kind; the one it replaces keeps working for
    /// `grace_ms`. Answers when that one stops, `None` if none was active.
    pub fn rotate(
        &mut self,
        space: &str,
        new: &NewCredential,
        grace_ms: u64,
        now_ms: u64,
    ) -> Result<Option<u64>, StoreError> {
        let no = self.existing_space(space)?;
        let until = now_ms.saturating_add(grace_ms);
        let mut replaced = false;
        self.update_credentials(no, new.kind, |c| {
            if c.valid_until_ms.is_none() && c.revoked_at_ms.is_none() {
                c.valid_until_ms = Some(until);
                replaced = true;
            }
        })?;
        self.insert_credential(no, new, now_ms)?;
        self.credentials_changed = true;
        Ok(replaced.then_some(until))
    }

    /// Ends every live credential of `kind` in `space` at once; answers how many.
    pub fn revoke(&mut self, space: &str, kind: Kind, now_ms: u64) -> Result<usize, StoreError> {
        let no = self.existing_space(space)?;
        let mut count = 0;
        self.update_credentials(no, kind, |c| {
            let live = c.valid_until_ms.is_none_or(|until| now_ms < until);
            if c.revoked_at_ms.is_none() && live {
                c.revoked_at_ms = Some(now_ms);
                count += 1;
            }
        })?;
        self.credentials_changed = true;
        Ok(count)
    }

    /// Writes back when credentials were last used (kept in memory between flushes). A record
    /// that does not decode is skipped and logged: a last-used time is not worth a batch.
    pub(super) fn flush_last_used(
        &mut self,
        seen: &[(credential::CredentialDigest, u64)],
    ) -> Result<(), StoreError> {
        for (digest, at) in seen {
            let record = match self.credentials.open()?.get(digest)? {
                None => continue,
                Some(bytes) => match records::decode::<CredentialRecord>(bytes.value()) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(error = %e, "credential record; last-used time not written");
                        continue;
                    }
                },
            };
            if record.last_used_ms < *at {
                let record = CredentialRecord {
                    last_used_ms: *at,
                    ..record
                };
                self.credentials
                    .open()?
                    .insert(digest, records::encode(&record).as_slice())?;
            }
        }
        Ok(())
    }

    /// The number of space `name`, or the refusal a caller reads when there is none.
    fn existing_space(&mut self, name: &str) -> Result<u32, StoreError> {
        match self.spaces.open()?.get(name)? {
            None => Err(refused(format!("no space named {name:?}"))),
            Some(bytes) => Ok(records::decode::<SpaceRecord>(bytes.value())?.no),
        }
    }

    fn insert_credential(
        &mut self,
        space_no: u32,
        c: &NewCredential,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let record = CredentialRecord {
            space_no,
            kind: c.kind as u8,
            public_prefix: c.public_prefix.clone(),
            created_at_ms: now_ms,
            valid_until_ms: None,
            revoked_at_ms: None,
            last_used_ms: 0,
        };
        self.credentials
            .open()?
            .insert(&c.digest, records::encode(&record).as_slice())?;
        Ok(())
    }

    /// Applies `change` to every credential of `kind` in space `space_no`, after decoding all of
    /// them. The table holds a few records per space, so a scan is the simplest correct thing.
    fn update_credentials(
        &mut self,
        space_no: u32,
        kind: Kind,
        mut change: impl FnMut(&mut CredentialRecord),
    ) -> Result<(), StoreError> {
        let mut updates = Vec::new();
        for entry in self.credentials.open()?.iter()? {
            let (digest, bytes) = entry?;
            let mut record: CredentialRecord = records::decode(bytes.value())?;
            if record.space_no == space_no && record.kind == kind as u8 {
                let before = record.clone();
                change(&mut record);
                if record != before {
                    updates.push((*digest.value(), record));
                }
            }
        }
        for (digest, record) in updates {
            self.credentials
                .open()?
                .insert(&digest, records::encode(&record).as_slice())?;
        }
        Ok(())
    }
}

/// A request the caller must change (a taken or unknown name); answered as it is.
fn refused(message: String) -> StoreError {
    StoreError::Refused(Error::new(Code::InvalidField, message))
}
