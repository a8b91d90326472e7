//! The reader path: a few OS threads that run every read of the data file, fed by one bounded
//! queue. Each thread takes everything waiting (up to [`MAX_BATCH`]) and runs it against one
//! read snapshot, and keeps that snapshot for the next batch while no commit came between.
//!
//! Why not `spawn_blocking` per read: waking a pool thread and switching to it for every read
//! takes much of the server's CPU under load, and under many connections the pool grows to
//! hundreds of threads, each with its own stack and allocator arena (BENCHMARKS.md, "Targets").
//! Why not inline on the async worker: a read that waits for the disk would stall every
//! connection that worker serves. Here a busy reader thread takes the next reads without a
//! wake-up, a batch shares one `begin_read` and one opening of each table (and a run of batches
//! with no commit between them shares one snapshot), and the number of threads is fixed.
//!
//! The threads wait on the queue itself (a multi-consumer channel), so a read wakes at most one
//! sleeping thread; with a mutex around a single-consumer receiver, the thread that took a batch
//! would also wake the next one to wait for the lock.
//!
//! Freshness: a batch uses a snapshot begun at or after the commit count it reads once the batch
//! is taken from the queue. The writer counts each commit twice, once before redb makes it
//! visible and once after, and both before it answers the batch or changes the dedup buffer: so
//! a read sees every commit answered before the read was sent, and every entry that left the
//! buffer before the read looked there. A snapshot begun while the count is odd may or may not
//! hold the commit under way, so it serves its batch and is not kept: kept, it would go on
//! answering without a commit that another thread's newer snapshot had already shown, and a
//! follower resuming from an event it was shown would be told the event does not exist.
//!
//! An idle thread drops its snapshot before it sleeps: an open snapshot keeps the pages that
//! later commits free from being used again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use redb::Database;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::oneshot;

use crate::error::Error;
use crate::storage::error::StoreError;
use crate::storage::read::Snapshot;

/// The database handle that readers share with the writer. The writer replaces it when it
/// reopens the file after an I/O failure, and empties it when it stops.
pub(in crate::storage) type DbSlot = RwLock<Option<Arc<Database>>>;

/// The most reads one batch takes from the queue before it looks at the commit count again.
const MAX_BATCH: usize = 256;

/// A read with where its answer goes: run against the batch's snapshot, or told why there is
/// none.
type ReadJob = Box<dyn FnOnce(Result<&Snapshot, &StoreError>) + Send>;

/// The queue into the reader threads. The threads end when it is dropped.
pub(in crate::storage) struct Readers {
    queue: Sender<ReadJob>,
}

impl Readers {
    /// Starts `threads` reader threads on the database in `slot`, with room for `capacity`
    /// waiting reads. `commits` is the writer's count of commits.
    pub(in crate::storage) fn start(
        slot: &Arc<DbSlot>,
        commits: &Arc<AtomicU64>,
        threads: usize,
        capacity: usize,
    ) -> std::io::Result<Readers> {
        let (queue, jobs) = crossbeam_channel::bounded::<ReadJob>(capacity);
        for n in 0..threads.max(1) {
            let (jobs, slot, commits) = (jobs.clone(), slot.clone(), commits.clone());
            std::thread::Builder::new()
                .name(format!("tracker-reader-{n}"))
                .spawn(move || run(&jobs, &slot, &commits))?;
        }
        Ok(Readers { queue })
    }

