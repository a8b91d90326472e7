//! Spaces and their credentials in the data file. For the writer (methods of [`Txn`]): creating
//! a space with its first credentials, rotating and revoking them, writing back when each was
//! last used. For the readers (methods of [`Snapshot`]): the space list, a space's number
//! (the admin page's users and their passwords are `users.rs`). The keyring the server checks credentials
//! against is read at start and after a commit that changed them (`credentials_changed`;
//! `keyring_entries`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use redb::{ReadTransaction, ReadableTable};

use crate::domain::credential::{self, CredentialDigest, Kind};
use crate::domain::keyring::{KeyEntry, SpaceRef};
use crate::domain::outcome::NewCredential;
use crate::domain::settings::SpaceSettings;
use crate::error::{Code, Error};
use crate::storage::attribution;
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::records::{self, CredentialRecord, SpaceRecord};
use crate::storage::schema::{CREDENTIALS, META_SPACE_SEQ, SPACE_SETTINGS, SPACES};

impl Txn<'_> {
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

fn space_names(txn: &ReadTransaction) -> Result<HashMap<u32, Arc<str>>, StoreError> {
    let mut names = HashMap::new();
    for entry in txn.open_table(SPACES)?.iter()? {
        let (name, bytes) = entry?;
        let record: SpaceRecord = records::decode(bytes.value())?;
        names.insert(record.no, Arc::from(name.value()));
    }
    Ok(names)
}

/// Every stored credential, as the keyring keeps them.
pub fn keyring_entries(
    txn: &ReadTransaction,
) -> Result<Vec<(CredentialDigest, KeyEntry)>, StoreError> {
    let names = space_names(txn)?;
    let mut out = Vec::new();
    for entry in txn.open_table(CREDENTIALS)?.iter()? {
        let (digest, bytes) = entry?;
        let r: CredentialRecord = records::decode(bytes.value())?;
        let (Some(name), Some(kind)) = (names.get(&r.space_no), Kind::from_u8(r.kind)) else {
            return Err(StoreError::Corrupt(format!(
                "credential {} names space {} or kind {} that does not exist",
                r.public_prefix, r.space_no, r.kind
            )));
        };
        out.push((
            *digest.value(),
            KeyEntry {
                space: SpaceRef {
                    no: r.space_no,
                    name: name.clone(),
                },
                kind,
                valid_until_ms: r.valid_until_ms,
                revoked: r.revoked_at_ms.is_some(),
                last_used_ms: AtomicU64::new(r.last_used_ms),
            },
        ));
    }
    Ok(out)
}

/// A space, its settings and its credentials, for `space list`. Never holds a credential, only
/// its prefix.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct SpaceSummary {
    pub space: String,
    pub created_at_ms: u64,
    pub settings: SpaceSettings,
    pub credentials: Vec<CredentialSummary>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CredentialSummary {
    pub kind: String,
    pub prefix: String,
    pub created_at_ms: u64,
    pub last_used_ms: Option<u64>,
    /// Set for a credential replaced by a rotation: when it stops (or stopped) working.
    pub valid_until_ms: Option<u64>,
    pub revoked_at_ms: Option<u64>,
}

impl CredentialSummary {
    /// Whether it works at `now_ms`, in words: `active`, `in grace until …`, `expired …` or
    /// `revoked …`, each time written by `at` (UTC for the command line, the space's zone on a
    /// page).
    #[must_use]
    pub fn state(&self, now_ms: u64, at: impl Fn(u64) -> String) -> String {
        match (self.revoked_at_ms, self.valid_until_ms) {
            (Some(t), _) => format!("revoked {}", at(t)),
            (None, Some(until)) if until <= now_ms => format!("expired {}", at(until)),
            (None, Some(until)) => format!("in grace until {}", at(until)),
            (None, None) => "active".to_owned(),
        }
    }

    /// Whether it is accepted at `now_ms`.
    #[must_use]
    pub fn works(&self, now_ms: u64) -> bool {
        self.revoked_at_ms.is_none() && self.valid_until_ms.is_none_or(|until| until > now_ms)
    }
}

impl Snapshot {
    /// The number of space `name`.
    pub fn space_no(&self, name: &str) -> Result<u32, StoreError> {
        match self.txn().open_table(SPACES)?.get(name)? {
            Some(bytes) => Ok(records::decode::<SpaceRecord>(bytes.value())?.no),
            None => Err(StoreError::Refused(crate::error::Error::new(
                crate::error::Code::InvalidField,
                format!("no space named {name:?}"),
            ))),
        }
    }

    /// Every space, by name, with its credentials, newest first. `seen` holds last-used times
    /// newer than the stored ones (kept in memory between flushes).
    pub fn list_spaces(
        &self,
        seen: &HashMap<CredentialDigest, u64, impl std::hash::BuildHasher>,
    ) -> Result<Vec<SpaceSummary>, StoreError> {
        let mut spaces = Vec::new();
        let mut by_no = HashMap::new();
        let settings = self.txn().open_table(SPACE_SETTINGS)?;
        for entry in self.txn().open_table(SPACES)?.iter()? {
            let (name, bytes) = entry?;
            let record: SpaceRecord = records::decode(bytes.value())?;
            by_no.insert(record.no, spaces.len());
            spaces.push(SpaceSummary {
                space: name.value().to_owned(),
                created_at_ms: record.created_at_ms,
                settings: attribution::settings(&settings, record.no)?,
                credentials: Vec::new(),
            });
        }
        for entry in self.txn().open_table(CREDENTIALS)?.iter()? {
            let (digest, bytes) = entry?;
            let r: CredentialRecord = records::decode(bytes.value())?;
            let last_used = seen
                .get(digest.value())
                .copied()
                .unwrap_or(0)
                .max(r.last_used_ms);
            if let Some(&i) = by_no.get(&r.space_no) {
                spaces[i].credentials.push(CredentialSummary {
                    kind: Kind::from_u8(r.kind)
                        .map_or("unknown", Kind::as_str)
                        .to_owned(),
                    prefix: r.public_prefix,
                    created_at_ms: r.created_at_ms,
                    last_used_ms: (last_used > 0).then_some(last_used),
                    valid_until_ms: r.valid_until_ms,
                    revoked_at_ms: r.revoked_at_ms,
                });
            }
        }
        for s in &mut spaces {
            s.credentials
                .sort_by(|a, b| (&a.kind, b.created_at_ms).cmp(&(&b.kind, a.created_at_ms)));
        }
        Ok(spaces)
    }
}
