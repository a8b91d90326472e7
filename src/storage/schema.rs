//! Every redb table of the data file, declared once, with its key and value layout.
//!
//! Integers in keys are redb's fixed-width little-endian encodings inside tuples, which redb
//! orders numerically. Record values are a version byte followed by a body, `postcard` or a
//! layout of the record's own (see `records.rs`), so a record can change shape without a new
//! table.
//!
//! Version history (`SCHEMA_VERSION`; each step is a `migrate_to_vN` in `open.rs`):
//! - 1: every table below.
//! - 2: inbox records may be `EventRecord` version 2, and `META` may hold `dedup_redo_from`.
//!   Nothing is rewritten (version 1 records are still read); the number is there so that a
//!   release that reads only version 1 refuses the file before it reads a record it cannot.
//! - 3: `STATS`, the rollup of clicks, bindings and events, built from the inbox and the clicks
//!   by the migration; `REJECTIONS` and `REJECTION_COUNTS`, the rejection log; inbox records
//!   may be `EventRecord` version 3 (with the event's source).
//! - 4: `LINKS` and `LINKS_BY_SPACE`, the tracking links, empty.
//! - 5: `STATS` also holds day rows (`rollup::DAY_ROWS` in the dimension byte), each the sum of
//!   its day's hour rows, built by the migration from the hour rows, so that stats over a
//!   month read 31 rows per group instead of 744.
//! - 6: `ADMIN`, the admin page's password hash, empty until a password is set.
//! - 7: new click uids begin with the click's time (`click::new_uid`), and `META` may hold
//!   `fbclid_redo_from`: entries of `CLICKS_BY_FBCLID` may be only in the writer's memory
//!   (`fbclid_buffer.rs`) and are derived from `CLICKS` at the next open. Nothing is rewritten;
//!   the number makes an older release, which would not redo them, refuse the file.
//! - 8: events may name a Telegram user instead of a click. `TG_TOUCHES`, each user's first and
//!   last bound click, built by the migration from `CLICKS_BY_TG` and the clicks;
//!   `SPACE_SETTINGS`, empty (every space at the defaults); inbox records may be `EventRecord`
//!   version 4 (with the event's `tg_id` and how it was attributed); `DEDUP` may hold the
//!   Telegram id's rules (`domain::dedup`, rule bytes 5 to 7). Events are not rewritten.
//! - 9: conversions out. `DESTINATIONS`, `DELIVERY_STATES`, `DELIVERIES`, `DELIVERY_QUEUE` and
//!   `CLICK_HINTS`, all empty; `META` may hold `destination_seq`.
//! - 10: the marketer's numbers. `FIRST_DEPOSITS_BY_TG` and `FIRST_DEPOSITS_BY_CLICK`, built by
//!   the migration from the inbox in commit order (each deposit's user as its click is bound
//!   now), which rewrites each first deposit as `EventRecord` version 5 (marked first); inbox
//!   records may be version 5. `STATS` rows are `StatsRecord` version 2 (with first deposits),
//!   rebuilt from the inbox and the clicks, now per quarter of an hour instead of per hour (so
//!   that a day of any time zone is a whole number of rows) and with two more groupings, the
//!   ad (`utm_content`) and the ad set (`utm_term`) of the click's query. `COSTS`, empty. `SPACE_SETTINGS`
//!   may hold `time_zone`.
//! - 11: a campaign's drill-down. `STATS` also holds, per campaign, rows by its links (dimension
//!   5), ads (6) and ad sets (7), quarter and day rows like the others, each group the campaign
//!   and the link, ad or ad set together (`rollup::in_campaign`: the campaign's byte length,
//!   `:`, the campaign, NUL, the other name), so that one campaign's rows of a dimension are one
//!   range of keys. A campaign by day reads the campaign's own rows. The migration counts
//!   `STATS` again from the inbox and the clicks, writing it out in bounded batches.
//! - 12: `STATS` also holds block rows (`rollup::BLOCK_ROWS`, 0x40, in the dimension byte), each
//!   the sum of 32 whole UTC days of a group (block `n`: days `32n` to `32n + 31`), so a range of
//!   months reads a row per block rather than per day. The migration counts `STATS` again.
//! - 13: every event has an identity, its `event_id` (`domain::event::EventId`). Inbox records
//!   may be `EventRecord` version 6, which holds the 128 random bits of the event's id; the
//!   events already stored are not rewritten (a file of millions of events would be rewritten
//!   whole in one transaction). Instead the migration writes a random 128-bit salt into `META`
//!   (`event_id_salt_high`, `event_id_salt_low`; a new file gets one too), and an event without
//!   a stored id has `EventId::derived(salt, inbox_id)`: the same each time it is read, and
//!   unlike the `inbox_id` it stood for, different in every other data file, since each
//!   migration draws its own salt. A backup carries the salt, so a restored file shows the
//!   same ids for the same events, and new events have new random ones. Clicks may be
//!   `ClickRecord` version 2 (with the ad platforms' click ids `ttclid`, `gclid`, `gbraid`,
//!   `wbraid` and Meta's browser id `fbp`), and `CLICK_HINTS` may hold `ClickHintsRecord`
//!   version 2 (the address optional, and the `fbc` a prelander sent). Neither is rewritten.
//!   `DESTINATIONS` rows may be `DestinationRecord` version 2 (a destination's settings:
//!   Meta's event names and currency rates, a postback's statuses; a webhook's rotated secret
//!   and its grace; a pause and its reason); version 1 rows are read with the new fields empty.
//!   Telegram channels: `LINKS` records may be `LinkRecord` version 2 (with the channel of a
//!   channel link); `INVITE_POOL`, `INVITES`, `INVITES_HANDED`, `CHANNEL_MEMBERS`,
//!   `CHANNEL_STATES`, `TELEGRAM_OFFSETS` and `CHANNEL_STATS`, all empty.
//! - 14: costs per campaign, ad set and ad. `COSTS` (table `costs_by_ad`) replaces `COSTS_V10`
//!   (table `costs`): keyed by day, campaign, ad set and ad, each a `CostRecord` version 2 that
//!   says where the cost came from (set by hand or fetched from Meta). The migration moves each
//!   cost to ad set "" and ad "", set by hand, and deletes the old table. `SPACE_SETTINGS` may
//!   hold the settings `meta_ads_account`, `meta_ads_token` and `meta_graph_url` (stored by
//!   name like the others, so no new layout). `DESTINATIONS` rows may be `DestinationRecord`
//!   version 3 (a Google Ads destination, kind 5: its conversion names, the user name and the
//!   SHA-256 of the password Google Ads fetches its file with, and what its fetches came to);
//!   version 2 rows are read with those fields empty and are not rewritten. Kind 4 uses
//!   version 2's fields.
//! - 15: `COST_SUMS`, the sums of `COSTS` per campaign and for the whole space, by day and by
//!   blocks of 8 and 64 days, built by the migration from `COSTS`: stats by campaign or by day
//!   read a few sums per campaign instead of each ad's cost of each day.
//! - 16: `DEDUP` (table `dedup_by_generation`) replaces `DEDUP_V15` (table `dedup`): each key
//!   begins with the entry's generation, a run of about 256 Ki entries written one after
//!   another (`dedup_buffer.rs`), so new entries go to the leaves of the newest generation only,
//!   not to a random leaf of the whole table. The migration moves the entries in key order,
//!   256 Ki to a generation, and deletes the old table.
//! - 17: `DESTINATIONS` rows are `DestinationRecord` version 4: a destination's settings are one
//!   tagged value (its platform's settings, `platform::Target`) instead of a column per kind's
//!   field; a removed destination keeps none. The migration rewrites every row, of any version,
//!   as version 4.
//! - 18: landing pages of the marketer's own. `LINKS` records may be `LinkRecord` version 3
//!   (with the origins whose pages' views count); older ones read with none and are not
//!   rewritten. `LINK_VIEWS`, the views of each link per UTC day, empty.
//! - 19: `DESTINATIONS` rows may be `DestinationRecord` version 5: Meta's settings with its data
//!   processing options (Limited Data Use), Google Ads' with its file's template, the currency
//!   rates its values are converted by, and the conversions its last fetch left out. Version 4
//!   rows are read as they are (no data processing options; Google Ads on the legacy template)
//!   and are not rewritten.
//! - 20: split tests. `LINKS` records may be `LinkRecord` version 4 (a split link's targets and
//!   fallback), `CLICKS` records `ClickRecord` version 3 (the split link's target the click
//!   went to, its variant), and `STATS` holds rows by variant (`rollup::VARIANT_ROWS`, 8, in
//!   the dimension byte). Only split links and their clicks use them; nothing is rewritten.
//! - 21: a team on one tracker. `USERS`, the admin page's users (`UserRecord`); the migration
//!   moves the `admin` password hash out of `ADMIN` into user `admin`, an owner (no user when
//!   no password was set), and `ADMIN` keeps only the admin page's settings. `AUDIT`, the audit
//!   log, empty; `META` may hold `audit_seq`.
//! - 22: merged dedup runs. `DEDUP` keys may begin with a merged run's number (at or above
//!   `dedup_runs::MERGED`: its tier and the newest generation it covers), which replaces the
//!   generations it covers, and `META` may hold `dedup_merging`, the run a merge is writing. A
//!   look-up takes the entry with the highest inbox id of the runs it asks, not the first
//!   found. Nothing is rewritten: a file of version 21 has one run per generation, and its
//!   generations merge as new ones fill. A build before 22 would take a merged run for the
//!   newest generation, hence the version.
//! - 23: the second factor. `USERS` records may be `UserRecord` version 2 (a TOTP secret, the
//!   last step used, recovery codes' digests), and `ADMIN` may hold `require_second_factor`.
//!   Version 1 records are read as they are; nothing is rewritten.
//! - 24: currency rates kept per day. `CURRENCY_RATES`, each space's sets of rates by the day
//!   they took effect, typed and fetched from the ECB apart; the migration puts a space's
//!   `currency_rates` setting, where one was set, as its first typed set (day 0: every day
//!   before had those rates).
//!
//! What the file's bytes mean is fixed by more than this file: the dedup keys
//! (`domain::dedup`), the 128-bit index digests (`domain::digest`, `domain::click::fbclid_key`),
//! the record encodings (`records.rs`) and redb's encoding of the key tuples below. Changing any
//! of them is a schema version: a numbered migration that rewrites what is stored, and a fixture
//! file written before the change that a test opens. Nothing at run time notices such a change;
//! the golden tests beside each of them (exact bytes written out in the test, never computed by
//! the code under test) are what catch it, so a failing golden test is never "fixed" by pasting
//! the new bytes in.

