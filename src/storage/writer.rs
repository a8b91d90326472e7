//! The writer: one OS thread that owns every redb write transaction, and group-commits.
//!
//! Handlers validate, then send a [`Request`] and await its reply. The writer takes everything
//! waiting in its queue, applies it in one write transaction (dedup and compare-and-set decisions
//! happen here, against the transaction's own view, so 100 identical concurrent requests yield
//! one `queued`), commits with fsync, and only then answers every request of the batch. If the
//! commit fails, the whole batch is answered `unavailable` and nothing of it is stored; the
//! writer then reopens the file before it takes the next batch.
//!
//! Why a thread and a `std` channel, not a task: redb calls block on disk I/O, and a blocked
//! async worker would stall every connection it serves.

use std::path::PathBuf;
use std::sync::mpsc::Receiver;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use redb::{Database, ReadableDatabase, ReadableTable, Table, WriteTransaction};
use sha2::{Digest, Sha256};
use tokio::sync::oneshot;

use crate::domain::click::NewClick;
use crate::domain::credential::{self, CredentialDigest, Kind};
use crate::domain::dedup::{self, DedupKey};
use crate::domain::event::ValidEvent;
use crate::domain::keyring::Keyring;
use crate::error::Error;
use crate::storage::dedup_buffer::{self, DedupBuffer};
use crate::storage::fault::FaultSwitch;
use crate::storage::records::{self, ClickRecord, CredentialRecord, SpaceRecord};
use crate::storage::schema::{
    CLICKS, CLICKS_BY_FBCLID, CLICKS_BY_TG, CREDENTIALS, DEDUP, INBOX, META, META_DEDUP_REDO_FROM,
    META_INBOX_SEQ, META_SPACE_SEQ, SPACES,
};
use crate::storage::{DbSlot, StoreError, admin_error, open, read};

/// Where a request's answer goes, once its batch has committed.
pub type Reply<T> = oneshot::Sender<Result<T, Error>>;

/// The most requests one transaction takes; bounds the latency a batch adds.
const MAX_BATCH: usize = 4096;
/// How often last-used times of credentials are written back.
const LAST_USED_FLUSH: Duration = Duration::from_secs(60);

