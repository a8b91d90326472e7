//! Tracking links in the data file, for the writer (methods of [`Txn`]): creating one, deleting
//! one (its slug stays taken), and a visit of `/l/<slug>`, which becomes a click of the link's
//! space. A batch looks each slug up once (`link_spaces`) and keeps the links it changed
//! (`changed_links`), so a visit after a change in the same batch sees it. For the readers: a
//! space's links with their clicks ([`Snapshot::links`]), and every link, which the server
//! keeps in memory (`all_links`).

use redb::{ReadTransaction, ReadableTable};

use crate::domain::click::NewClick;
use crate::domain::link::{Destination, Link, MAX_LINKS_PER_SPACE, Mode, NewLink};
use crate::domain::outcome::ClickOutcome;
use crate::domain::split::{Split, TargetView, WeightedTarget};
use crate::domain::stats::{Counts, Dimension};
use crate::error::{Code, Error};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::records::{self, ChannelRecord, LinkRecord, SplitRecord, SplitTargetRecord};
use crate::storage::rollup;
use crate::storage::schema::{LINK_VIEWS, LINKS, LINKS_BY_SPACE, STATS};

/// A UTC day, as `LINK_VIEWS` keys it: days since 1970-01-01.
#[must_use]
pub fn utc_day(at_ms: u64) -> u32 {
    u32::try_from(at_ms / 86_400_000).unwrap_or(u32::MAX)
}

impl Txn<'_> {
    /// Stores a new tracking link; a slug taken in any space is refused without saying which.
    pub fn create_link(
        &mut self,
        space: u32,
        link: &NewLink,
        now_ms: u64,
    ) -> Result<Link, StoreError> {
        if self.links.open()?.get(link.slug.as_str())?.is_some() {
            return Err(StoreError::Refused(Error::field(
                Code::Conflict,
                "slug",
                format!("the slug {:?} is taken; choose another", link.slug),
            )));
        }
        let created_now = self
            .changed_links
            .iter()
            .filter(|l| l.space == space && !l.deleted)
            .count();
        if self.links_directory.count(space) + created_now >= MAX_LINKS_PER_SPACE {
            return Err(StoreError::Refused(Error::new(
                Code::Conflict,
                format!(
                    "this space holds {MAX_LINKS_PER_SPACE} links, the most a space may hold \
                     (deleted links count: each keeps its slug); use another space"
                ),
            )));
        }
        let (bot, target, channel) = match &link.destination {
            Destination::Bot(b) => (Some(b.clone()), None, None),
            Destination::Target(t) => (None, Some(t.clone()), None),
            Destination::Channel(c) => (
                None,
                None,
                Some(ChannelRecord {
                    chat: c.chat.clone(),
                    chat_id: c.chat_id,
                    title: c.title.clone(),
                    join_requests: c.join_requests,
                    fallback: c.fallback.clone(),
                }),
            ),
        };
        let record = LinkRecord {
            space_no: space,
            bot,
            target,
            campaign_name: link.campaign_name.clone(),
            mode: match link.mode {
                Mode::Redirect => 0,
                Mode::Page => 1,
            },
            created_at_ms: now_ms,
            deleted_at_ms: None,
            channel,
            allowed_origins: link.allowed_origins.clone(),
            split: link.split.as_ref().map(split_record),
        };
        self.links
            .open()?
            .insert(link.slug.as_str(), records::encode(&record).as_slice())?;
        self.links_by_space
            .open()?
            .insert((space, link.slug.as_str()), ())?;
        self.link_spaces.remove(link.slug.as_str());
        let created = link_of(&link.slug, record)?;
        self.changed_links.push(created.clone());
        Ok(created)
    }

    /// Deletes a link of `space`: its public address answers `410` from now on, and its slug
    /// stays taken. Deleting a deleted link again is a harmless retry.
    pub fn delete_link(&mut self, space: u32, slug: &str, now_ms: u64) -> Result<(), StoreError> {
        let mut record: LinkRecord = match self.links.open()?.get(slug)? {
            Some(bytes) => records::decode(bytes.value())?,
            None => return Err(no_link(slug)),
        };
        if record.space_no != space {
            return Err(no_link(slug));
        }
        if record.deleted_at_ms.is_none() {
            record.deleted_at_ms = Some(now_ms);
            self.links
                .open()?
                .insert(slug, records::encode(&record).as_slice())?;
            self.link_spaces.remove(slug);
            self.changed_links.push(link_of(slug, record)?);
        }
        Ok(())
    }

    /// A visit of `/l/<slug>`: the click, if the link still exists when the batch runs; for a
    /// channel link (`channel`), also the invite link of its pool the click takes, if one is
    /// left (`channels.rs`), in the same transaction, so it is handed out once.
    pub fn link_click(
        &mut self,
        slug: &str,
        click: NewClick,
        channel: bool,
    ) -> Result<(ClickOutcome, Option<String>), StoreError> {
        let space = if let Some(space) = self.link_spaces.get(slug) {
            *space
        } else {
            let space = match self.links.open()?.get(slug)? {
                Some(bytes) => {
                    let record: LinkRecord = records::decode(bytes.value())?;
                    record.deleted_at_ms.is_none().then_some(record.space_no)
                }
                None => None,
            };
            self.link_spaces.insert(slug.into(), space);
            space
        };
        let Some(space) = space else {
            return Err(no_link(slug));
        };
        let clicked_at_ms = click.clicked_at_ms;
        let outcome = self.back_fill_click(space, click)?;
        let invite = if channel {
            self.take_invite(slug, &outcome.uid, clicked_at_ms)?
        } else {
            None
        };
        Ok((outcome, invite))
    }
}

