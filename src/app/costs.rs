//! A space's costs: read by day and campaign, set by hand or from a CSV file, and fetched
//! from Meta's insights.

use crate::app::App;
use crate::domain::keyring::SpaceRef;
use crate::error::{Code, Error};

/// What setting costs did: how many were set, and how many (of amount 0) removed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CostsSet {
    pub set: usize,
    pub removed: usize,
}

/// What importing a CSV of costs did: the rows the file had, the days (the first, the last,
/// how many) and campaigns they name, and how many costs were set and removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostsImport {
    pub rows: usize,
    pub days: usize,
    /// The first and the last day the file names.
    pub span: Option<(crate::domain::cost::Day, crate::domain::cost::Day)>,
    pub campaigns: usize,
    pub done: CostsSet,
}

impl CostsImport {
    /// What the import did, in the one sentence the Costs page and `tracker costs import`
    /// print: `3 rows: 3 costs set, 0 removed, over 2 days (2026-11-24 to 2026-11-25) and 2
    /// campaigns.`
    #[must_use]
    pub fn summary(&self) -> String {
        let s = |n: usize| if n == 1 { "" } else { "s" };
        let span = self
            .span_text()
            .map_or_else(String::new, |t| format!(" ({t})"));
        format!(
            "{} row{}: {} cost{} set, {} removed, over {} day{}{span} and {} campaign{}.",
            self.rows,
            s(self.rows),
            self.done.set,
            s(self.done.set),
            self.done.removed,
            self.days,
            s(self.days),
            self.campaigns,
            s(self.campaigns),
        )
    }

    /// The days the file names as text: `2026-11-24 to 2026-11-25`, or the one day.
    fn span_text(&self) -> Option<String> {
        let (first, last) = self.span?;
        let day = crate::domain::cost::day_text;
        Some(if first == last {
            day(first)
        } else {
            format!("{} to {}", day(first), day(last))
        })
    }
}

impl App {
    /// Fetches the space's spend of the last 28 days from Meta now (`POST /costs/fetch`,
    /// `tracker costs fetch`, the Costs page's button): the same fetch the hourly and daily
    /// ones are ([`crate::workers::spend::fetch`]). A fetch that fails at Meta is answered as its
    /// result, not an error.
    pub async fn fetch_costs(
        &self,
        space: &SpaceRef,
    ) -> Result<crate::workers::spend::LastFetch, Error> {
        crate::workers::spend::fetch(
            &self.spend_tasks(),
            space.no,
            crate::workers::spend::MONTH_DAYS,
        )
        .await
    }

    /// The space's last fetch of spend from Meta since the server started.
    #[must_use]
    pub fn last_costs_fetch(&self, space: &SpaceRef) -> Option<crate::workers::spend::LastFetch> {
        self.spend.last(space.no)
    }

    /// The space's costs on the days `[from, to]` (`GET /costs`, the dashboard).
    pub async fn costs(
        &self,
        space: &SpaceRef,
        days: (crate::domain::cost::Day, crate::domain::cost::Day),
    ) -> Result<Vec<crate::domain::cost::Cost>, Error> {
        let no = space.no;
        self.store.read(move |s| s.costs(no, days)).await
    }

    /// Sets costs (`POST /costs`, `tracker costs import`): each replaces what its campaign's day
    /// had, an amount of 0 removes it; one transaction, so an import is all or nothing.
    pub async fn set_costs(
        &self,
        space: &SpaceRef,
        costs: Vec<crate::domain::cost::Cost>,
    ) -> Result<CostsSet, Error> {
        let no = space.no;
        let (set, removed) = self.store.write(move |t| t.set_costs(no, &costs)).await?;
        Ok(CostsSet { set, removed })
    }

    /// Imports a CSV file of costs (`tracker costs import`, the admin page's upload): parsed and
    /// checked whole ([`crate::domain::cost::parse_csv`]), then set in one transaction, so a
    /// bad row names its line and changes nothing. The file is read on a blocking thread: a
    /// large one takes a while, and a request thread held that long would stall ingest.
    pub async fn import_costs(&self, space: &SpaceRef, csv: &str) -> Result<CostsImport, Error> {
        let csv = csv.to_owned();
        let read = tokio::task::spawn_blocking(move || crate::domain::cost::parse_csv(&csv))
            .await
            .map_err(|e| {
                Error::new(
                    Code::Internal,
                    format!("reading the costs file failed: {e}"),
                )
            })??;
        let (rows, days, campaigns) = (read.rows, read.days(), read.campaigns());
        let span = read.days_span();
        let done = self.set_costs(space, read.costs).await?;
        Ok(CostsImport {
            rows,
            days,
            span,
            campaigns,
            done,
        })
    }
}
