//! The HTTP API's handlers, one file per resource: each turns a request into an [`App`](crate::app::App)
//! call and the result into JSON. The router (`crate::router`) has checked the credential
//! before a handler runs; every answer of a space's endpoint leaves through
//! [`access::finish`], which writes the access-log line and the rejection log.

pub mod access;
pub mod batch;
pub mod conversions;
pub mod costs;
pub mod destinations;
pub mod document;
pub mod health;
pub mod ingest;
pub mod landing;
pub mod links;
pub mod miniapp;
pub mod read;
pub mod space;
pub mod telegram;
pub mod variants;
