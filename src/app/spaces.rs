//! Spaces, credentials and the first owner's password: create, list, rotate, revoke, back up.
//!
//! These methods of [`App`] are the only way credentials change. The command line calls them on
//! a store it opened itself when no server runs, the server calls the same methods when the
//! command line reaches it through the control socket (`control`), and the admin page calls them
//! too; every path commits through the writer. Credentials are made here and handed to storage
//! only as digests.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::domain::credential::{self, Kind};
use crate::domain::outcome::NewCredential;
use crate::domain::password;
use crate::error::{Code, Error};
use crate::storage::Snapshot;
use crate::storage::SpaceSummary;

/// The rule of a space id: `[a-z0-9][a-z0-9-]{0,31}`.
pub fn check_space_name(name: &str) -> Result<(), Error> {
    if crate::domain::input::is_lowercase_name(name) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "space",
            format!(
                "a space name is 1 to 32 of a-z, 0-9 and '-', not starting with '-'; got {name:?}"
            ),
        ))
    }
}

/// A new space and its credentials, shown once.
#[derive(Serialize, Deserialize, Debug)]
pub struct CreatedSpace {
    pub space: String,
    pub secret: String,
    pub ingest_token: String,
}

/// A rotation's new credential, shown once, and when the one it replaced stops working.
#[derive(Serialize, Deserialize, Debug)]
pub struct Rotated {
    pub space: String,
    pub kind: String,
    pub credential: String,
    pub previous_valid_until_ms: Option<u64>,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct Revoked {
    pub space: String,
    pub kind: String,
    pub revoked: usize,
}

impl App {
    /// Creates a space with new credentials, shown once.
    pub async fn create_space(&self, name: &str) -> Result<CreatedSpace, Error> {
        let secret = credential::generate(Kind::Secret);
        let ingest = credential::generate(Kind::Ingest);
        self.create_space_with(name, secret, ingest).await
    }

    /// Creates a space with credentials the caller chose (`serve --ephemeral` with
    /// `TRACKER_DEV_SECRET`): they must be credentials the tracker could have made.
    pub async fn create_space_with(
        &self,
        name: &str,
        secret: credential::Issued,
        ingest: credential::Issued,
    ) -> Result<CreatedSpace, Error> {
        check_space_name(name)?;
        let (owned, secret_new, ingest_new, now) = (
            name.to_owned(),
            NewCredential::from(&secret),
            NewCredential::from(&ingest),
            self.now_ms(),
        );
        self.store
            .write(move |t| t.create_space(&owned, &secret_new, &ingest_new, now))
            .await?;
        Ok(CreatedSpace {
            space: name.to_owned(),
            secret: secret.text,
            ingest_token: ingest.text,
        })
    }

    /// Makes a new credential of `kind` active; the replaced one works for `rotation_grace`.
    pub async fn rotate(&self, space: &str, kind: Kind) -> Result<Rotated, Error> {
        let new = credential::generate(kind);
        let grace_ms = u64::try_from(self.settings.rotation_grace.as_millis()).unwrap_or(u64::MAX);
        let (name, credential, now) = (space.to_owned(), NewCredential::from(&new), self.now_ms());
        let previous_valid_until_ms = self
            .store
            .write(move |t| t.rotate(&name, &credential, grace_ms, now))
            .await?;
        Ok(Rotated {
            space: space.to_owned(),
            kind: kind.as_str().to_owned(),
            credential: new.text,
            previous_valid_until_ms,
        })
    }

    /// Ends every live credential of `kind` at once (for a leaked key).
    pub async fn revoke(&self, space: &str, kind: Kind) -> Result<Revoked, Error> {
        let (name, now) = (space.to_owned(), self.now_ms());
        let revoked = self
            .store
            .write(move |t| t.revoke(&name, kind, now))
            .await?;
        Ok(Revoked {
            space: space.to_owned(),
            kind: kind.as_str().to_owned(),
            revoked,
        })
    }

    /// Every space with its credentials (never the credentials themselves).
    pub async fn spaces(&self) -> Result<Vec<SpaceSummary>, Error> {
        // Last-used times this process has seen but not yet written back count too.
        let seen: HashMap<_, _> = self.store.keyring().last_used().into_iter().collect();
        self.store.read(move |s| s.list_spaces(&seen)).await
    }

    /// A consistent copy of the data file at `dest` (which must not exist).
    pub async fn backup(
        &self,
        dest: &std::path::Path,
    ) -> Result<crate::storage::BackupStats, Error> {
        if dest.exists() {
            return Err(Error::field(
                Code::InvalidField,
                "dest",
                format!(
                    "{} already exists; a backup never overwrites a file",
                    dest.display()
                ),
            ));
        }
        self.store.backup(dest.to_owned()).await
    }

    /// Sets the first owner's password (user `admin`, made an owner if it is not there): the
    /// rule is checked and the argon2id hash made here, and only the hash is stored.
    pub async fn set_password(&self, password: String) -> Result<(), Error> {
        let hash = crate::app::users::hash_password(password).await?;
        self.store.write(move |t| t.set_admin_password(&hash)).await
    }

    /// On a server's start: when the file has no user yet, makes `admin` an owner with a
    /// generated password and answers it, to be shown once.
    pub async fn ensure_password(&self) -> Result<Option<String>, Error> {
        if !self.store.read(Snapshot::users).await?.is_empty() {
            return Ok(None);
        }
        let generated = password::generate();
        self.set_password(generated.clone()).await?;
        Ok(Some(generated))
    }

    /// `tracker check` on the open file: the tracker's invariants over one snapshot, read-only.
    pub async fn check(&self) -> Result<crate::storage::check::Report, Error> {
        self.store
            .check(self.settings.dedup_expiry(self.now_ms()))
            .await
    }
}