use redb::{Key, TableDefinition, Value};

use crate::storage::error::StoreError;

/// The schema version this binary writes. A data file with a newer one is refused untouched.
pub const SCHEMA_VERSION: u64 = 24;

/// `name -> u64`: `schema_version`; `inbox_seq` (the last `inbox_id` handed out, global to the
/// file, so ids increase in commit order); `space_seq` (the last space number handed out).
pub const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub const META_SCHEMA_VERSION: &str = "schema_version";
pub const META_INBOX_SEQ: &str = "inbox_seq";
pub const META_SPACE_SEQ: &str = "space_seq";
/// The smallest `inbox_id` whose `DEDUP` entry may still be only in the writer's memory
/// (`dedup_buffer.rs`); opening the file derives the entries from there on again. Absent in
/// files written before the buffer, whose entries are all in `DEDUP`.
pub const META_DEDUP_REDO_FROM: &str = "dedup_redo_from";
/// The smallest click time (ms, as a uid begins with it) whose `CLICKS_BY_FBCLID` entry may
/// still be only in the writer's memory (`fbclid_buffer.rs`); opening the file derives the
/// entries of the clicks from then on again. Absent when every entry is in the table.
pub const META_FBCLID_REDO_FROM: &str = "fbclid_redo_from";
/// The number of the `DEDUP` run a merge is writing (`dedup_runs.rs`): until the commit that
/// removes it, the runs it merges are the ones look-ups ask. Absent when no merge is under way.
pub const META_DEDUP_MERGING: &str = "dedup_merging";

