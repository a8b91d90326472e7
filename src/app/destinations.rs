//! Conversions out (`docs/api.md#destinations`): a space's destinations and their deliveries,
//! one operation each, shared by the API, the command line and the admin page.

use serde::{Deserialize, Serialize};

use crate::app::App;
pub use crate::delivery::Tested;
use crate::domain::keyring::SpaceRef;
use crate::error::{Code, Error};
use crate::platform::{
    DeliveryQuery, DeliveryView, Destination, DestinationFields, DestinationPatch, DestinationView,
    ROTATION_GRACE_MS, Sending, State, StateCounts, Target, TestView, check_name,
    check_test_event_code, new_signing_secret,
};

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
            Target::Webhook(w) => Some(w.signing_secret.expose().to_owned()),
            _ => None,
        };
        let password = match &new.target {
            Target::GoogleAds(g) => g.new_password.as_ref().map(|p| p.expose().to_owned()),
            _ => None,
        };
        let (no, now) = (space.no, self.now_ms());
        let created = self
            .store
            .write(move |t| t.create_destination(no, &new, now))
            .await?;
        let mut view = DestinationView::new(&created, StateCounts::default(), None);
        view.signing_secret = secret;
        view.password = password;
        Ok(view)
    }

    /// The space's live destinations, oldest first, with their counts per state and last error.
    pub async fn destinations(&self, space: &SpaceRef) -> Result<Vec<DestinationView>, Error> {
        let no = space.no;
        self.store.read(move |s| s.destinations(no)).await
    }

    /// Removes a destination of the space: it sends nothing more, and its open deliveries are
    /// cancelled.
    pub async fn remove_destination(&self, space: &SpaceRef, name: String) -> Result<(), Error> {
        let (no, now) = (space.no, self.now_ms());
        self.store
            .write(move |t| t.remove_destination(no, &name, now))
            .await
    }

    /// The space's deliveries that `query` asks for, newest event first.
    pub async fn deliveries(
        &self,
        space: &SpaceRef,
        query: DeliveryQuery,
    ) -> Result<Vec<DeliveryView>, Error> {
        let no = space.no;
        self.store.read(move |s| s.deliveries(no, &query)).await
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
        let (mut retried, mut from) = (0, 0);
        loop {
            let (no, name, now) = (space.no, name.clone(), self.now_ms());
            let (n, next) = self
                .store
                .write(move |t| t.retry_dead(no, &name, now, from, RETRY_PER_COMMIT))
                .await?;
            retried += n;
            // On from the last step: one that dies again meanwhile is not taken twice.
            match next {
                Some(next) => from = next,
                None => break,
            }
        }
        self.delivery_wake.notify_waiters();
        Ok(Retried {
            destination: name,
            retried,
        })
    }

    /// Changes a destination of the space: its secrets (write-only) and settings, checked as a
    /// new destination's are. Its deliveries stay; a paused destination resumes, and what
    /// waited is sent.
    pub async fn change_destination(
        &self,
        space: &SpaceRef,
        name: String,
        patch: DestinationPatch,
    ) -> Result<DestinationView, Error> {
        check_name(&name)?;
        let (no, allow_private) = (space.no, self.settings.delivery.allow_private_destinations);
        let changed = self
            .store
            .write(move |t| t.change_destination(no, &name, patch, allow_private))
            .await?;
        self.delivery_wake.notify_waiters();
        Ok(self
            .destination_view(space, |d| d.name == changed.name)
            .await?
            .remove(0))
    }

    /// Gives a webhook of the space a new signing secret, shown in this answer only; for
    /// [`ROTATION_GRACE_MS`] the old one signs beside it (two signatures in
    /// `webhook-signature`), so the receiver can switch without losing a delivery. A Google
    /// Ads destination gets a new password, shown in this answer only, which replaces the old
    /// one at once.
    pub async fn rotate_destination_secret(
        &self,
        space: &SpaceRef,
        name: String,
    ) -> Result<DestinationView, Error> {
        // A name no destination can have is one no destination has: 404, as for `DELETE`.
        let now = self.now_ms();
        // A Google Ads destination makes its own new password (`Txn::rotate_signing_secret`).
        let (no, secret, grace_until_ms) = (
            space.no,
            new_signing_secret(),
            now.saturating_add(ROTATION_GRACE_MS),
        );
        let rotated = self
            .store
            .write(move |t| t.rotate_signing_secret(no, &name, secret, now, grace_until_ms))
            .await?;
        let mut view = self
            .destination_view(space, |d| d.name == rotated.name)
            .await?
            .remove(0);
        match &rotated.target {
            Target::Webhook(w) => {
                view.signing_secret = Some(w.signing_secret.expose().to_owned());
            }
            Target::GoogleAds(g) => {
                view.password = g.new_password.as_ref().map(|p| p.expose().to_owned());
            }
            _ => {}
        }
        Ok(view)
    }

    /// The space's destinations that `pick` keeps, as answers show them; at least one, or
    /// `not_found`.
    async fn destination_view(
        &self,
        space: &SpaceRef,
        pick: impl Fn(&DestinationView) -> bool,
    ) -> Result<Vec<DestinationView>, Error> {
        let list: Vec<_> = self
            .destinations(space)
            .await?
            .into_iter()
            .filter(|d| pick(d))
            .collect();
        if list.is_empty() {
            return Err(Error::new(
                Code::NotFound,
                "no such destination in this space",
            ));
        }
        Ok(list)
    }

    /// Sends a destination of the space one synthetic event and answers what the remote
    /// answered; nothing is recorded. An ad platform is sent a test only with a test code
    /// (`test_code`, or the destination's own), so that it never counts as a real conversion:
    /// without one the answer is `409`, and nothing is sent.
    pub async fn test_destination(
        &self,
        space: &SpaceRef,
        name: String,
        test_code: Option<String>,
    ) -> Result<Tested, Error> {
        if let Some(code) = &test_code {
            check_test_event_code(code)?;
        }
        let d: std::sync::Arc<Destination> = self
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
        if d.target.sending() == Sending::Fetched {
            return Err(Error::new(
                Code::Conflict,
                format!(
                    "{name} is a google_ads destination: nothing is sent to Google, which \
                     fetches /conversions/{}/{name}.csv on its schedule; fetch that address \
                     with the destination's user name and password to see what it is given",
                    space.name
                ),
            ));
        }
        // The ad platforms' own test code, where the destination has one to hold.
        if let Some(TestView {
            platform,
            conversion,
            own_code,
        }) = d.target.platform().test_view()
            && test_code.is_none()
            && own_code.is_none()
        {
            return Err(Error::field(
                Code::Conflict,
                "test_event_code",
                format!(
                    "{name} has no test_event_code, and a test without one would count as \
                         a real {conversion}: open {platform}'s Events Manager, choose the \
                         pixel, open the Test events tab and copy its code (TEST12345); then \
                         send it as {{\"test_event_code\": \"TEST12345\"}} with the test, or \
                         set it on the destination"
                ),
            ));
        }
        Ok(crate::delivery::test(&self.senders(), &d, test_code).await)
    }
}
