//! The reader path: a few OS threads that run every read of the data file, fed by one bounded
//! queue. Each thread takes everything waiting (up to [`MAX_BATCH`]) and runs it against one
//! read snapshot.
//!
//! Why not `spawn_blocking` per read: measured (BENCHMARKS.md), a `dry_run` on the blocking pool
//! spent most of the server's CPU waking pool threads and switching to them, and at 256
//! connections the pool grew to hundreds of threads, each with its own stack and allocator arena
//! (93 MiB RSS). Why not inline on the async worker: a read that waits for the disk would stall
//! every connection that worker serves. Here a busy reader thread takes the next reads without a
//! wake-up, a batch shares one `begin_read` and one opening of each table, and the number of
//! threads is fixed.
//!
//! Freshness: a snapshot is begun after its batch is taken from the queue, so a read sees every
//! commit that was answered before the read was sent.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::oneshot;

use crate::error::Error;
use crate::storage::read::Snapshot;
use crate::storage::{DbSlot, StoreError};

/// The most reads one snapshot serves; bounds how stale the last one's snapshot is.
const MAX_BATCH: usize = 256;

/// A read with where its answer goes: run against the batch's snapshot, or told why there is
/// none.
type ReadJob = Box<dyn FnOnce(Result<&Snapshot, &StoreError>) + Send>;

/// The queue into the reader threads. The threads end when it is dropped.
pub(super) struct Readers {
    queue: SyncSender<ReadJob>,
}

impl Readers {
    /// Starts `threads` reader threads on the database in `slot`, with room for `capacity`
    /// waiting reads.
    pub(super) fn start(
        slot: &Arc<DbSlot>,
        threads: usize,
        capacity: usize,
    ) -> std::io::Result<Readers> {
        let (queue, jobs) = std::sync::mpsc::sync_channel::<ReadJob>(capacity);
        let jobs = Arc::new(Mutex::new(jobs));
        for n in 0..threads.max(1) {
            let (jobs, slot) = (jobs.clone(), slot.clone());
            std::thread::Builder::new()
                .name(format!("tracker-reader-{n}"))
                .spawn(move || run(&jobs, &slot))?;
        }
        Ok(Readers { queue })
    }

    /// Queues `read`; its answer arrives on the returned receiver.
    pub(super) fn submit<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Snapshot) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<oneshot::Receiver<Result<T, Error>>, Error> {
        let (reply, answer) = oneshot::channel();
        let job: ReadJob = Box::new(move |snapshot| {
            let result = match snapshot {
                Ok(snapshot) => read(snapshot).map_err(Error::from),
                Err(StoreError::Closed) => Err(StoreError::Closed.into()),
                Err(e) => {
                    tracing::error!(error = %e, "opening a read snapshot");
                    Err(Error::unavailable())
                }
            };
            let _ = reply.send(result);
        });
        match self.queue.try_send(job) {
            Ok(()) => Ok(answer),
            Err(TrySendError::Full(_)) => Err(StoreError::Busy.into()),
            Err(TrySendError::Disconnected(_)) => Err(StoreError::Closed.into()),
        }
    }
}

fn run(jobs: &Mutex<Receiver<ReadJob>>, slot: &DbSlot) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        {
            // One thread waits on the queue at a time; the others wait for the lock. The thread
            // that holds it takes what is there and lets go before it reads.
            let jobs = jobs.lock().unwrap_or_else(PoisonError::into_inner);
            let Ok(first) = jobs.recv() else { return };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match jobs.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
        }
        let db = slot.read().unwrap_or_else(PoisonError::into_inner).clone();
        let snapshot = db
            .ok_or(StoreError::Closed)
            .and_then(|db| Snapshot::begin(&db));
        for job in batch.drain(..) {
            job(snapshot.as_ref());
        }
    }
}