/// The two halves of the data file's event id salt (schema 13): a random 128-bit number, from
/// which the `event_id` of each event stored before events had one is derived
/// (`domain::event::EventId::derived`). Written once, by the migration; never changed.
pub const META_EVENT_ID_SALT_HIGH: &str = "event_id_salt_high";
pub const META_EVENT_ID_SALT_LOW: &str = "event_id_salt_low";

/// `space name -> SpaceRecord`. The space number (`u32`) is what every other key uses, so a
/// space's name costs its bytes once, not once per event.
pub const SPACES: TableDefinition<&str, &[u8]> = TableDefinition::new("spaces");

/// `SHA-256(credential) -> CredentialRecord`. Every credential ever issued, active, in grace,
/// expired or revoked; the keyring is built from it.
pub const CREDENTIALS: TableDefinition<&[u8; 32], &[u8]> = TableDefinition::new("credentials");

/// `(space, inbox_id) -> EventRecord`: the inbox, read per space in commit order by a range.
pub const INBOX: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("inbox");

/// `(generation, space, rule, 128-bit digest of the rule's fields) -> (inbox_id,
/// received_at_ms)`: the entry of a dedup key (`domain::dedup`), in the generation it was
/// written in (`dedup_buffer.rs`). The time lets the windowed rule decide without reading the
/// event. A windowed rule's key may have an expired entry in an older generation too; the
/// newest generation's is the key's. The newest entries may be in the writer's memory instead.
pub const DEDUP: TableDefinition<(u32, u32, u8, u128), (u64, u64)> =
    TableDefinition::new("dedup_by_generation");

