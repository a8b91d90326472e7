//! `tracker`: a self-hosted click and conversion tracker. One process, one redb data file.
//!
//! # Layout
//!
//! - [`http`]: the HTTP surface. Every route (`http/mod.rs`), the handlers, and the one mapping
//!   from errors to responses (`http/respond.rs`). Never touches redb.
//! - [`app`]: the operations every way in shares: authenticate, record an event, back-fill a
//!   click, bind. [`admin`]: spaces and credentials.
//! - [`domain`]: the rules, free of HTTP and storage: event validation, exact decimals, dedup
//!   keys, credentials and the keyring, clicks and bindings, the rate limit.
//! - [`storage`]: the data file. Every table in `storage/schema.rs`, record encodings in
//!   `records.rs`, opening and numbered migrations in `open.rs`, and the single writer thread
//!   that group-commits in `writer.rs`. Never knows about HTTP.
//! - [`config`], [`cli`], [`server`], [`clock`]: settings, the command line, the serve loop, and
//!   an injectable clock.
//!
//! A request flows: route → handler → [`app::App`] (authenticate, validate with `domain`) →
//! writer queue → one write transaction per batch → fsync → answer.

pub mod admin;
pub mod admin_socket;
pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod server;
pub mod storage;