impl Txn<'_> {
    /// A view of a landing page with the link's script (`POST /l/<slug>/view`): one more on the
    /// link's UTC day of `viewed_at_ms`. The caller found the link live in the directory; a
    /// view that races its deletion is counted, harmlessly, on a link no one lists.
    pub fn link_view(
        &mut self,
        space: u32,
        slug: &str,
        viewed_at_ms: u64,
    ) -> Result<(), StoreError> {
        let mut views = self.transaction.open_table(LINK_VIEWS)?;
        let key = (space, slug, utc_day(viewed_at_ms));
        let before = views.get(key)?.map_or(0, |v| v.value());
        views.insert(key, before.saturating_add(1))?;
        Ok(())
    }
}

fn no_link(slug: &str) -> StoreError {
    StoreError::Refused(Error::new(
        Code::NotFound,
        format!("no link {slug:?} in this space"),
    ))
}

impl Snapshot {
    /// `space`'s links that are not deleted, oldest first, each with its clicks and bound clicks
    /// (all time, from the stats rollup: every click whose `link_slug` is the slug).
    pub fn links(&self, space: u32) -> Result<Vec<(Link, u64, u64)>, StoreError> {
        let table = self.txn.open_table(LINKS)?;
        let stats = self.txn.open_table(STATS)?;
        let code = Dimension::Link.code();
        let mut out = Vec::new();
        for entry in self
            .txn
            .open_table(LINKS_BY_SPACE)?
            .range((space, "")..=(space, "\u{10ffff}"))?
        {
            let (key, _) = entry?;
            let slug = key.value().1;
            let Some(bytes) = table.get(slug)? else {
                return Err(StoreError::Corrupt(format!(
                    "links_by_space names {slug:?}, which has no link"
                )));
            };
            let link = link_of(slug, records::decode(bytes.value())?)?;
            if link.deleted {
                continue;
            }
            let mut total = Counts::default();
            for row in stats.range((space, code, slug, 0)..=(space, code, slug, u32::MAX))? {
                let (_, bytes) = row?;
                total
                    .add(&rollup::counts_in(bytes.value())?)
                    .map_err(StoreError::Corrupt)?;
            }
            out.push((link, total.clicks, total.bound_clicks));
        }
        out.sort_by_key(|(l, _, _)| l.created_at_ms);
        Ok(out)
    }
}

impl Snapshot {
    /// The views of `space`'s links on the UTC days `from_day..=to_day`, by slug and day, in
    /// key order.
    pub fn link_views(
        &self,
        space: u32,
        from_day: u32,
        to_day: u32,
    ) -> Result<Vec<(String, u32, u64)>, StoreError> {
        let mut out = Vec::new();
        for entry in self
            .txn
            .open_table(LINK_VIEWS)?
            .range((space, "", 0)..=(space, "\u{10ffff}", u32::MAX))?
        {
            let (key, views) = entry?;
            let (_, slug, day) = key.value();
            if (from_day..=to_day).contains(&day) {
                out.push((slug.to_owned(), day, views.value()));
            }
        }
        Ok(out)
    }
}

impl Snapshot {
    /// The campaign of each of `space`'s links that has one (deleted links too: their views
    /// stay counted), by slug.
    pub fn link_campaigns(
        &self,
        space: u32,
    ) -> Result<std::collections::HashMap<String, String>, StoreError> {
        let table = self.txn.open_table(LINKS)?;
        let mut out = std::collections::HashMap::new();
        for entry in self
            .txn
            .open_table(LINKS_BY_SPACE)?
            .range((space, "")..=(space, "\u{10ffff}"))?
        {
            let (key, _) = entry?;
            let slug = key.value().1;
            if let Some(bytes) = table.get(slug)? {
                let record: LinkRecord = records::decode(bytes.value())?;
                if let Some(campaign) = record.campaign_name {
                    out.insert(slug.to_owned(), campaign);
                }
            }
        }
        Ok(out)
    }