/// `DEDUP` up to version 15: `(space, rule, digest) -> (inbox_id, received_at_ms)`, read only
/// by the migration to version 16.
pub const DEDUP_V15: TableDefinition<(u32, u8, u128), (u64, u64)> = TableDefinition::new("dedup");

/// `(space, uid) -> ClickRecord`, including its binding to a Telegram user, so that binding is a
/// compare-and-set on one record. A uid made since schema 7 begins with the click's time, so new
/// clicks are appended at the end of their space's range (`click::new_uid`).
pub const CLICKS: TableDefinition<(u32, &str), &[u8]> = TableDefinition::new("clicks");

/// `(space, 128-bit digest of fbclid) -> uid`: a back-fill with a known `fbclid` answers the
/// existing click. The newest entries may be in the writer's memory instead (`fbclid_buffer.rs`).
pub const CLICKS_BY_FBCLID: TableDefinition<(u32, u128), &str> =
    TableDefinition::new("clicks_by_fbclid");

/// `(space, tg_id, uid) -> ()`: the clicks bound to a Telegram user, read by a range on
/// `(space, tg_id)`.
pub const CLICKS_BY_TG: TableDefinition<(u32, u64, &str), ()> =
    TableDefinition::new("clicks_by_tg");

/// `(space, tg_id) -> TgTouchRecord`: the first and the last click bound to a Telegram user, by
/// binding time, kept by every binding: an event that names the user resolves in one read
/// (`storage/attribution.rs`). Derived from `CLICKS_BY_TG` and the clicks.
pub const TG_TOUCHES: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("tg_touches");

/// `space -> SpaceSettingsRecord`: a space's settings (`domain::settings`); a space without a
/// row has every setting at its default.
pub const SPACE_SETTINGS: TableDefinition<u32, &[u8]> = TableDefinition::new("space_settings");

// The marketer's numbers (schema 10): first deposits and costs.

/// `(space, tg_id) -> inbox_id`: each Telegram user's first deposit in the space
/// (`storage/first_deposit.rs`), or the first deposit through a click later bound to the user.
pub const FIRST_DEPOSITS_BY_TG: TableDefinition<(u32, u64), u64> =
    TableDefinition::new("first_deposits_by_tg");

/// `(space, uid) -> inbox_id`: each click's first deposit in the space.
pub const FIRST_DEPOSITS_BY_CLICK: TableDefinition<(u32, &str), u64> =
    TableDefinition::new("first_deposits_by_click");

/// `(space, day, campaign_name) -> CostRecord` version 1: costs by campaign, schemas 10 to 13.
/// Only `migrate_to_v14` opens it, to move its rows to [`COSTS`] and delete it.
pub const COSTS_V10: TableDefinition<(u32, u32, &str), &[u8]> = TableDefinition::new("costs");

/// `(space, day, campaign_name, adset_name, ad_name) -> CostRecord`: what a campaign, ad set or
/// ad spent on a calendar day of the space (`domain::cost`; days since 1970-01-01; "" for no ad
/// set or ad), and where the cost came from (schema 14). Day before campaign, so a range of
/// days is one range of keys, whatever the grouping.
pub const COSTS: TableDefinition<(u32, u32, &str, &str, &str), &[u8]> =
    TableDefinition::new("costs_by_ad");

/// `(space, level, period, campaign_name) -> CostSumRecord`: the sum of [`COSTS`] by currency
/// (`storage/cost_sums.rs`), kept by the writer with every change of a cost (schema 15). Level
/// 0, 1 and 2: a campaign's costs (ad sets and ads included) over one day, a block of 8 days
/// and a block of 64 days (period `n`: days `n * size` to `n * size + size - 1`); the same
/// levels with `cost_sums::WHOLE_SPACE` (0x80) added: every campaign's, with "" as the
/// campaign. Period before campaign, so a range of days is one range of keys at each level.
pub const COST_SUMS: TableDefinition<(u32, u8, u32, &str), &[u8]> =
    TableDefinition::new("cost_sums");

