//! Conversions out in the data file: destinations and the outbox of their deliveries. A
//! destination's rows (`destination_rows.rs`), the writer's side (`outbox.rs`, methods of
//! `Txn`), and the readers' side (`outbox_read.rs`).

pub(super) mod destination_rows;
pub(super) mod outbox;
pub(super) mod outbox_read;