    /// A split link's counts by variant, all time: the sum of its block rows by variant
    /// (`rollup::VARIANT_ROWS`), each variant's a range of keys of its own.
    pub fn variant_counts(&self, space: u32, slug: &str) -> Result<Vec<(u8, Counts)>, StoreError> {
        let stats = self.txn.open_table(STATS)?;
        let (start, end) = rollup::in_campaign_range(slug);
        let code = rollup::VARIANT_ROWS | rollup::BLOCK_ROWS;
        let mut out: Vec<(u8, Counts)> = Vec::new();
        for row in stats.range((space, code, start.as_str(), 0)..(space, code, end.as_str(), 0))? {
            let (key, bytes) = row?;
            let group = key.value().2;
            let variant = group[start.len()..]
                .parse::<u8>()
                .map_err(|_| StoreError::Corrupt(format!("a row by variant of {group:?}")))?;
            if out.last().is_none_or(|(v, _)| *v != variant) {
                out.push((variant, Counts::default()));
            }
            if let Some((_, total)) = out.last_mut() {
                total
                    .add(&rollup::counts_in(bytes.value())?)
                    .map_err(StoreError::Corrupt)?;
            }
        }
        Ok(out)
    }
}

/// A stored link as the domain sees it.
pub(crate) fn link_of(slug: &str, r: LinkRecord) -> Result<Link, StoreError> {
    let destination = match (r.bot, r.target, r.channel) {
        (Some(bot), None, None) => Destination::Bot(bot),
        (None, Some(target), None) => Destination::Target(target),
        (None, None, Some(c)) => Destination::Channel(crate::domain::channel::Channel {
            chat: c.chat,
            chat_id: c.chat_id,
            title: c.title,
            join_requests: c.join_requests,
            fallback: c.fallback,
        }),
        _ => {
            return Err(StoreError::Corrupt(format!(
                "link {slug:?} has not exactly one of a bot, a target and a channel"
            )));
        }
    };
    Ok(Link {
        space: r.space_no,
        slug: slug.to_owned(),
        destination,
        campaign_name: r.campaign_name,
        mode: if r.mode == 1 {
            Mode::Page
        } else {
            Mode::Redirect
        },
        created_at_ms: r.created_at_ms,
        deleted: r.deleted_at_ms.is_some(),
        allowed_origins: r.allowed_origins,
        split: r.split.map(|s| split_of(slug, s)).transpose()?,
    })
}

fn split_record(split: &Split) -> SplitRecord {
    let target = |destination: &Destination, weight| {
        let (bot, target) = TargetView::of(destination).bot_and_target();
        SplitTargetRecord {
            bot,
            target,
            weight,
        }
    };
    SplitRecord {
        targets: split
            .targets
            .iter()
            .map(|t| target(&t.destination, t.weight))
            .collect(),
        fallback: split.fallback.as_ref().map(|d| target(d, 0)),
    }
}

fn split_of(slug: &str, r: SplitRecord) -> Result<Split, StoreError> {
    let destination = |t: SplitTargetRecord| match (t.bot, t.target) {
        (Some(bot), None) => Ok(Destination::Bot(bot)),
        (None, Some(target)) => Ok(Destination::Target(target)),
        _ => Err(StoreError::Corrupt(format!(
            "a target of link {slug:?} has not exactly one of a bot and a target"
        ))),
    };
    Ok(Split {
        targets: r
            .targets
            .into_iter()
            .map(|t| {
                let weight = t.weight;
                destination(t).map(|destination| WeightedTarget {
                    destination,
                    weight,
                })
            })
            .collect::<Result<_, _>>()?,
        fallback: r.fallback.map(destination).transpose()?,
    })
}

/// Every link of the file, deleted ones included: what the public path looks slugs up in.
pub fn all_links(txn: &ReadTransaction) -> Result<Vec<Link>, StoreError> {
    let mut links = Vec::new();
    for entry in txn.open_table(LINKS)?.iter()? {
        let (slug, bytes) = entry?;
        links.push(link_of(slug.value(), records::decode(bytes.value())?)?);
    }
    Ok(links)
}

#[cfg(test)]
mod tests {
    use crate::domain::link::{Destination, Mode, NewLink};
    use crate::storage::ops::tests::{Bare, visit};

    fn link(slug: &str) -> NewLink {
        NewLink {
            slug: slug.to_owned(),
            destination: Destination::Bot("a_bot".to_owned()),
            campaign_name: None,
            mode: Mode::Redirect,
            allowed_origins: Vec::new(),
            split: None,
        }
    }

    /// Visits in one batch share one look-up of their link; a change to the link in the same
    /// batch must still be seen by the visits after it.
    #[test]
    fn a_visit_sees_a_link_created_or_deleted_earlier_in_its_batch() {
        let bare = Bare::new();
        let txn = bare.db.begin_write().unwrap();
        let mut t = bare.open(&txn);
        assert!(t.link_click("a", visit(), false).is_err());
        t.create_link(1, &link("a"), 1).unwrap();
        assert!(t.link_click("a", visit(), false).unwrap().0.created);
        assert!(t.link_click("a", visit(), false).unwrap().0.created);
        t.delete_link(1, "a", 2).unwrap();
        assert!(t.link_click("a", visit(), false).is_err());
    }
}