/// `(space, dimension, group, quarter) -> StatsRecord`: the counts of one group in one quarter of
/// an hour (quarters since the epoch; hours before schema 10; `domain::stats` says what counts
/// where). `dimension` is `Dimension::code`: 0 campaign, with
/// the campaign name (or "" for none) as group; 1 link, with the link slug; 2 the whole space,
/// with "" as group; 3 the ad (`utm_content` of the click's query) and 4 the ad set
/// (`utm_term`), "" for none (schema 10); 5, 6 and 7 a campaign's links, ads and ad sets, with
/// `rollup::in_campaign` of the two names as group, and no rows for events without a campaign
/// (schema 11). Keyed group first, so one group's quarters are one
/// range. The same with
/// `rollup::DAY_ROWS` (0x80) added to the dimension: the group's counts per UTC day (days since
/// the epoch), each the sum of the day's quarter rows; with `rollup::BLOCK_ROWS` (0x40), per
/// block of 32 UTC days (schema 12).
pub const STATS: TableDefinition<(u32, u8, &str, u32), &[u8]> = TableDefinition::new("stats");

/// `(space, slot) -> RejectionRecord`: a ring of the space's last `KEPT_PER_SPACE` rejections;
/// rejection number `n` (from `REJECTION_COUNTS`) goes to slot `n % KEPT_PER_SPACE`, so the log
/// cannot outgrow its bound.
pub const REJECTIONS: TableDefinition<(u32, u32), &[u8]> = TableDefinition::new("rejections");

/// `space -> u64`: how many rejections the space has had, ever; the next one's number.
pub const REJECTION_COUNTS: TableDefinition<u32, u64> = TableDefinition::new("rejection_counts");

/// `slug -> LinkRecord`: every tracking link, deleted ones included (a deleted link's slug stays
/// taken, so an old ad never leads somewhere new). Keyed by slug alone: slugs are unique in the
/// file, so the public `/l/<slug>` needs no credential.
pub const LINKS: TableDefinition<&str, &[u8]> = TableDefinition::new("links");

/// `(space, slug) -> ()`: a space's links, read by a range on the space.
pub const LINKS_BY_SPACE: TableDefinition<(u32, &str), ()> = TableDefinition::new("links_by_space");

/// `(space, slug, day) -> views`: the views (`POST /l/<slug>/view`) of a link of the space on a
/// UTC day (days since 1970-01-01), for its views and the view-to-click rate.
pub const LINK_VIEWS: TableDefinition<(u32, &str, u32), u64> = TableDefinition::new("link_views");

/// `(space, source, day) -> rates`: a space's sets of currency rates, each from the day of the
/// space's zone it took effect (days since 1970-01-01); `source` 0 typed (the text of its
/// `currency_rates`, `EUR=1.08 USD, XTR=0.013 USD`), 1 the ECB's reference rates per euro
/// (`JPY=162.5, USD=1.0812`; `domain::rate_history::RateSource`).
pub const CURRENCY_RATES: TableDefinition<(u32, u8, u32), &str> =
    TableDefinition::new("currency_rates");

/// `name -> bytes`: the admin page's settings. Before version 21, `password` held the argon2id
/// hash of the `admin` user's password, which version 21 moved into `USERS`.
pub const ADMIN: TableDefinition<&str, &[u8]> = TableDefinition::new("admin");
pub const ADMIN_PASSWORD: &str = "password";
/// `[1]` while an owner requires every user's second factor (schema 23); absent or `[0]`: not.
pub const ADMIN_REQUIRE_SECOND_FACTOR: &str = "require_second_factor";

/// `name -> UserRecord`: the admin page's users (schema 21), each with its role, its spaces,
/// its password's argon2id PHC string and an invitation's SHA-256, never a password or a token.
pub const USERS: TableDefinition<&str, &[u8]> = TableDefinition::new("users");

/// `seq -> AuditRecord`: the audit log (schema 21), in the order entries were written (each
/// entry's number the next of `META`'s `audit_seq`), kept [`crate::domain::audit::KEPT_MS`].
pub const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
pub const META_AUDIT_SEQ: &str = "audit_seq";

// --- Conversions out (schema 9): destinations, their deliveries, and the visitors' hints. ---

/// The last destination number handed out (`META`), global to the file.
pub const META_DESTINATION_SEQ: &str = "destination_seq";

/// `destination number -> DestinationRecord`: every destination, removed ones included (their
/// deliveries still name them). A space's live destinations are few; they are read by a scan
/// and kept in memory (`platform::Directory`).
pub const DESTINATIONS: TableDefinition<u32, &[u8]> = TableDefinition::new("destinations");

/// `destination number -> DeliveryStateRecord`: its counts per state, how far its pending
/// deliveries have been sent, its last failure. Updated once per batch, as the stats rollup is.
pub const DELIVERY_STATES: TableDefinition<u32, &[u8]> = TableDefinition::new("delivery_states");

