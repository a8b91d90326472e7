//! The [`Store`]'s operations on conversions out: destinations made, changed and removed,
//! deliveries recorded, pruned and retried through the writer, and their reads on a snapshot
//! (`outbox.rs`, `outbox_read.rs`).

use std::sync::Arc;

use super::{Store, outbox};
use crate::domain::feed::FeedEvent;
use crate::error::Error;
use crate::platform::{
    Attempt, DeliveryQuery, DeliveryView, Destination, DestinationPatch, DestinationView, MaxAge,
    NewDestination, Paused, Secret, State,
};

impl Store {
    /// Stores a new destination of `space`; a name its live destinations use is refused with
    /// `conflict`.
    pub async fn create_destination(
        &self,
        space: u32,
        new: NewDestination,
        now_ms: u64,
    ) -> Result<Destination, Error> {
        self.write(move |t| t.create_destination(space, &new, now_ms))
            .await
    }

    /// Removes a destination of `space`; its open deliveries are cancelled.
    pub async fn remove_destination(
        &self,
        space: u32,
        name: String,
        now_ms: u64,
    ) -> Result<(), Error> {
        self.write(move |t| t.remove_destination(space, &name, now_ms))
            .await
    }

    /// Changes a destination of `space` (`outbox.rs`): its deliveries stay, and a paused one
    /// resumes.
    pub async fn change_destination(
        &self,
        space: u32,
        name: String,
        patch: DestinationPatch,
        allow_private: bool,
    ) -> Result<Destination, Error> {
        self.write(move |t| t.change_destination(space, &name, patch, allow_private))
            .await
    }

    /// Gives a webhook of `space` a new signing secret; the old one signs until
    /// `grace_until_ms`.
    pub async fn rotate_signing_secret(
        &self,
        space: u32,
        name: String,
        secret: Secret,
        now_ms: u64,
        grace_until_ms: u64,
    ) -> Result<Destination, Error> {
        self.write(move |t| t.rotate_signing_secret(space, &name, secret, now_ms, grace_until_ms))
            .await
    }

    /// Records what attempts at deliveries of destination `no` came to (`outbox.rs`), pausing
    /// it with `pause` unless it changed since it was sent with; answers whether this paused
    /// it.
    pub async fn record_attempts(
        &self,
        no: u32,
        attempts: Vec<Attempt>,
        sent_through: Option<u64>,
        age: MaxAge,
        pause: Option<(Paused, Arc<Destination>)>,
    ) -> Result<(Vec<Option<State>>, bool), Error> {
        self.write(move |t| {
            let pause = pause.as_ref().map(|(p, d)| (p.clone(), &**d));
            t.record_attempts(no, &attempts, sent_through, age, pause)
        })
        .await
    }

    /// One step of deleting old delivered and cancelled deliveries (retention).
    pub async fn prune_deliveries(
        &self,
        from: (u32, u64),
        before_ms: u64,
        limit: usize,
    ) -> Result<(u64, Option<(u32, u64)>), Error> {
        self.write(move |t| t.prune_deliveries(from, before_ms, limit))
            .await
    }

    /// Puts up to `limit` dead deliveries of a destination of `space`, from event `from` on,
    /// back in the queue; answers how many, and the event to go on from when more are dead.
    pub async fn retry_dead(
        &self,
        space: u32,
        name: String,
        now_ms: u64,
        from: u64,
        limit: usize,
    ) -> Result<(u64, Option<u64>), Error> {
        self.write(move |t| t.retry_dead(space, &name, now_ms, from, limit))
            .await
    }

    /// The live destinations of `space` with their counts and last failures.
    pub async fn destinations(&self, space: u32) -> Result<Vec<DestinationView>, Error> {
        self.read(move |s| outbox::destinations(s, space)).await
    }

    /// The events of `space` since `since_ms` whose click has a Google click id, oldest first,
    /// read on a snapshot (`outbox::google_conversions`).
    pub async fn google_conversions(
        &self,
        space: u32,
        since_ms: u64,
    ) -> Result<Vec<FeedEvent>, Error> {
        self.read(move |s| outbox::google_conversions(s, space, since_ms))
            .await
    }

    /// Records a fetch of a Google Ads destination's file: when, and how many rows.
    pub async fn record_fetch(&self, no: u32, at_ms: u64, rows: u64) -> Result<(), Error> {
        self.write(move |t| t.record_fetch(no, at_ms, rows)).await
    }

    /// The deliveries of `space` that `query` asks for, newest first.
    pub async fn deliveries(
        &self,
        space: u32,
        query: DeliveryQuery,
    ) -> Result<Vec<DeliveryView>, Error> {
        self.read(move |s| outbox::deliveries(s, space, &query))
            .await
    }

    /// What the sender of `destination` may try at `now_ms`, at most `limit`.
    pub async fn due_deliveries(
        &self,
        destination: Arc<Destination>,
        now_ms: u64,
        limit: usize,
    ) -> Result<outbox::DueBatch, Error> {
        self.read(move |s| outbox::due(s, &destination, now_ms, limit))
            .await
    }
}