    /// Queues `read`; its answer arrives on the returned receiver.
    pub(in crate::storage) fn submit<T: Send + 'static>(
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

fn run(jobs: &Receiver<ReadJob>, slot: &DbSlot, commits: &AtomicU64) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // The snapshot of the last batch and the commit count it was begun at.
    let mut kept: Option<(u64, Snapshot)> = None;
    loop {
        let first = if let Ok(job) = jobs.try_recv() {
            job
        } else {
            kept = None;
            let Ok(job) = jobs.recv() else { return };
            job
        };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let count = commits.load(Ordering::Acquire);
        let db = slot.read().unwrap_or_else(PoisonError::into_inner).clone();
        let current = count.is_multiple_of(2)
            && matches!((&kept, &db), (Some((at, s)), Some(db)) if *at == count && s.is_of(db));
        if !current {
            kept = None;
            let begun = db
                .ok_or(StoreError::Closed)
                .and_then(|db| Snapshot::begin(&db));
            match begun {
                Ok(snapshot) => kept = Some((count, snapshot)),
                Err(e) => {
                    for job in batch.drain(..) {
                        job(Err(&e));
                    }
                    continue;
                }
            }
        }
        if let Some((_, snapshot)) = &kept {
            for job in batch.drain(..) {
                job(Ok(snapshot));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;
    use crate::storage::engine::open::open_in_memory;
    use crate::storage::schema::META;

    const KEY: &str = "reader-test";

    /// One reader thread on an in-memory file, with the writer's commit count.
    fn one_reader() -> (Arc<redb::Database>, Arc<AtomicU64>, Readers) {
        let db = Arc::new(open_in_memory().unwrap().db);
        let slot = Arc::new(RwLock::new(Some(db.clone())));
        let commits = Arc::new(AtomicU64::new(0));
        let readers = Readers::start(&slot, &commits, 1, 16).unwrap();
        (db, commits, readers)
    }

    /// Queues a read that holds the only thread, with its snapshot begun, until the returned
    /// sender is sent to; its answer is the receiver.
    fn hold_the_thread(
        readers: &Readers,
    ) -> (mpsc::Sender<()>, oneshot::Receiver<Result<(), Error>>) {
        let (release, wait) = mpsc::channel::<()>();
        let (started, running) = mpsc::channel::<()>();
        let first = readers
            .submit(move |_| {
                started.send(()).unwrap();
                wait.recv().unwrap();
                Ok(())
            })
            .unwrap();
        running.recv().unwrap();
        (release, first)
    }

    /// Commits `value` under [`KEY`], as the writer would without counting it.
    fn write(db: &redb::Database, value: u64) {
        let txn = db.begin_write().unwrap();
        txn.open_table(META).unwrap().insert(KEY, value).unwrap();
        txn.commit().unwrap();
    }

    /// Queues a read of [`KEY`] now; its answer comes when awaited.
    fn read_key(readers: &Readers) -> impl Future<Output = Option<u64>> + use<> {
        let answer = readers
            .submit(|s| Ok(s.txn().open_table(META)?.get(KEY)?.map(|v| v.value())))
            .unwrap();
        async { answer.await.unwrap().unwrap() }
    }

    /// A reader thread that stays busy keeps its snapshot for the next batch, but not past a
    /// commit: a read queued after a commit sees it.
    #[tokio::test]
    async fn a_kept_snapshot_is_not_used_past_a_commit() {
        let (db, commits, readers) = one_reader();
        let (release, first) = hold_the_thread(&readers);
        // Meanwhile a commit, counted as the writer counts it, then a read of what it wrote.
        commits.fetch_add(1, Ordering::Release);
        write(&db, 7);
        commits.fetch_add(1, Ordering::Release);
        let second = read_key(&readers);
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(second.await, Some(7));
    }

    /// A snapshot begun while a commit is under way (odd count) is not kept: a read after the
    /// commit became visible sees it, even before the writer counted its end. Kept, another
    /// thread's newer snapshot could show an event that this one then says does not exist.
    #[tokio::test]
    async fn a_snapshot_begun_during_a_commit_is_not_kept() {
        let (db, commits, readers) = one_reader();
        // The writer has begun a commit; a read takes its snapshot and holds the only thread.
        commits.fetch_add(1, Ordering::Release);
        let (release, first) = hold_the_thread(&readers);
        // The commit becomes visible; the writer has not yet counted its end.
        write(&db, 9);
        let second = read_key(&readers);
        release.send(()).unwrap();
        first.await.unwrap().unwrap();
        assert_eq!(second.await, Some(9));
    }
}