/// `(destination, inbox_id) -> DeliveryRecord`: one delivery of one event. Written in the
/// event's own transaction, as an empty value (pending, not tried); keyed destination first so
/// each event's delivery is appended at the end of its destination's range, and the pending ones
/// are the range after `DeliveryStateRecord::sent_through`.
pub const DELIVERIES: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("deliveries");

/// `(destination, due_ms, inbox_id) -> ()`: the deliveries that wait for a time: `retrying` ones
/// by their next attempt, `dead` ones at `u64::MAX` (due never, until a retry is asked for).
pub const DELIVERY_QUEUE: TableDefinition<(u32, u64, u64), ()> =
    TableDefinition::new("delivery_queue");

/// `(space, uid) -> ClickHintsRecord`: the visitor's address and user agent of a link click (or
/// the address, user agent and `fbc` a prelander sent with `POST /clicks`) in a space with
/// `meta_client_hints` on, removed by retention 7 days after the click. Keyed as
/// `CLICKS` is, so new ones are appended and the old ones are each space's first.
pub const CLICK_HINTS: TableDefinition<(u32, &str), &[u8]> = TableDefinition::new("click_hints");

// --- Telegram channels (schema 16): invite links made ahead, members, the bot's updates. ---

/// `(slug, number) -> invite link`: a channel link's invite links made ahead and not yet handed
/// out, in the order they were made (the number from its `CHANNEL_STATES` row). A visit takes
/// the first, in the click's own write transaction.
pub const INVITE_POOL: TableDefinition<(&str, u64), &str> = TableDefinition::new("invite_pool");

/// `invite link -> InviteRecord`: every invite link the tracker made, with its link, the click
/// it was handed to, and the user who joined through it: what an update's `invite_link` is
/// looked up in.
pub const INVITES: TableDefinition<&str, &[u8]> = TableDefinition::new("invites");

/// `(handed_at_ms, invite link) -> ()`: invite links handed out and not yet used or revoked, by
/// the time they were handed out, so those older than `invite_ttl` are one range.
pub const INVITES_HANDED: TableDefinition<(u64, &str), ()> = TableDefinition::new("invites_handed");

/// `(space, chat_id, tg_id) -> MemberRecord`: each user's membership of a channel as the
/// tracker saw it (joined through which link, left), so a join is counted once per user and
/// channel and a leave is counted against the link the user joined through.
pub const CHANNEL_MEMBERS: TableDefinition<(u32, i64, u64), &[u8]> =
    TableDefinition::new("channel_members");

/// `slug -> ChannelStateRecord`: a channel link's counts (invite links made, handed out, used;
/// fallbacks, joins, leaves) and the number of its next invite link.
pub const CHANNEL_STATES: TableDefinition<&str, &[u8]> = TableDefinition::new("channel_states");

/// `space -> update_id`: the next update of the space's bot to read (`getUpdates`' offset),
/// written in the transaction that commits the effects of the updates before it.
pub const TELEGRAM_OFFSETS: TableDefinition<u32, u64> = TableDefinition::new("telegram_offsets");

/// `(space, dimension, group, quarter) -> (joins, leaves)`: channel joins and leaves per group
/// and quarter of an hour, as `STATS` keys its rows (dimension 0 campaign, 1 link, 2 the whole
/// space with "" as group, 5 a link within its campaign as `rollup::in_campaign` names it), for
/// stats by campaign, link and day in the space's zone and a campaign's drill-down.
pub const CHANNEL_STATS: TableDefinition<(u32, u8, &str, u32), (u64, u64)> =
    TableDefinition::new("channel_stats");

/// Something done to every table of the file alike (a backup copies each, a check reads each).
pub trait TableVisitor {
    fn visit<K: Key + 'static, V: Value + 'static>(
        &mut self,
        table: TableDefinition<K, V>,
    ) -> Result<(), StoreError>;
}

