//! The integration tests: each starts the real server (in process, or the `tracker` binary as a
//! child process) on 127.0.0.1:0 with a temporary data file, and talks HTTP to it.

mod admin_browser;
mod admin_page;
mod auth;
mod backup;
mod backup_schedule;
mod check;
mod cli;
mod cli_output;
mod clicks;
mod compact;
mod connections;
mod contrib;
mod credentials;
mod dedup;
mod deliveries;
mod destinations;
mod durability;
mod ephemeral;
mod events;
mod exposure;
mod first_hour;
mod fixtures;
mod full_disk;
mod hostile;
mod layers;
mod links;
mod metrics;
mod numbers;
mod openapi;
mod properties;
mod read;
mod readme;
mod retention;
mod support;
mod telegram;
