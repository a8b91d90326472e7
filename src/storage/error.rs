//! What can go wrong below the domain (the disk, the file, the writer), and how each reaches a
//! client: the one conversion from a storage failure to the domain's [`Error`].

use std::fmt;
use std::path::PathBuf;

use crate::error::Error;

/// What can go wrong below the domain: the disk, the file, or the writer.
#[derive(Debug)]
pub enum StoreError {
    /// redb reported an error: I/O, a full disk, a failed commit.
    Redb(redb::Error),
    /// The data file cannot be opened or created where it should be.
    File {
        path: PathBuf,
        error: std::io::Error,
    },
    /// No data file where one must be: every command but `serve` opens an existing one.
    NoDataFile(PathBuf),
    /// The data file cannot be created because its directory does not exist.
    NoDirectory(PathBuf),
    /// A stored record does not decode.
    Corrupt(String),
    /// The request is refused as it stands (a name taken or unknown); nothing was changed.
    Refused(Error),
    /// Another process has the data file open.
    InUse(String),
    /// The file was written by a newer release.
    NewerSchema { found: u64, known: u64 },
    /// The writer has stopped (the server is shutting down).
    Closed,
    /// The writer's or the readers' queue is full.
    Busy,
    /// The store stopped for good: a flush failed, or the writer died.
    Failed(String),
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Redb(e) => write!(f, "storage error: {e}"),
            StoreError::File { path, error } => {
                write!(f, "cannot open the data file {}: {error}", path.display())
            }
            StoreError::NoDataFile(path) => write!(
                f,
                "there is no data file at {}: `tracker serve` creates a new one there (or \
                 `tracker init`, which does not serve); if yours is elsewhere, name it with \
                 --data or with `data` in the config file",
                path.display()
            ),
            StoreError::NoDirectory(path) => {
                let dir = path.parent().unwrap_or(path).display();
                write!(
                    f,
                    "cannot create the data file {}: the directory {dir} does not exist; create \
                     it with `mkdir -p {dir}`, or name another place with --data or with `data` \
                     in the config file",
                    path.display()
                )
            }
            StoreError::Corrupt(what) => write!(f, "data file is damaged: {what}"),
            StoreError::Refused(e) => write!(f, "{}", e.message),
            StoreError::InUse(path) => write!(
                f,
                "the data file {path} is open in another process (is a tracker serving it?)"
            ),
            StoreError::NewerSchema { found, known } => write!(
                f,
                "the data file has schema version {found}, newer than the {known} this tracker \
                 knows; run a newer tracker (the file was left untouched)"
            ),
            StoreError::Closed => write!(f, "the tracker is shutting down"),
            StoreError::Busy => write!(f, "the write queue is full"),
            StoreError::Failed(reason) => write!(f, "the data file failed: {reason}"),
        }
    }
}

impl std::error::Error for StoreError {}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self {
                StoreError::Redb(e.into())
            }
        }
    )*};
}
from_redb!(
    redb::Error,
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

impl From<StoreError> for Error {
    /// Storage failures reach a client as `unavailable`, or `internal` for damage; the detail is
    /// logged here, once, and never sent. A refusal is the caller's answer as it is.
    fn from(e: StoreError) -> Error {
        match e {
            StoreError::Refused(e) => e,
            StoreError::Corrupt(_) => {
                tracing::error!(error = %e, "storage");
                Error::internal()
            }
            StoreError::Busy | StoreError::Closed => {
                tracing::warn!(error = %e, "storage");
                Error::unavailable()
            }
            _ => {
                tracing::error!(error = %e, "storage");
                Error::unavailable()
            }
        }
    }
}
