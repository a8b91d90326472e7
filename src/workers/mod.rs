//! The server's background workers under one roof: the senders of conversions out
//! (`delivery.rs`, which starts `delivery/`), the Telegram bots of channel links (`telegram/`),
//! the fetch of spend from Meta (`spend/`), the backup schedule (`backups.rs`) and retention
//! (`retention.rs`).
//!
//! Each is started and stopped the same way: a value that is a [`Worker`] (what it is handed
//! by the layer above, a narrow handle rather than the application, so that the workers sit
//! below it) is given to [`Workers::start`], which runs it on a task of its own; at shutdown
//! [`Workers::stop`] tells every worker to stop and waits until each has. A new kind of
//! background work is one more [`Worker`] and one more `start` where the server starts them.

pub mod backups;
pub mod delivery;
pub mod retention;
pub mod spend;
pub mod telegram;

use std::future::Future;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A piece of background work, as the server starts and stops it.
pub trait Worker: Send + 'static {
    /// The worker's name in the log.
    const NAME: &'static str;

    /// Works until the server stops. A worker is stopped by dropping this future at an await
    /// point (as aborting its task would), so what it leaves there half-done must be what the
    /// next start recovers from: a delivery not yet recorded is sent again, a backup copy
    /// under a temporary name is deleted.
    fn run(self) -> impl Future<Output = ()> + Send;
}

/// The workers that run, and the signal that stops them.
pub struct Workers {
    /// Dropped to stop every worker; never sent on. Dropping the roof without [`Workers::stop`]
    /// stops them all the same, without waiting.
    stop: watch::Sender<()>,
    running: Vec<(&'static str, JoinHandle<()>)>,
}

impl Default for Workers {
    fn default() -> Workers {
        Workers {
            stop: watch::channel(()).0,
            running: Vec::new(),
        }
    }
}

impl Workers {
    /// Runs `worker` on a task of its own until [`Workers::stop`].
    pub fn start<W: Worker>(&mut self, worker: W) {
        let mut stop = self.stop.subscribe();
        let task = tokio::spawn(async move {
            tokio::select! {
                // The stop first: a worker started after the stop never begins its work.
                biased;
                _ = stop.changed() => {}
                () = worker.run() => {}
            }
        });
        tracing::debug!(worker = W::NAME, "started");
        self.running.push((W::NAME, task));
    }

    /// Stops every worker and waits until each has stopped.
    pub async fn stop(self) {
        let Workers { stop, running } = self;
        drop(stop);
        for (name, task) in running {
            let _ = task.await;
            tracing::debug!(worker = name, "stopped");
        }
    }
}
