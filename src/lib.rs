//! `tracker`: a self-hosted click and conversion tracker. One process, one redb data file.
//!
//! # Layout
//!
//! - [`http`]: the HTTP surface. Every route (`http/mod.rs`), the handlers, and the one mapping
//!   from errors to responses (`http/respond.rs`). Never touches redb.
//! - [`app`]: the operations every way in shares: authenticate, record an event, back-fill a
//!   click, bind, manage and visit links, read the feed, stats and rejections. [`admin`]: spaces
//!   and credentials. [`admin_socket`]: the command line's way into a running server.
//! - [`domain`]: the rules, free of HTTP and storage: event validation, exact decimals, dedup
//!   keys, credentials and the keyring, clicks and bindings, the rate limit, tracking links,
//!   the feed, stats and the rejection log, and the outcomes storage answers.
//! - [`storage`]: the data file, behind one type, [`storage::Store`], with an async method per
//!   operation. Every table in `storage/schema.rs`, record encodings in `records.rs`, opening and
//!   numbered migrations in `open.rs`; the write operations in `ops.rs`, run by the commit loop
//!   (`commit.rs`, one thread that group-commits); the read operations in `read.rs`, run by the
//!   reader threads (`reader.rs`); the file backend that tells a failed write from a failed
//!   flush in `file.rs`. Never knows about HTTP.
//! - [`config`], [`cli`], [`server`], [`clock`]: settings, the command line, the serve loop, and
//!   an injectable clock. [`metrics`]: the counters of `/metrics` (atomics, counted where things
//!   happen) and their Prometheus text, served on `metrics_listen` by `server`.
//! - [`retention`] and [`backup_schedule`]: what the server does in the background while it
//!   serves, started and stopped by `server`: pruning dedup entries that can never match again,
//!   and automatic backups.
//!
//! A request flows: route → handler → [`app::App`] (authenticate, validate with `domain`) →
//! a [`storage::Store`] method → commit loop → one write transaction per batch → fsync → answer.
//!
//! # Adding an operation
//!
//! - A write: one method on `Txn` in `storage/ops.rs` (it reads and decodes before it inserts,
//!   and returns `StoreError::Refused` for a request the caller must change), and one async
//!   method on `Store` in `storage/mod.rs` that hands it to `write`. Its result type goes in
//!   `domain/outcome.rs`.
//! - A read: one function on a `Snapshot` in `storage/read.rs`, and one async method on `Store`
//!   that hands it to `read`.
//! - A new table: declared once in `storage/schema.rs`, created by a new numbered migration in
//!   `storage/open.rs` (a schema version, with a fixture file from the version before).
//! - Then the ways in call the `Store` method through `app` (requests) or `admin` (spaces and
//!   credentials): an HTTP handler, the admin socket's `execute`, the command line.

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod domain;
pub mod error;
pub mod http;
pub mod metrics;
pub mod server;
pub mod storage;
pub mod web;
