//! Conversions out (`docs/api.md#destinations`): a space's destinations and their deliveries,
//! one operation each, shared by the API, the command line and the admin page.

use serde::{Deserialize, Serialize};

use crate::app::App;
pub use crate::delivery::Tested;
use crate::domain::destination::{
    DeliveryQuery, DeliveryView, DestinationFields, DestinationView, State, StateCounts, Target,
    check_name,
};
use crate::domain::keyring::SpaceRef;
use crate::error::{Code, Error};

/// Dead deliveries put back in the queue per write transaction, so that a retry of a long
/// history never holds the writer for long.
const RETRY_PER_COMMIT: usize = 10_000;

/// What `POST /deliveries/retry` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Retried {
    pub destination: String,
    /// How many dead deliveries are due again now.
    pub retried: u64,
}

impl App {
    /// Creates a destination of `space` from what any way in was given. Its answer is the only
    /// one that shows a webhook's signing secret.
    pub async fn create_destination(
        &self,
        space: &SpaceRef,
        fields: DestinationFields,
    ) -> Result<DestinationView, Error> {
        let new = fields.check(self.settings.delivery.allow_private_destinations)?;
        let secret = match &new.target {
            Target::Webhook { signing_secret, .. } => Some(signing_secret.expose().to_owned()),
            _ => None,
        };
        let created = self
            .store
            .create_destination(space.no, new, self.now_ms())
            .await?;
        let mut view = DestinationView::new(&created, StateCounts::default(), None);
        view.signing_secret = secret;
        Ok(view)
    }

    /// The space's live destinations, oldest first, with their counts per state and last error.
    pub async fn destinations(&self, space: &SpaceRef) -> Result<Vec<DestinationView>, Error> {
        self.store.destinations(space.no).await
    }

    /// Removes a destination of the space: it sends nothing more, and its open deliveries are
    /// cancelled.
    pub async fn remove_destination(&self, space: &SpaceRef, name: String) -> Result<(), Error> {
        self.store
            .remove_destination(space.no, name, self.now_ms())
            .await
    }

    /// The space's deliveries that `query` asks for, newest event first.
    pub async fn deliveries(
        &self,
        space: &SpaceRef,
        query: DeliveryQuery,
    ) -> Result<Vec<DeliveryView>, Error> {
        self.store.deliveries(space.no, query).await
    }

    /// Makes every dead delivery of a destination due again now, with `delivery_max_age`
    /// counted afresh. Only `dead` ones can be retried: the others are delivered, on their way,
    /// or cancelled with their destination.
    pub async fn retry_deliveries(
        &self,
        space: &SpaceRef,
        name: String,
        state: State,
    ) -> Result<Retried, Error> {
        check_name(&name)?;
        if state != State::Dead {
            return Err(Error::field(
                Code::InvalidField,
                "state",
                format!(
                    "state must be \"dead\": only dead deliveries are retried by hand, got {:?}",
                    state.as_str()
                ),
            ));
        }
        let mut retried = 0;
        loop {
            let (n, more) = self
                .store
                .retry_dead(space.no, name.clone(), self.now_ms(), RETRY_PER_COMMIT)
                .await?;
            retried += n;
            if !more {
                break;
            }
        }
        self.delivery_wake.notify_waiters();
        Ok(Retried {
            destination: name,
            retried,
        })
    }

    /// Sends a destination of the space one synthetic event and answers what the remote
    /// answered; nothing is recorded.
    pub async fn test_destination(&self, space: &SpaceRef, name: String) -> Result<Tested, Error> {
        let d = self
            .store
            .destination_directory()
            .of_space(space.no)
            .and_then(|list| list.iter().find(|d| d.name == name).cloned())
            .ok_or_else(|| {
                Error::new(
                    Code::NotFound,
                    format!("no destination {name:?} in this space"),
                )
            })?;
        Ok(crate::delivery::test(&self.senders(), &d).await)
    }
}
