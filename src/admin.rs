//! Spaces and credentials: create, list, rotate, revoke.
//!
//! These functions are the only way credentials change. The command line calls them on a store
//! it opened itself when no server runs, and the server calls the same functions when the
//! command line reaches it through the admin socket; both paths commit through the writer.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::domain::credential::{self, Kind};
use crate::error::{Code, Error};
use crate::storage::read::{self, SpaceSummary};
use crate::storage::writer::AdminOp;
use crate::storage::{AdminOutcome, Request, Store};

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

pub fn create_space(store: &Store, name: &str, now_ms: u64) -> Result<CreatedSpace, Error> {
    check_space_name(name)?;
    let secret = credential::generate(Kind::Secret);
    let ingest = credential::generate(Kind::Ingest);
    let op = AdminOp::CreateSpace {
        name: name.to_owned(),
        secret: (&secret).into(),
        ingest: (&ingest).into(),
        now_ms,
    };
    store.write_blocking(|reply| Request::Admin { op, reply })?;
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

pub fn rotate(
    store: &Store,
    space: &str,
    kind: Kind,
    grace: Duration,
    now_ms: u64,
) -> Result<Rotated, Error> {
    let new = credential::generate(kind);
    let op = AdminOp::Rotate {
        space: space.to_owned(),
        new: (&new).into(),
        grace_ms: grace.as_millis() as u64,
        now_ms,
    };
    let outcome = store.write_blocking(|reply| Request::Admin { op, reply })?;
    let AdminOutcome::Rotated {
        previous_valid_until_ms,
    } = outcome
    else {
        return Err(Error::internal());
    };
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

pub fn revoke(store: &Store, space: &str, kind: Kind, now_ms: u64) -> Result<Revoked, Error> {
    let op = AdminOp::Revoke {
        space: space.to_owned(),
        kind,
        now_ms,
    };
    let outcome = store.write_blocking(|reply| Request::Admin { op, reply })?;
    let AdminOutcome::Revoked { count } = outcome else {
        return Err(Error::internal());
    };
    Ok(Revoked {
        space: space.to_owned(),
        kind: kind.as_str().to_owned(),
        revoked: count,
    })
}

pub fn list(store: &Store) -> Result<Vec<SpaceSummary>, Error> {
    // Last-used times this process has seen but not yet written back count too.
    let seen: std::collections::HashMap<_, _> = store.keyring().last_used().into_iter().collect();
    Ok(store.read(|txn| read::list_spaces(txn, &seen))?)
}

/// A consistent copy of the data file at `dest` (which must not exist).
pub fn backup(
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
    store
        .read(|txn| crate::storage::backup::backup(txn, dest))
        .map_err(|e| Error::new(Code::Unavailable, format!("backup failed: {e}")))
}