/// Visits every table declared above. A test compares this list with the tables a new data file
/// holds, so a table added above and not here fails it, instead of going missing from backups.
pub fn visit_every_table(v: &mut impl TableVisitor) -> Result<(), StoreError> {
    v.visit(META)?;
    v.visit(SPACES)?;
    v.visit(CREDENTIALS)?;
    v.visit(INBOX)?;
    v.visit(DEDUP)?;
    v.visit(CLICKS)?;
    v.visit(CLICKS_BY_FBCLID)?;
    v.visit(CLICKS_BY_TG)?;
    v.visit(TG_TOUCHES)?;
    v.visit(SPACE_SETTINGS)?;
    v.visit(STATS)?;
    v.visit(REJECTIONS)?;
    v.visit(REJECTION_COUNTS)?;
    v.visit(LINKS)?;
    v.visit(LINKS_BY_SPACE)?;
    v.visit(LINK_VIEWS)?;
    v.visit(ADMIN)?;
    v.visit(USERS)?;
    v.visit(AUDIT)?;
    v.visit(DESTINATIONS)?;
    v.visit(DELIVERY_STATES)?;
    v.visit(DELIVERIES)?;
    v.visit(DELIVERY_QUEUE)?;
    v.visit(CLICK_HINTS)?;
    v.visit(FIRST_DEPOSITS_BY_TG)?;
    v.visit(FIRST_DEPOSITS_BY_CLICK)?;
    v.visit(COSTS)?;
    v.visit(COST_SUMS)?;
    v.visit(INVITE_POOL)?;
    v.visit(INVITES)?;
    v.visit(INVITES_HANDED)?;
    v.visit(CHANNEL_MEMBERS)?;
    v.visit(CHANNEL_STATES)?;
    v.visit(TELEGRAM_OFFSETS)?;
    v.visit(CHANNEL_STATS)?;
    v.visit(CURRENCY_RATES)?;
    Ok(())
}

/// The rows of every table in the snapshot `txn`: what `tracker backup` copies and `tracker
/// check` reports, counted in one place so the two say the same number for the same file.
pub fn count_rows(txn: &redb::ReadTransaction) -> Result<u64, StoreError> {
    struct Count<'a> {
        txn: &'a redb::ReadTransaction,
        rows: u64,
    }
    impl TableVisitor for Count<'_> {
        fn visit<K: Key + 'static, V: Value + 'static>(
            &mut self,
            table: TableDefinition<K, V>,
        ) -> Result<(), StoreError> {
            self.rows += redb::ReadableTableMetadata::len(&self.txn.open_table(table)?)?;
            Ok(())
        }
    }
    let mut count = Count { txn, rows: 0 };
    visit_every_table(&mut count)?;
    Ok(count.rows)
}

#[cfg(test)]
mod every_table {
    use std::collections::BTreeSet;

    use redb::{ReadableDatabase, TableHandle};

    use super::*;

    struct Names(BTreeSet<String>);
    impl TableVisitor for Names {
        fn visit<K: Key + 'static, V: Value + 'static>(
            &mut self,
            table: TableDefinition<K, V>,
        ) -> Result<(), StoreError> {
            assert!(
                self.0.insert(table.name().to_owned()),
                "{} twice",
                table.name()
            );
            Ok(())
        }
    }

    #[test]
    fn the_list_is_every_table_a_new_file_has() {
        let (_dir, db) = crate::storage::engine::open::test_database();
        let in_file: BTreeSet<String> = db
            .begin_read()
            .unwrap()
            .list_tables()
            .unwrap()
            .map(|t| t.name().to_owned())
            .collect();
        let mut listed = Names(BTreeSet::new());
        visit_every_table(&mut listed).unwrap();
        assert_eq!(listed.0, in_file);
    }
}

#[cfg(test)]
mod tests {
    use redb::{Key, TableDefinition, TableHandle as _, Value};

    use super::*;

    /// A table's name, its key's redb type name (stored in the file and checked when the table
    /// is opened), and the bytes of `key`, as redb stores them.
    fn key_layout<K: Key + 'static, V: Value + 'static>(
        table: TableDefinition<K, V>,
        key: &K::SelfType<'_>,
    ) -> (String, String, Vec<u8>) {
        (
            table.name().to_owned(),
            K::type_name().name().to_owned(),
            K::as_bytes(key).as_ref().to_vec(),
        )
    }

    fn expect(name: &str, type_name: &str, bytes: &[u8]) -> (String, String, Vec<u8>) {
        (name.to_owned(), type_name.to_owned(), bytes.to_vec())
    }