/// A write, with where to send its answer.
pub enum Request {
    Event {
        space: u32,
        event: ValidEvent,
        key: Option<DedupKey>,
        reply: Reply<EventOutcome>,
    },
    Click {
        space: u32,
        click: NewClick,
        reply: Reply<ClickOutcome>,
    },
    Bind {
        space: u32,
        uid: String,
        tg_id: u64,
        now_ms: u64,
        reply: Reply<BindOutcome>,
    },
    Admin {
        op: AdminOp,
        reply: Reply<AdminOutcome>,
    },
    /// Commit what came before, close the file, and end the thread.
    Stop,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventOutcome {
    pub duplicate: bool,
    pub inbox_id: u64,
    pub matched: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClickOutcome {
    pub uid: String,
    /// `false` when an existing click with the same `fbclid` was answered.
    pub created: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindOutcome {
    /// No click with that uid in the space; nothing stored.
    Unmatched,
    /// The click is bound to `tg_id`; `conflict` if that was another id than the one asked for.
    Bound { tg_id: u64, conflict: bool },
}

/// A credential about to be stored: never its text, only its digest and public prefix.
#[derive(Clone, Debug)]
pub struct NewCredential {
    pub kind: Kind,
    pub digest: CredentialDigest,
    pub public_prefix: String,
}

impl From<&credential::Issued> for NewCredential {
    fn from(c: &credential::Issued) -> Self {
        NewCredential {
            kind: c.kind,
            digest: c.digest,
            public_prefix: c.public_prefix().to_owned(),
        }
    }
}

/// Changes to spaces and credentials.
#[derive(Debug)]
pub enum AdminOp {
    CreateSpace {
        name: String,
        secret: NewCredential,
        ingest: NewCredential,
        now_ms: u64,
    },
    Rotate {
        space: String,
        new: NewCredential,
        grace_ms: u64,
        now_ms: u64,
    },
    Revoke {
        space: String,
        kind: Kind,
        now_ms: u64,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AdminOutcome {
    Created {
        space_no: u32,
    },
    /// When the replaced credential(s) stop working; `None` if none was active.
    Rotated {
        previous_valid_until_ms: Option<u64>,
    },
    Revoked {
        count: usize,
    },
}

pub(super) struct Writer {
    path: PathBuf,
    fault: Option<FaultSwitch>,
    slot: Arc<DbSlot>,
    db: Option<Arc<Database>>,
    keyring: Arc<Keyring>,
    /// Dedup entries not yet in the table; readers share it (`Store::judge_event`).
    pending: Arc<RwLock<DedupBuffer>>,
    last_flush: Instant,
}

/// The tables of one write transaction, opened once per batch.
struct Tables<'t> {
    meta: Table<'t, &'static str, u64>,
    spaces: Table<'t, &'static str, &'static [u8]>,
    credentials: Table<'t, &'static [u8; 32], &'static [u8]>,
    inbox: Table<'t, (u32, u64), &'static [u8]>,
    dedup: Table<'t, (u32, u8, u128), (u64, u64)>,
    clicks: Table<'t, (u32, &'static str), &'static [u8]>,
    by_fbclid: Table<'t, (u32, u128), &'static str>,
    by_tg: Table<'t, (u32, u64, &'static str), ()>,
    inbox_seq: u64,
    credentials_changed: bool,
}

/// A request applied inside the transaction, waiting for the commit to be answered.
enum Applied {
    Event(Reply<EventOutcome>, Result<EventOutcome, Error>),
    Click(Reply<ClickOutcome>, Result<ClickOutcome, Error>),
    Bind(Reply<BindOutcome>, Result<BindOutcome, Error>),
    Admin(Reply<AdminOutcome>, Result<AdminOutcome, Error>),
}

impl Applied {
    /// Answers the request: its own result if the batch committed, `unavailable` if not.
    fn answer(self, committed: bool) {
        fn send<T>(reply: Reply<T>, result: Result<T, Error>, committed: bool) {
            // A caller that gave up (closed connection) is not an error.
            let _ = reply.send(if committed {
                result
            } else {
                Err(Error::unavailable())
            });
        }
        match self {
            Applied::Event(r, v) => send(r, v, committed),
            Applied::Click(r, v) => send(r, v, committed),
            Applied::Bind(r, v) => send(r, v, committed),
            Applied::Admin(r, v) => send(r, v, committed),
        }
    }
}

impl Writer {
    pub(super) fn new(
        path: PathBuf,
        fault: Option<FaultSwitch>,
        slot: Arc<DbSlot>,
        keyring: Arc<Keyring>,
        pending: Arc<RwLock<DedupBuffer>>,
    ) -> Writer {
        let db = slot.read().expect("db slot lock poisoned").clone();
        Writer {
            path,
            fault,
            slot,
            db,
            keyring,
            pending,
            last_flush: Instant::now(),
        }
    }

    pub(super) fn run(mut self, requests: &Receiver<Request>) {
        let mut batch = Vec::with_capacity(256);
        let mut stopping = false;
        while !stopping {
            let Ok(first) = requests.recv() else { break };
            batch.push(first);
            while batch.len() < MAX_BATCH {
                match requests.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            if let Some(at) = batch.iter().position(|r| matches!(r, Request::Stop)) {
                // Anything after `Stop` was sent after `close()`: it is dropped, and its
                // caller sees the writer gone.
                batch.truncate(at);
                stopping = true;
            }
            let flush = stopping || self.last_flush.elapsed() >= LAST_USED_FLUSH;
            if !batch.is_empty() || flush {
                // At a stop, every buffered dedup entry goes to the table: a cleanly closed file
                // needs no redo.
                self.commit_batch(&mut batch, flush, stopping);
            }
        }
        self.close();
    }

    fn commit_batch(&mut self, batch: &mut Vec<Request>, flush_last_used: bool, drain: bool) {
        let Some(db) = self.database() else {
            for request in batch.drain(..) {
                reject(request);
            }
            return;
        };
        let result = (|| -> Result<(Vec<Applied>, bool, dedup_buffer::Change), StoreError> {
            let pending = self.pending.read().expect("dedup buffer lock poisoned");
            let txn = db.begin_write()?;
            let mut applied = Vec::with_capacity(batch.len());
            let changed;
            let mut change = dedup_buffer::Change::default();
            {
                let mut t = Tables::open(&txn)?;
                for request in batch.drain(..) {
                    applied.push(t.apply(request, &pending, &mut change)?);
                }
                if flush_last_used {
                    t.flush_last_used(&self.keyring.last_used())?;
                }
                let redo_from =
                    pending.flush_slice(&mut change, &mut t.dedup, drain, t.inbox_seq + 1)?;
                t.meta.insert(META_DEDUP_REDO_FROM, redo_from)?;
                t.meta.insert(META_INBOX_SEQ, t.inbox_seq)?;
                changed = t.credentials_changed;
            }
            commit(txn)?;
            Ok((applied, changed, change))
        })();
        match result {
            Ok((applied, credentials_changed, change)) => {
                // Before answering: a reader that sees the answer sees the entries.
                self.pending
                    .write()
                    .expect("dedup buffer lock poisoned")
                    .apply(change);
                if flush_last_used {
                    self.last_flush = Instant::now();
                }
                if credentials_changed {
                    // Before answering: a rotation is in force when its command returns.
                    if let Err(e) = self.reload_keyring(&db) {
                        tracing::error!(error = %e, "reloading credentials after a commit");
                    }
                }
                for a in applied {
                    a.answer(true);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "commit failed; the batch was answered 503");
                // `batch` may still hold requests not yet applied when the error came.
                for request in batch.drain(..) {
                    reject(request);
                }
                self.mark_broken();
            }
        }
    }

    fn reload_keyring(&self, db: &Database) -> Result<(), StoreError> {
        self.keyring
            .replace(read::keyring_entries(&db.begin_read()?)?);
        Ok(())
    }

    /// The database, reopened first if an earlier commit failed.
    fn database(&mut self) -> Option<Arc<Database>> {
        if self.db.is_none() {
            match open::open_database(&self.path, self.fault.as_ref()) {
                Ok((db, _)) => {
                    tracing::info!("data file reopened after a storage failure");
                    // The open derived again every entry the buffer held (each is at or after
                    // the last committed `dedup_redo_from`), and those of a failed commit that
                    // reached the file after all, which may be newer than the buffer's: the
                    // table is now the truth, and the buffer must not write over it.
                    *self.pending.write().expect("dedup buffer lock poisoned") =
                        DedupBuffer::default();
                    let db = Arc::new(db);
                    *self.slot.write().expect("db slot lock poisoned") = Some(db.clone());
                    self.db = Some(db);
                }
                Err(e) => tracing::error!(error = %e, "data file cannot be reopened yet"),
            }
        }
        self.db.clone()
    }

    /// After a failed commit redb refuses further work on that handle: let go of it, so the next
    /// batch reopens the file (and repairs it if needed).
    fn mark_broken(&mut self) {
        *self.slot.write().expect("db slot lock poisoned") = None;
        self.db = None;
    }

    fn close(mut self) {
        *self.slot.write().expect("db slot lock poisoned") = None;
        if let Some(db) = self.db.take() {
            // Readers hold their own Arc for the length of one read; the file closes when the
            // last one is done.
            if let Ok(db) = Arc::try_unwrap(db) {
                if let Err(e) = db.close() {
                    tracing::error!(error = %e, "closing the data file");
                }
            } else {
                tracing::debug!("data file closes after its last reader");
            }
        }
    }
}

/// Commits with fsync, in one phase: redb writes the pages, flushes, then writes the header that
/// names them (with a checksum that tells a torn header from a whole one), and flushes once more
/// only for a shrink. Without quick repair, a crash costs a full check of the file at the next
/// open (about 0.1 s per 100 MB here) instead of a second flush and the allocator state on every
/// commit (README, "Durability").
fn commit(txn: WriteTransaction) -> Result<(), StoreError> {
    txn.commit()?;
    Ok(())
}

fn reject(request: Request) {
    fn unavailable<T>(reply: Reply<T>) {
        let _ = reply.send(Err(Error::unavailable()));
    }
    match request {
        Request::Event { reply, .. } => unavailable(reply),
        Request::Click { reply, .. } => unavailable(reply),
        Request::Bind { reply, .. } => unavailable(reply),
        Request::Admin { reply, .. } => unavailable(reply),
        Request::Stop => {}
    }
}

/// The first 128 bits of SHA-256: the index key of a long string (an fbclid).
pub(crate) fn digest128(text: &str) -> u128 {
    let d = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 16];
    first.copy_from_slice(&d[..16]);
    u128::from_be_bytes(first)
}

impl<'t> Tables<'t> {
    fn open(txn: &'t WriteTransaction) -> Result<Tables<'t>, StoreError> {
        let meta = txn.open_table(META)?;
        let inbox_seq = meta.get(META_INBOX_SEQ)?.map_or(0, |v| v.value());
        Ok(Tables {
            meta,
            spaces: txn.open_table(SPACES)?,
            credentials: txn.open_table(CREDENTIALS)?,
            inbox: txn.open_table(INBOX)?,
            dedup: txn.open_table(DEDUP)?,
            clicks: txn.open_table(CLICKS)?,
            by_fbclid: txn.open_table(CLICKS_BY_FBCLID)?,
            by_tg: txn.open_table(CLICKS_BY_TG)?,
            inbox_seq,
            credentials_changed: false,
        })
    }

    /// Applies one request. A storage error aborts the whole batch; a domain refusal (a taken
    /// space name) is that request's answer and changes nothing.
    fn apply(
        &mut self,
        request: Request,
        pending: &DedupBuffer,
        change: &mut dedup_buffer::Change,
    ) -> Result<Applied, StoreError> {
        Ok(match request {
            Request::Event {
                space,
                event,
                key,
                reply,
            } => Applied::Event(reply, Ok(self.event(space, event, key, pending, change)?)),
            Request::Click {
                space,
                click,
                reply,
            } => Applied::Click(reply, Ok(self.click(space, click)?)),
            Request::Bind {
                space,
                uid,
                tg_id,
                now_ms,
                reply,
            } => Applied::Bind(reply, Ok(self.bind(space, &uid, tg_id, now_ms)?)),
            Request::Admin { op, reply } => {
                let result = self.admin(op)?;
                if result.is_ok() {
                    self.credentials_changed = true;
                }
                Applied::Admin(reply, result)
            }
            Request::Stop => unreachable!("Stop is taken out of the batch before applying"),
        })
    }

    fn event(
        &mut self,
        space: u32,
        event: ValidEvent,
        key: Option<DedupKey>,
        pending: &DedupBuffer,
        change: &mut dedup_buffer::Change,
    ) -> Result<EventOutcome, StoreError> {
        let matched = match &event.uid {
            Some(uid) => self.clicks.get((space, uid.as_str()))?.is_some(),
            None => false,
        };
        let entry_key = key.as_ref().map(|k| dedup_buffer::entry_key(space, k));
        if let (Some(key), Some(k)) = (&key, &entry_key) {
            // Newest first: this transaction's events, then the buffer, then the table.
            let earlier = match change.fresh.get(k).copied().or_else(|| pending.get(k)) {
                Some(e) => Some(e),
                None => self.dedup.get(k)?.map(|g| g.value()),
            };
            if let Some(inbox_id) = dedup::duplicate_of(key, earlier, event.received_at_ms) {
                return Ok(EventOutcome {
                    duplicate: true,
                    inbox_id,
                    matched,
                });
            }
        }
        self.inbox_seq += 1;
        let inbox_id = self.inbox_seq;
        let received_at_ms = event.received_at_ms;
        let record = dedup_buffer::event_record(event, matched);
        self.inbox
            .insert((space, inbox_id), records::encode(&record).as_slice())?;
        if let Some(k) = entry_key {
            change.fresh.insert(k, (inbox_id, received_at_ms));
        }
        Ok(EventOutcome {
            duplicate: false,
            inbox_id,
            matched,
        })
    }

    fn click(&mut self, space: u32, click: NewClick) -> Result<ClickOutcome, StoreError> {
        let fbclid_key = click.fbclid.as_deref().map(digest128);
        if let Some(k) = fbclid_key {
            if let Some(uid) = self.by_fbclid.get((space, k))? {
                return Ok(ClickOutcome {
                    uid: uid.value().to_owned(),
                    created: false,
                });
            }
        }
        let uid = loop {
            // 128 random bits: a collision is astronomically unlikely, but never overwrite.
            let uid = credential::random_id();
            if self.clicks.get((space, uid.as_str()))?.is_none() {
                break uid;
            }
        };
        let record = ClickRecord {
            link_slug: click.link_slug,
            fbclid: click.fbclid,
            campaign_name: click.campaign_name,
            raw_query: click.raw_query,
            clicked_at_ms: click.clicked_at_ms,
            tg_id: None,
            bound_at_ms: None,
        };
        self.clicks
            .insert((space, uid.as_str()), records::encode(&record).as_slice())?;
        if let Some(k) = fbclid_key {
            self.by_fbclid.insert((space, k), uid.as_str())?;
        }
        Ok(ClickOutcome { uid, created: true })
    }

    fn bind(
        &mut self,
        space: u32,
        uid: &str,
        tg_id: u64,
        now_ms: u64,
    ) -> Result<BindOutcome, StoreError> {
        let mut record: ClickRecord = match self.clicks.get((space, uid))? {
            None => return Ok(BindOutcome::Unmatched),
            Some(bytes) => records::decode(bytes.value())?,
        };
        if let Some(existing) = record.tg_id {
            return Ok(BindOutcome::Bound {
                tg_id: existing,
                conflict: existing != tg_id,
            });
        }
        record.tg_id = Some(tg_id);
        record.bound_at_ms = Some(now_ms);
        self.clicks
            .insert((space, uid), records::encode(&record).as_slice())?;
        self.by_tg.insert((space, tg_id, uid), ())?;
        Ok(BindOutcome::Bound {
            tg_id,
            conflict: false,
        })
    }

    fn admin(&mut self, op: AdminOp) -> Result<Result<AdminOutcome, Error>, StoreError> {
        match op {
            AdminOp::CreateSpace {
                name,
                secret,
                ingest,
                now_ms,
            } => {
                if self.spaces.get(name.as_str())?.is_some() {
                    return Ok(Err(admin_error(format!("space {name:?} already exists"))));
                }
                let no = self.meta.get(META_SPACE_SEQ)?.map_or(0, |v| v.value()) + 1;
                let no = u32::try_from(no)
                    .map_err(|_| StoreError::Corrupt("space numbers exhausted".into()))?;
                self.meta.insert(META_SPACE_SEQ, u64::from(no))?;
                let record = SpaceRecord {
                    no,
                    created_at_ms: now_ms,
                };
                self.spaces
                    .insert(name.as_str(), records::encode(&record).as_slice())?;
                self.insert_credential(no, &secret, now_ms)?;
                self.insert_credential(no, &ingest, now_ms)?;
                Ok(Ok(AdminOutcome::Created { space_no: no }))
            }
            AdminOp::Rotate {
                space,
                new,
                grace_ms,
                now_ms,
            } => {
                let Some(no) = self.space_no(&space)? else {
                    return Ok(Err(admin_error(format!("no space named {space:?}"))));
                };
                let until = now_ms.saturating_add(grace_ms);
                let mut replaced = false;
                self.update_credentials(no, new.kind, |c| {
                    if c.valid_until_ms.is_none() && c.revoked_at_ms.is_none() {
                        c.valid_until_ms = Some(until);
                        replaced = true;
                    }
                })?;
                self.insert_credential(no, &new, now_ms)?;
                Ok(Ok(AdminOutcome::Rotated {
                    previous_valid_until_ms: replaced.then_some(until),
                }))
            }
            AdminOp::Revoke {
                space,
                kind,
                now_ms,
            } => {
                let Some(no) = self.space_no(&space)? else {
                    return Ok(Err(admin_error(format!("no space named {space:?}"))));
                };
                let mut count = 0;
                self.update_credentials(no, kind, |c| {
                    let live = c.valid_until_ms.is_none_or(|until| now_ms < until);
                    if c.revoked_at_ms.is_none() && live {
                        c.revoked_at_ms = Some(now_ms);
                        count += 1;
                    }
                })?;
                Ok(Ok(AdminOutcome::Revoked { count }))
            }
        }
    }

    fn space_no(&self, name: &str) -> Result<Option<u32>, StoreError> {
        match self.spaces.get(name)? {
            None => Ok(None),
            Some(bytes) => Ok(Some(records::decode::<SpaceRecord>(bytes.value())?.no)),
        }
    }

    fn insert_credential(
        &mut self,
        space_no: u32,
        c: &NewCredential,
        now_ms: u64,
    ) -> Result<(), StoreError> {
        let record = CredentialRecord {
            space_no,
            kind: c.kind as u8,
            public_prefix: c.public_prefix.clone(),
            created_at_ms: now_ms,
            valid_until_ms: None,
            revoked_at_ms: None,
            last_used_ms: 0,
        };
        self.credentials
            .insert(&c.digest, records::encode(&record).as_slice())?;
        Ok(())
    }

    /// Applies `change` to every credential of `kind` in space `space_no`. The table holds a few
    /// records per space, so a scan is the simplest correct thing.
    fn update_credentials(
        &mut self,
        space_no: u32,
        kind: Kind,
        mut change: impl FnMut(&mut CredentialRecord),
    ) -> Result<(), StoreError> {
        let mut updates = Vec::new();
        for entry in self.credentials.iter()? {
            let (digest, bytes) = entry?;
            let mut record: CredentialRecord = records::decode(bytes.value())?;
            if record.space_no == space_no && record.kind == kind as u8 {
                let before = record.clone();
                change(&mut record);
                if record != before {
                    updates.push((*digest.value(), record));
                }
            }
        }
        for (digest, record) in updates {
            self.credentials
                .insert(&digest, records::encode(&record).as_slice())?;
        }
        Ok(())
    }

    fn flush_last_used(&mut self, seen: &[(CredentialDigest, u64)]) -> Result<(), StoreError> {
        for (digest, at) in seen {
            let record = match self.credentials.get(digest)? {
                Some(bytes) => records::decode::<CredentialRecord>(bytes.value())?,
                None => continue,
            };
            if record.last_used_ms < *at {
                let record = CredentialRecord {
                    last_used_ms: *at,
                    ..record
                };
                self.credentials
                    .insert(digest, records::encode(&record).as_slice())?;
            }
        }
        Ok(())
    }
}
