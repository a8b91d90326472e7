//! The senders of conversions out (`delivery/`) as a [`Worker`]: they run on a thread of their
//! own ([`crate::delivery::run_beside`]), stopped with the task that started it.

use std::future::Future;

use crate::delivery::Senders;
use crate::workers::Worker;

impl Worker for Senders {
    const NAME: &'static str = "delivery";

    fn run(self) -> impl Future<Output = ()> + Send {
        crate::delivery::run_beside(self)
    }
}
