//! The engine that runs the operations of the rooms beside it: the data file and its backend
//! (`file.rs`, with the test switch that makes the disk fail, `fault.rs`), opening it and the
//! numbered migrations (`open.rs`), the commit loop that group-commits every write
//! (`commit.rs`), the reader threads (`reader.rs`), and the file's copies (`backup.rs`,
//! `compact.rs`).
//!
//! It stands above the tables it serves: opening a file rebuilds derived tables, and a commit
//! refreshes the directories in memory, both with the rooms' own code.

pub(super) mod backup;
pub(super) mod commit;
pub(super) mod compact;
pub mod fault;
pub(super) mod file;
pub(super) mod open;
pub(super) mod reader;
