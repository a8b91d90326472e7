//! `tracker`: a self-hosted click and conversion tracker. One process, one redb data file.
//!
//! # Layout
//!
//! Each part has one folder; the top of `src/` holds only what every part uses.
//!
//! - [`router`]: the main listener's router. `router/table.rs` is the one table of its
//!   endpoints (method, path, credential, handler, `OpenAPI` operation), from which the
//!   dispatch, the `/metrics` labels (handed to [`metrics::Metrics`] at start) and
//!   `/openapi.json` come. It names both the API's handlers and the admin page, so it sits
//!   above both.
//! - [`http`]: the API's handlers, a file per resource (`ingest.rs`: events, clicks,
//!   bindings; `health.rs`; `links.rs`; ...), and the access and rejection log every answer
//!   leaves through (`access.rs`). Never touches redb.
//! - [`web`]: the admin page under `/admin/`: `web/routes.rs` is the one table of its paths
//!   (method, path, body, menu label, handler), from which its router, the space's menu and
//!   `docs/admin.md`'s list of pages come; a file per page in `web/pages/` (its template struct
//!   and handler together) that calls the same [`app::App`] methods as the API; what the router
//!   and the pages share (the session, forms, cookies) in `web/context.rs`.
//! - [`surface`]: what both of them share, below them: a request taken apart ([`surface::Call`]),
//!   the client's address the connection layer puts on it, and the one mapping from errors to
//!   answers (`surface/respond.rs`).
//! - [`app`]: the operations every way in shares, as methods of [`app::App`], a file per
//!   resource: who a request acts for, with the rate limits (`app/auth.rs`); events, clicks
//!   and bindings (`app/events.rs`); links (`app/links.rs`); the feed, stats and rejections
//!   (`app/reads.rs`); costs (`app/costs.rs`); a space's settings (`app/settings.rs`); spaces,
//!   credentials, the admin password and backups (`app/spaces.rs`); destinations
//!   (`app/destinations.rs`). `app/mod.rs` is the [`app::App`] type and its making.
//! - [`control`]: how the command line reaches a running server: one typed
//!   [`control::Request`] (the command line's subcommands themselves) and its
//!   [`control::Answer`], over a Unix socket beside the data file, or run on the file directly
//!   when no server has it open.
//! - [`cli`]: the command line: the flags and dispatch (`cli/mod.rs`), a file per command,
//!   printing in `output.rs` (and each answer's text matched in `answer.rs`), prompts in
//!   `prompt.rs`.
//! - [`server`]: the serve loop (`server/mod.rs`), which starts the background [`workers`] in
//!   one place and stops them at shutdown, and each client connection with its timeouts and
//!   limits (`server/connection.rs`).
//! - [`workers`]: what runs in the background while the server serves, under one roof: each
//!   started and stopped the same way ([`workers::Worker`], [`workers::Workers`]), each handed
//!   a narrow handle (store, clock, counters, settings, what it reports) rather than the
//!   application, so that the application can read what they report.
//!   - the senders of conversions out (`workers/delivery.rs`, which runs [`delivery`]);
//!   - links that lead to a Telegram channel, through the space's bot (`workers/telegram/`): a
//!     reader of the bot's updates per space (`updates.rs`: joins, leaves and join requests,
//!     each run committed before it is acknowledged), and the loop that keeps each channel
//!     link's pool of invite links made ahead and revokes unused ones (`pool.rs`); the Bot API
//!     client (`api.rs`), on the [`outbound`] client. Handed [`workers::telegram::Shared`]; what
//!     it reports ([`workers::telegram::Status`]) the application reads;
//!   - spend fetched from Meta's insights into costs by campaign, ad set and ad
//!     (`workers/spend/`): every hour the last 3 days, every day the last 28, for each space
//!     with a `meta_ads_account` and token, replacing those days' costs that came from Meta
//!     (`mod.rs`, the one fetch every way in calls); the insights client, on the [`outbound`]
//!     client (`insights.rs`). Handed [`workers::spend::Shared`]; what it reports
//!     ([`workers::spend::Status`]) the application reads;
//!   - the ECB's reference rates, fetched once a day for each space with an `ecb_rates_url`
//!     and kept as that day's rates for its stats (`workers/ecb.rs`);
//!   - automatic backups on a schedule, to `backup_dir` and `[backup_s3]`
//!     (`workers/backups.rs`);
//!   - retention (`workers/retention.rs`): expired dedup entries, old visitors' hints and the
//!     rows of old deliveries, deleted in small steps.
//!   - the health checks of the bots and channels links lead to (`workers/health.rs`), which
//!     hold a refused target down in [`domain::split::Health`], and the alerts of each change,
//!     into a chat and to a signed webhook (`workers/alerts.rs`).
//! - [`delivery`]: conversions out: a sender task per destination (`delivery/mod.rs`) that
//!   reads due deliveries through the reader path and records outcomes through the writer,
//!   handed a narrow [`delivery::Senders`] (store, counters, clock, settings) rather than the
//!   application; it sends the plain requests each platform's room builds and reads their
//!   answers through [`platform::Platform`]. The deliveries themselves are written with their
//!   event (`storage/destinations/outbox.rs`).
//! - [`platform`]: destinations and the platforms they send to, a room per platform (Meta's
//!   Conversions API, each other ad platform, Google Ads, a postback, a webhook), each holding it
//!   whole: its settings and their rules, its request, what its answers mean, its event names.
//!   The platforms' shared face ([`platform::Platform`], `face.rs`), the registry that is the
//!   only list of kinds (`registry.rs`), and what they share (the search by halves, currency
//!   conversion, the ad platforms' rules) beside them; what every destination has whatever its
//!   platform (events, deliveries' states, addresses) too. Pure, free of HTTP and storage, so
//!   storage keeps its settings and the sender sends its requests.
//! - [`domain`]: the rules, free of HTTP and storage: event validation, the uid rule, exact
//!   decimals, dedup keys, credentials and the keyring, clicks and bindings, the rate limit,
//!   tracking links, a space's settings, the feed, stats and the rejection log, the outcomes
//!   storage answers, and how money, rates and returns are shown (`domain/display.rs`, for the
//!   pages and the command line alike).
//! - [`storage`]: the data file, behind one type, [`storage::Store`], which runs every
//!   operation one way: a write, one method of `Txn`, through [`storage::Store::write`]; a read,
//!   one method of `Snapshot`, through [`storage::Store::read`]. Private modules behind a
//!   curated `pub use` in `storage/mod.rs`. Every table in `storage/schema.rs`, record encodings
//!   in `records/` (a file per family of records). The engine in `engine/`: the file and its
//!   backend, opening and the numbered migrations (`open.rs`), the commit loop (`commit.rs`,
//!   one thread that group-commits), the reader threads (`reader.rs`), backup and compact. The
//!   writer's indexes of digests in `index/` (the dedup and `fbclid` buffers, their key
//!   filters). A file per family of tables with its writes and reads: links (`links.rs`),
//!   spaces and credentials (`spaces.rs`), channels (`channels.rs`), destinations and
//!   deliveries (`destinations/`), costs (`costs.rs`), clicks and bindings (`clicks.rs`);
//!   events and settings written in `ops.rs` and read in `read.rs`, stats read in
//!   `read_stats.rs`; which click an event is
//!   attributed to in `attribution.rs`, for both; `tracker check` and its repairs in `check/`.
//!   Never knows about HTTP.
//! - [`s3`]: S3-compatible object storage (`[backup_s3]`), where backups go off the machine:
//!   a file uploaded, a key downloaded, old backups under a prefix deleted.
//! - [`outbound`]: the guarded HTTP client of everything that sends out (the senders, the
//!   Telegram bots, the fetch of spend): addresses checked when a name is resolved and before a
//!   URL written with an address is requested, timeouts, no redirects or proxy, answers read up
//!   to a bound. Below everything that sends, so none of them sits above another only to use it.
//! - [`config`], [`clock`], [`error`], [`metrics`]: settings, an injectable clock, the error
//!   type with its stable codes, and the counters of `/metrics`.
//!
//! Imports point one way, down the layers of [`LAYERS`]: a lower layer is handed what it needs
//! from above, never imports it (`tests/it/layers.rs` reads the sources and fails otherwise).
//!
//! A request flows: router → guard (credential) → handler → [`app::App`] (validate with
//! `domain`) → an operation handed to [`storage::Store`] → commit loop → one write transaction
//! per batch → fsync → answer. What each endpoint does, field by field, is `docs/api.md`.
//!
//! # Adding an operation
//!
//! - Storage: a write is one method on `Txn` (it reads and decodes before it inserts, and
//!   returns `StoreError::Refused` for a request the caller must change), in the file of its
//!   family of tables (`storage/links.rs`, `storage/destinations/outbox.rs`, ...) or in
//!   `storage/ops.rs`, which callers hand to `Store::write`; a read is one method on a
//!   `Snapshot`, in its family's file or `storage/read.rs`, handed to `Store::read`. A new
//!   table is declared once in `storage/schema.rs` and created by a new numbered migration in
//!   `storage/engine/open.rs` (a schema version, with a fixture file from the version before).
//! - The operation: one method on [`app::App`], which every way in calls.
//! - An endpoint: one entry in `router/table.rs` naming its request and answer types (each
//!   `#[derive(JsonSchema)]`), its operation file in `router/openapi/` (summary, parameters,
//!   error answers), and its handler in `http/`; the dispatch, `/metrics` and `/openapi.json`
//!   follow.
//! - A command: one variant of [`control::Request`] (its doc comment is the help), its arm in
//!   [`control::execute`], its [`control::Answer`] and the answer's text in `cli`.
//! - An admin page: one entry in `web/routes.rs`'s `PAGES` (its label puts it in the menu and
//!   in `docs/admin.md`'s list, which a test holds to the table), its file in `web/pages/`, and
//!   its template.

/// The layers, the highest first. A module imports only modules of lower layers, never its
/// own layer's others or a higher one's: what a lower layer needs from above is handed to it
/// (the route labels into [`metrics::Metrics`] at start, a narrow handle into each worker).
/// `tests/it/layers.rs` reads the sources and holds every file to this order.
pub const LAYERS: &[&[&str]] = &[
    &["cli"],
    &["server"],
    &["router", "control"],
    &["http", "web"],
    &["surface"],
    &["app"],
    &["workers"],
    &["delivery"],
    &["storage", "s3"],
    &["outbound"],
    &["config", "metrics"],
    &["platform"],
    &["domain"],
    &["clock", "error"],
];

pub mod app;
pub mod cli;
pub mod clock;
pub mod config;
pub mod control;
pub mod delivery;
pub mod domain;
pub mod error;
pub mod http;
pub mod metrics;
pub mod outbound;
pub mod platform;
pub mod router;
pub mod s3;
pub mod server;
pub mod storage;
pub mod surface;
pub mod web;
pub mod workers;
