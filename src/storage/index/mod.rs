//! The writer's indexes of digests: dedup entries (`dedup_buffer.rs`) and `fbclid`s
//! (`fbclid_buffer.rs`) on their way to their tables, each slice of the key space at its
//! commit, the merging of the dedup table's runs (`dedup_runs.rs`), and the Bloom filters in
//! front of both tables (`key_filter.rs`).

pub(super) mod dedup_buffer;
pub(super) mod dedup_runs;
pub(super) mod fbclid_buffer;
pub(super) mod key_filter;
