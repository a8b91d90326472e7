//! The writer's indexes of digests: dedup entries (`dedup_buffer.rs`) and `fbclid`s
//! (`fbclid_buffer.rs`) on their way to their tables, each slice of the key space at its
//! commit, and the Bloom filters in front of both tables (`key_filter.rs`).

pub(super) mod dedup_buffer;
pub(super) mod fbclid_buffer;
pub(super) mod key_filter;