    /// Pins the stored key bytes of every tuple-keyed table, so a redb upgrade that encodes
    /// tuples differently (another byte order, a length prefix on the last string) fails here,
    /// not on a user's file. Keys go through the table definitions above, so a change of a
    /// table's key type fails here too. Integers are little-endian at fixed width; a string in
    /// last place runs to the end of the key without a length. The values differ byte by byte so
    /// that the byte order shows.
    #[test]
    fn tuple_key_bytes_are_stable() {
        const DIGEST: u128 = 0x0102_0304_0506_0708_090a_0b0c_0d0e_0f10;
        #[rustfmt::skip]
        let dedup = [
            2, 1, 0, 0, // generation
            7, 0, 0, 0, // space
            3, // rule
            16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, // digest
        ];
        assert_eq!(
            key_layout(DEDUP, &(258, 7, 3, DIGEST)),
            expect("dedup_by_generation", "(u32,u32,u8,u128)", &dedup)
        );
        // A click's key, in `CLICKS` and `CLICK_HINTS` alike.
        #[rustfmt::skip]
        let click = [
            7, 0, 0, 0, // space
            b'u', b'i', b'd', b'-', b'1', // uid, no length
        ];
        assert_eq!(
            key_layout(CLICKS, &(7, "uid-1")),
            expect("clicks", "(u32,&str)", &click)
        );
        #[rustfmt::skip]
        let by_fbclid = [
            7, 0, 0, 0, // space
            16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, // fbclid_key
        ];
        assert_eq!(
            key_layout(CLICKS_BY_FBCLID, &(7, DIGEST)),
            expect("clicks_by_fbclid", "(u32,u128)", &by_fbclid)
        );
        #[rustfmt::skip]
        let by_tg = [
            7, 0, 0, 0, // space
            255, 255, 255, 255, 255, 255, 31, 0, // tg_id: 2^53 - 1
            b'u', b'i', b'd', b'-', b'1', // uid, no length
        ];
        assert_eq!(
            key_layout(CLICKS_BY_TG, &(7, crate::domain::click::MAX_TG_ID, "uid-1")),
            expect("clicks_by_tg", "(u32,u64,&str)", &by_tg)
        );
        #[rustfmt::skip]
        let touches = [
            7, 0, 0, 0, // space
            255, 255, 255, 255, 255, 255, 31, 0, // tg_id: 2^53 - 1
        ];
        assert_eq!(
            key_layout(TG_TOUCHES, &(7, crate::domain::click::MAX_TG_ID)),
            expect("tg_touches", "(u32,u64)", &touches)
        );
        assert_eq!(
            key_layout(SPACE_SETTINGS, &0x0102_0304),
            expect("space_settings", "u32", &[4, 3, 2, 1])
        );
        #[rustfmt::skip]
        let delivery = [
            7, 0, 0, 0, // destination
            8, 7, 6, 5, 4, 3, 2, 1, // inbox_id
        ];
        assert_eq!(
            key_layout(DELIVERIES, &(7, 0x0102_0304_0506_0708)),
            expect("deliveries", "(u32,u64)", &delivery)
        );
        #[rustfmt::skip]
        let queued = [
            7, 0, 0, 0, // destination
            255, 255, 255, 255, 255, 255, 255, 255, // due_ms: never (dead)
            8, 7, 6, 5, 4, 3, 2, 1, // inbox_id
        ];
        assert_eq!(
            key_layout(DELIVERY_QUEUE, &(7, u64::MAX, 0x0102_0304_0506_0708)),
            expect("delivery_queue", "(u32,u64,u64)", &queued)
        );
        assert_eq!(
            key_layout(CLICK_HINTS, &(7, "uid-1")),
            expect("click_hints", "(u32,&str)", &click)
        );
        #[rustfmt::skip]
        let inbox = [
            7, 0, 0, 0, // space
            8, 7, 6, 5, 4, 3, 2, 1, // inbox_id
        ];
        assert_eq!(
            key_layout(INBOX, &(7, 0x0102_0304_0506_0708)),
            expect("inbox", "(u32,u64)", &inbox)
        );
        #[rustfmt::skip]
        let rates = [
            7, 0, 0, 0, // space
            1, // source: the ECB
            4, 3, 2, 1, // day
        ];
        assert_eq!(
            key_layout(CURRENCY_RATES, &(7, 1, 0x0102_0304)),
            expect("currency_rates", "(u32,u8,u32)", &rates)
        );
    }

    /// The one tuple value: a `DEDUP` entry's `(inbox_id, received_at_ms)`.
    #[test]
    fn dedup_value_bytes_are_stable() {
        #[rustfmt::skip]
        let value = [
            8, 7, 6, 5, 4, 3, 2, 1, // inbox_id
            1, 0, 0, 0, 0, 0, 0, 0, // received_at_ms
        ];
        assert_eq!(
            <(u64, u64) as Value>::as_bytes(&(0x0102_0304_0506_0708, 1)),
            value
        );
        assert_eq!(<(u64, u64) as Value>::type_name().name(), "(u64,u64)");
    }
}
