//! The one typed answer of the command line and the control socket (what a
//! [`Request`](super::Request) answers), and the answers' own types: serialised once by the
//! server, decoded once by the command line, which prints it as it is ([`Answer::json`] for
//! `--json`, its own text for people: `cli`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::app::destinations::Retried;
use crate::app::spaces::{CreatedSpace, Revoked, Rotated};
use crate::app::users::{Invited, UserSummary};
use crate::domain::audit::AuditEntry;
use crate::domain::feed::FeedPage;
use crate::domain::link::LinkView;
use crate::domain::settings::SpaceSettings;
use crate::domain::stats::GroupStats;
use crate::platform::{DeliveryView, DestinationView};
use crate::storage::BackupStats;
use crate::storage::SpaceSummary;
use crate::storage::check::Report;

/// What a [`Request`] answers.
#[derive(Serialize, Deserialize, Debug)]
#[serde(tag = "answer", content = "result", rename_all = "snake_case")]
pub enum Answer {
    SpaceCreated(CreatedSpace),
    Spaces(Vec<SpaceSummary>),
    Rotated(Rotated),
    Revoked(Revoked),
    BackedUp(BackupStats),
    Checked(Report),
    LinkCreated(Box<LinkView>),
    Links(Vec<LinkView>),
    LinkDeleted(LinkDeleted),
    PasswordSet(PasswordSet),
    Page(FeedPage),
    DestinationCreated(Box<DestinationView>),
    /// A destination changed, or a webhook's secret rotated (the new one shown once).
    DestinationChanged(Box<DestinationView>),
    Destinations(Vec<DestinationView>),
    DestinationDeleted(DestinationDeleted),
    Deliveries(Vec<DeliveryView>),
    Retried(Retried),
    SpaceSettings(Box<SpaceSettingsSet>),
    CostsImported(CostsImported),
    CostsFetched(Box<CostsFetched>),
    Stats(StatsShown),
    EventsImported(Vec<ImportedEvent>),
    /// A user added, or their password reset: the invitation's address, shown once.
    Invited(Box<Invited>),
    Users(Vec<UserSummary>),
    UserRemoved(UserSummary),
    UserChanged(UserSummary),
    SecondFactorRule(crate::app::second_factor::SecondFactorRule),
    Audit(Vec<AuditEntry>),
}

/// What `tracker stats` shows: `GET /stats`'s groups.
#[derive(Serialize, Deserialize, Debug)]
pub struct StatsShown {
    pub space: String,
    pub by: String,
    pub groups: Vec<GroupStats>,
}

/// What `tracker costs fetch` did: the fetch, or why it failed at Meta.
#[derive(Serialize, Deserialize, Debug)]
pub struct CostsFetched {
    pub space: String,
    pub fetch: crate::workers::spend::FetchView,
}

/// What `tracker costs import` did.
#[derive(Serialize, Deserialize, Debug)]
pub struct CostsImported {
    pub space: String,
    /// The file's rows. (This and the fields below `removed` default for an answer of a server
    /// from before them.)
    #[serde(default)]
    pub rows: usize,
    /// Costs set (rows of the same campaign and day add up to one).
    pub set: usize,
    /// Costs removed by an amount of 0.
    pub removed: usize,
    /// The days and the campaigns the file names.
    #[serde(default)]
    pub days: usize,
    #[serde(default)]
    pub campaigns: usize,
    /// What the import did, in a sentence (`CostsImport::summary`).
    #[serde(default)]
    pub summary: String,
}

/// A space's settings after a change, as `GET /space` shows them.
#[derive(Serialize, Deserialize, Debug)]
pub struct SpaceSettingsSet {
    pub space: String,
    pub settings: SpaceSettings,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct LinkDeleted {
    pub deleted: bool,
    pub space: String,
    pub slug: String,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct DestinationDeleted {
    pub deleted: bool,
    pub space: String,
    pub name: String,
}

#[derive(Serialize, Deserialize, Debug)]
pub struct PasswordSet {
    pub password_set: bool,
}

impl Answer {
    /// What `--json` prints: the answer's own fields, as the API would give them.
    #[must_use]
    pub fn json(&self) -> Value {
        serde_json::to_value(self).map_or(Value::Null, |mut v| v["result"].take())
    }
}

/// What became of one event of an import's batch: what `POST /events/batch` answers for it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ImportedEvent {
    Queued {
        inbox_id: Option<String>,
    },
    Duplicate {
        inbox_id: Option<String>,
    },
    Refused {
        code: String,
        error: String,
        field: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `tracker stats --json` prints the groups exactly as `GET /stats` gives them, and a
    /// group survives the trip over the socket.
    #[test]
    fn a_stats_group_prints_as_the_api_gives_it() {
        use crate::domain::decimal::Decimal;
        use crate::domain::stats::Counts;
        let counts = Counts {
            clicks: 3,
            bound_clicks: 2,
            events: [2, 1, 1, 1],
            deposits: [("USD".to_owned(), Decimal::parse("12.50").unwrap())].into(),
            first_deposits: 1,
            joins: 4,
            leaves: 2,
        };
        let cost = [("USD".to_owned(), Decimal::parse("5").unwrap())].into();
        let api = GroupStats::new(Some("spring".into()), &counts, &cost);
        let text = serde_json::to_string(&api).unwrap();
        assert_eq!(serde_json::from_str::<GroupStats>(&text).unwrap(), api);
    }

    #[test]
    fn an_answer_round_trips_and_prints_its_own_fields() {
        let a = Answer::PasswordSet(PasswordSet { password_set: true });
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(
            text,
            r#"{"answer":"password_set","result":{"password_set":true}}"#
        );
        assert!(matches!(
            serde_json::from_str::<Answer>(&text).unwrap(),
            Answer::PasswordSet(_)
        ));
        assert_eq!(a.json(), serde_json::json!({"password_set": true}));
    }
}
