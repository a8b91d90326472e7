//! The rules of the tracker, free of HTTP and of storage: what a valid event, click, binding and
//! credential are, and which events duplicate each other.

pub mod base62;
pub mod batch;
pub mod channel;
pub mod click;
pub mod client;
pub mod codes;
pub mod cost;
pub mod credential;
pub mod currency;
pub mod decimal;
pub mod dedup;
pub mod digest;
pub mod display;
pub mod event;
pub mod export;
pub mod feed;
pub mod import;
pub mod init_data;
pub mod input;
pub mod keyring;
pub mod link;
pub mod outcome;
pub mod password;
pub mod percent;
pub mod rate;
pub mod rejection;
pub mod reporting;
pub mod secret;
pub mod setting_values;
pub mod settings;
pub mod spreadsheet;
pub mod stats;
pub mod uid;
pub mod user;
pub mod warnings;
