//! What a space has recorded, read back: the feed (a page, the newest, a wait for the next
//! events), the stats (their money in the space's reporting currency too) and the rejection
//! log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::app::App;
use crate::domain::cost::{Day, parse_day};
use crate::domain::feed::{FeedPage, MAX_WAITERS_PER_SPACE, PageRequest};
use crate::domain::keyring::SpaceRef;
use crate::domain::rejection::Rejection;
use crate::domain::reporting::Reporting;
use crate::domain::settings::SpaceSettings;
use crate::domain::stats::{Dimension, GroupStats, Grouping, Range};
use crate::error::{Code, Error};

/// A place among a space's waiting followers, given back when dropped.
struct Waiting {
    counts: Arc<Mutex<HashMap<u32, usize>>>,
    space: u32,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = counts.get_mut(&self.space) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.space);
            }
        }
    }
}

impl App {
    /// A page of the space's feed newest first (the admin page): the events before `before`,
    /// and the id to ask before for the next page.
    pub async fn feed_newest(
        &self,
        space: &SpaceRef,
        before: Option<u64>,
        limit: usize,
    ) -> Result<(Vec<crate::domain::feed::FeedEvent>, Option<u64>), Error> {
        let no = space.no;
        self.store
            .read(move |s| s.feed_newest(no, before, limit))
            .await
    }

    /// A page of the space's feed.
    pub async fn feed(&self, space: &SpaceRef, page: PageRequest) -> Result<FeedPage, Error> {
        let no = space.no;
        self.store.read(move |s| s.feed(no, page)).await
    }

    /// A page of the space's feed as soon as it holds an event after `page.after`, or an empty
    /// page after `timeout`. Woken by the writer's commits, never by polling the file. At most
    /// [`MAX_WAITERS_PER_SPACE`] requests of a space wait at once; past it, `rate_limited`.
    pub async fn wait_for_events(
        &self,
        space: &SpaceRef,
        page: PageRequest,
        timeout: Duration,
    ) -> Result<FeedPage, Error> {
        let _place = {
            let mut counts = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let n = counts.entry(space.no).or_insert(0);
            if *n >= MAX_WAITERS_PER_SPACE {
                return Err(Error::new(
                    Code::RateLimited,
                    format!(
                        "space {:?} has {MAX_WAITERS_PER_SPACE} requests waiting for events \
                         already, the most at once; retry in 1 s",
                        &*space.name
                    ),
                )
                .retry_after(1));
            }
            *n += 1;
            Waiting {
                counts: self.waiting.clone(),
                space: space.no,
            }
        };
        let deadline = tokio::time::Instant::now() + timeout;
        let mut commits = self.store.commits();
        loop {
            // Marked seen before the read: a commit after it wakes the wait below.
            commits.borrow_and_update();
            let no = space.no;
            let found = self.store.read(move |s| s.feed(no, page)).await?;
            if !found.events.is_empty() {
                return Ok(found);
            }
            match tokio::time::timeout_at(deadline, commits.changed()).await {
                Ok(Ok(())) => {}
                // Timed out, or the store is closing: an empty page.
                Ok(Err(_)) | Err(_) => return Ok(found),
            }
        }
    }

    /// The space's stats by `grouping` over `range`, days in the space's time zone, each
    /// group's money also in the space's reporting currency, each day at the rates in force on
    /// it (a group over days of more than one set of rates is read once per set); answers the
    /// quarters `[from, to)` counted, with the groups.
    pub async fn stats(
        &self,
        space: &SpaceRef,
        grouping: Grouping,
        range: Range,
    ) -> Result<((u32, u32), Vec<GroupStats>), Error> {
        let settings = self.space_settings(space).await?;
        let zone = settings.time_zone.zone();
        let reporting = self.reporting(space).await?;
        let quarters = range.quarters(&zone);
        let stretches = reporting.stretches(quarters, &zone);
        let first_day = reporting.first_day(quarters, &zone);
        // A day's group is one day: its own day's rates, from the one read.
        let by_day = grouping.by == Dimension::Day;
        let no = space.no;
        let (mut groups, parts) = self
            .store
            .read(move |s| {
                let whole = s.stats(no, &grouping, quarters, &zone)?;
                let mut parts = Vec::new();
                if !by_day && stretches.len() > 1 {
                    for (day, part) in stretches {
                        let by_name: HashMap<Option<String>, GroupStats> = s
                            .stats(no, &grouping, part, &zone)?
                            .into_iter()
                            .map(|g| (g.group.clone(), g))
                            .collect();
                        parts.push((day, by_name));
                    }
                }
                Ok((whole, parts))
            })
            .await?;
        for g in &mut groups {
            let day = match (by_day, g.group.as_deref()) {
                (true, Some(day)) => parse_day(day, "day").unwrap_or(first_day),
                _ => first_day,
            };
            let reported = if parts.is_empty() {
                reporting.report(g, &[(day, g)])
            } else {
                let own: Vec<(Day, &GroupStats)> = parts
                    .iter()
                    .filter_map(|(day, by_name)| Some((*day, by_name.get(&g.group)?)))
                    .collect();
                reporting.report(g, &own)
            };
            g.reported = Some(reported);
        }
        Ok((quarters, groups))
    }

    /// What the space's stats convert money to: its reporting currency and its rates over time.
    pub async fn reporting(&self, space: &SpaceRef) -> Result<Reporting, Error> {
        let settings = self.space_settings(space).await?;
        let no = space.no;
        let history = self.store.read(move |s| s.rate_history(no)).await?;
        Ok(Reporting {
            currency: self.reporting_currency(&settings),
            history,
        })
    }

    /// The currency the space's stats convert money to: its `reporting_currency` (the
    /// configuration's `default_currency` until set).
    #[must_use]
    pub fn reporting_currency(&self, settings: &SpaceSettings) -> String {
        settings
            .reporting_currency
            .clone()
            .unwrap_or_else(|| self.settings.default_currency.clone())
    }

    /// The space's last `limit` rejections, newest first.
    pub async fn rejections(
        &self,
        space: &SpaceRef,
        limit: usize,
    ) -> Result<Vec<Rejection>, Error> {
        let no = space.no;
        self.store.read(move |s| s.rejections(no, limit)).await
    }
}
