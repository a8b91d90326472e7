//! Spaces and credentials: create, list, rotate, revoke.
//!
//! These functions are the only way credentials change. The command line calls them on a store
//! it opened itself when no server runs, and the server calls the same functions when the
//! command line reaches it through the admin socket; both paths commit through the writer.
//! Credentials are made here and handed to storage only as digests.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::domain::credential::{self, Kind};
use crate::domain::password;
use crate::error::{Code, Error};
use crate::storage::Store;
use crate::storage::read::SpaceSummary;

/// The rule of a space id: `[a-z0-9][a-z0-9-]{0,31}`.
pub fn check_space_name(name: &str) -> Result<(), Error> {
    let b = name.as_bytes();
    let ok = (1..=32).contains(&b.len())
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if ok {
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

pub async fn create_space(store: &Store, name: &str, now_ms: u64) -> Result<CreatedSpace, Error> {
    let secret = credential::generate(Kind::Secret);
    let ingest = credential::generate(Kind::Ingest);
    create_space_with(store, name, secret, ingest, now_ms).await
}

/// Creates a space with credentials the caller chose (`serve --ephemeral` with
/// `TRACKER_DEV_SECRET`): they must be credentials the tracker could have made.
pub async fn create_space_with(
    store: &Store,
    name: &str,
    secret: credential::Issued,
    ingest: credential::Issued,
    now_ms: u64,
) -> Result<CreatedSpace, Error> {
    check_space_name(name)?;
    store
        .create_space(name.to_owned(), (&secret).into(), (&ingest).into(), now_ms)
        .await?;
    Ok(CreatedSpace {
        space: name.to_owned(),
        secret: secret.text,
        ingest_token: ingest.text,
    })
}

/// A rotation's new credential, shown once, and when the one it replaced stops working.
#[derive(Serialize, Deserialize, Debug)]
pub struct Rotated {
    pub space: String,
    pub kind: String,
    pub credential: String,
    pub previous_valid_until_ms: Option<u64>,
}

pub async fn rotate(
    store: &Store,
    space: &str,
    kind: Kind,
    grace: Duration,
    now_ms: u64,
) -> Result<Rotated, Error> {
    let new = credential::generate(kind);
    let grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
    let previous_valid_until_ms = store
        .rotate(space.to_owned(), (&new).into(), grace_ms, now_ms)
        .await?;
    Ok(Rotated {
        space: space.to_owned(),
        kind: kind.as_str().to_owned(),
        credential: new.text,
        previous_valid_until_ms,
    })
}

#[derive(Serialize, Deserialize, Debug)]
pub struct Revoked {
    pub space: String,
    pub kind: String,
    pub revoked: usize,
}

pub async fn revoke(store: &Store, space: &str, kind: Kind, now_ms: u64) -> Result<Revoked, Error> {
    let revoked = store.revoke(space.to_owned(), kind, now_ms).await?;
    Ok(Revoked {
        space: space.to_owned(),
        kind: kind.as_str().to_owned(),
        revoked,
    })
}

pub async fn list(store: &Store) -> Result<Vec<SpaceSummary>, Error> {
    // Last-used times this process has seen but not yet written back count too.
    let seen = store.keyring().last_used().into_iter().collect();
    store.list_spaces(seen).await
}

/// A consistent copy of the data file at `dest` (which must not exist).
pub async fn backup(
    store: &Store,
    dest: &std::path::Path,
) -> Result<crate::storage::backup::BackupStats, Error> {
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
    store.backup(dest.to_owned()).await
}

/// Sets the admin page's password: the rule is checked and the argon2id hash made here, and
/// only the hash is stored.
pub async fn set_password(store: &Store, password: String) -> Result<(), Error> {
    let hash = tokio::task::spawn_blocking(move || password::hash(&password))
        .await
        .map_err(|e| Error::new(Code::Internal, format!("hashing the password failed: {e}")))??;
    store.set_admin_password(hash).await
}

/// On a server's start: when no admin password is set, sets a generated one and answers it, to
/// be shown once.
pub async fn ensure_password(store: &Store) -> Result<Option<String>, Error> {
    if store.admin_password().await?.is_some() {
        return Ok(None);
    }
    let generated = password::generate();
    set_password(store, generated.clone()).await?;
    Ok(Some(generated))
}

/// Whether `password` is the admin password (never, while none is set). Costs tens of
/// milliseconds of one core: callers throttle first (`http::admin::throttle`).
pub async fn check_password(store: &Store, password: String) -> Result<bool, Error> {
    let Some(stored) = store.admin_password().await? else {
        return Ok(false);
    };
    tokio::task::spawn_blocking(move || password::verify(&password, &stored))
        .await
        .map_err(|e| Error::new(Code::Internal, format!("checking the password failed: {e}")))
}
