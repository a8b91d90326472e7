//! Many events at once, the operation behind `POST /events/batch` and `tracker import`: each
//! event read and checked as `POST /events` reads and checks one, the valid ones stored in one
//! write transaction, and one result per event, in order, as `POST /events` would have answered
//! it.

use crate::app::App;
use crate::app::events::EventResult;
use crate::domain::batch;
use crate::domain::event::{EventInput, POST_NAMES};
use crate::domain::keyring::SpaceRef;
use crate::error::{Code, Error};

impl App {
    /// Records the events of a batch, each a JSON object with the fields of `POST /events`:
    /// each is validated and deduplicated on its own (against the store and the events before it
    /// in the batch), and every valid one is stored in one transaction, committed before this
    /// answers. An event's refusal is its own result and never refuses the others; the batch as
    /// a whole is refused only for more than [`batch::MAX_BATCH_EVENTS`] events, or when the
    /// write cannot be made durable (then nothing of it is stored).
    ///
    /// `dry_run` is not taken inside a batch: a batch's results say what was stored. Without
    /// `send` (`tracker import`'s default), the events get no deliveries: a history moved from
    /// another tracker is not sent to the ad platforms again.
    pub async fn record_events(
        &self,
        space: &SpaceRef,
        events: &[&str],
        send: bool,
    ) -> Result<Vec<Result<EventResult, Error>>, Error> {
        batch::check_count(events.len())?;
        let now_ms = self.now_ms();
        let mut results: Vec<Option<Result<EventResult, Error>>> = Vec::with_capacity(events.len());
        let (mut valid, mut places) = (Vec::new(), Vec::new());
        for text in events {
            let checked = EventInput::from_json(text.as_bytes())
                .and_then(refuse_dry_run)
                .and_then(|input| self.checked_event(input, &POST_NAMES, now_ms));
            match checked {
                Ok((event, key, basis)) => {
                    places.push((results.len(), basis));
                    valid.push((event, key));
                    results.push(None);
                }
                Err(e) => results.push(Some(Err(e))),
            }
        }
        if !valid.is_empty() {
            let no = space.no;
            let outcomes = self
                .store
                .write(move |t| t.record_events(no, valid, send))
                .await?;
            for ((place, basis), outcome) in places.into_iter().zip(outcomes) {
                results[place] = Some(outcome.map(|o| EventResult::stored(o, basis)));
            }
        }
        let results: Vec<_> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::internal())))
            .collect();
        for result in &results {
            self.count_event(result);
        }
        Ok(results)
    }
}

/// A batch's event with `dry_run: true` is refused: its place in the batch would say nothing was
/// stored while the rest were.
fn refuse_dry_run(input: EventInput) -> Result<EventInput, Error> {
    if input.dry_run {
        return Err(Error::field(
            Code::InvalidField,
            "dry_run",
            "`dry_run` is not taken inside a batch; send the event alone to POST /events to try \
             it",
        ));
    }
    Ok(input)
}
