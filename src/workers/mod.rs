//! The server's background workers under one roof: the senders of conversions out
//! (`delivery.rs`, which starts `delivery/`), the Telegram bots of channel links (`telegram/`),
//! the fetch of spend from Meta (`spend/`), the ECB's daily rates (`ecb.rs`), the backup
//! schedule (`backups.rs`), retention (`retention.rs`), the health checks of links' targets
//! (`health.rs`) and the alerts (`alerts.rs`).
//!
//! Each is started and stopped the same way: a value that is a [`Worker`] (what it is handed
//! by the layer above, a narrow handle rather than the application, so that the workers sit
//! below it) is given to [`Workers::start`], which runs it on a task of its own; at shutdown
//! [`Workers::stop`] tells every worker to stop and waits until each has. A new kind of
//! background work is one more [`Worker`] and one more `start` where the server starts them.

pub mod alerts;
pub mod backups;
pub mod delivery;
pub mod ecb;
pub mod health;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::sync::oneshot;

    /// Works until it is stopped; says so when its work is dropped.
    struct UntilStopped(Option<oneshot::Sender<()>>);

    impl Drop for UntilStopped {
        fn drop(&mut self) {
            if let Some(said) = self.0.take() {
                let _ = said.send(());
            }
        }
    }

    impl Worker for UntilStopped {
        const NAME: &'static str = "until_stopped";

        async fn run(self) {
            let _held = self;
            std::future::pending::<()>().await;
        }
    }

    fn worker() -> (UntilStopped, oneshot::Receiver<()>) {
        let (said, stopped) = oneshot::channel();
        (UntilStopped(Some(said)), stopped)
    }

    #[tokio::test]
    async fn stop_ends_every_worker_and_returns_once_each_has_ended() {
        let mut workers = Workers::default();
        let (first, mut first_stopped) = worker();
        let (second, mut second_stopped) = worker();
        workers.start(first);
        workers.start(second);
        tokio::task::yield_now().await;
        assert!(first_stopped.try_recv().is_err());
        workers.stop().await;
        assert_eq!(first_stopped.try_recv(), Ok(()));
        assert_eq!(second_stopped.try_recv(), Ok(()));
    }

    #[tokio::test]
    async fn a_roof_dropped_without_stop_stops_its_workers_all_the_same() {
        let mut workers = Workers::default();
        let (only, stopped) = worker();
        workers.start(only);
        drop(workers);
        let ended = tokio::time::timeout(Duration::from_secs(5), stopped).await;
        assert!(matches!(ended, Ok(Ok(()))), "{ended:?}");
    }
}
