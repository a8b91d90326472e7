//! A space's events page: the feed newest first, with the click each event was attributed
//! to, filtered by kind, campaign, `uid` and Telegram id, from the same read as `GET /events`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, in_query, space};
use crate::domain::display;
use crate::domain::event::EventKind;
use crate::domain::feed::FeedFilter;
use crate::error::{Code, Error};
use crate::web::context::Ctx;

/// Events on one page of the feed.
const EVENTS_PER_PAGE: usize = 50;
/// The most events one view of a filtered feed looks at.
const FILTER_SCAN: usize = 5000;

struct EventRow {
    inbox_id: String,
    received: String,
    event: String,
    value: String,
    uid: String,
    matched: bool,
    /// Attributed by the Telegram id the event named, not by a uid it carried.
    by_tg_id: bool,
    campaign: String,
    link: String,
    tg_id: String,
}

#[derive(Template)]
#[template(path = "admin/events.html")]
struct EventsPage<'a> {
    frame: Frame<'a>,
    name: &'a str,
    /// The space's time zone, which the times are in.
    zone: String,
    events: Vec<EventRow>,
    older: Option<u64>,
    kinds: Vec<&'static str>,
    /// The filter as given, for the form and the link to older events.
    kind: String,
    campaign: String,
    uid: String,
    tg: String,
    filter_query: String,
}

/// `GET .../events?before=&kind=&campaign=&uid=&tg=`: the feed newest first, from the same
/// read as `GET /events`, filtered by kind, campaign, `uid` and Telegram id.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let zone_name = ctx.app.space_settings(&space).await?.time_zone;
    let zone = zone_name.zone();
    let before = match ctx.query.get("before") {
        None => None,
        Some(text) => Some(text.parse::<u64>().map_err(|_| {
            Error::field(Code::InvalidField, "before", "before is an event number")
        })?),
    };
    let q = &ctx.query;
    let filter = FeedFilter::parse(q.get("kind"), q.get("campaign"), q.get("uid"), q.get("tg"))?;
    // Filtered: newest first until a page is full, looking at most at FILTER_SCAN events per
    // view (the link to older events goes on from the last one looked at).
    let mut events = Vec::new();
    let (mut cursor, mut scanned) = (before, 0);
    let older = loop {
        let (page, older) = ctx.app.feed_newest(&space, cursor, EVENTS_PER_PAGE).await?;
        scanned += page.len();
        let last = page.last().and_then(|e| e.inbox_id.parse::<u64>().ok());
        for e in page {
            if events.len() < EVENTS_PER_PAGE && filter.matches(&e) {
                events.push(e);
            }
        }
        if events.len() == EVENTS_PER_PAGE || older.is_none() || filter.is_empty() {
            break older;
        }
        if scanned >= FILTER_SCAN {
            break last;
        }
        cursor = older;
    };
    let filter_query = [
        ("kind", q.get("kind")),
        ("campaign", q.get("campaign")),
        ("uid", q.get("uid")),
        ("tg", q.get("tg")),
    ]
    .into_iter()
    .filter_map(|(name, v)| {
        let v = v?;
        Some(format!("&{name}={}", in_query(v)))
    })
    .collect::<String>();
    let events = events
        .into_iter()
        .map(|e| EventRow {
            received: display::local_time(e.received_at_ms, &zone),
            value: e
                .value
                .map(|v| format!("{v} {}", e.currency))
                .unwrap_or_default(),
            uid: e.uid.unwrap_or_default(),
            campaign: e.campaign_name.unwrap_or_default(),
            link: e.link_slug.unwrap_or_default(),
            tg_id: e.tg_id.map(|t| t.to_string()).unwrap_or_default(),
            matched: e.matched,
            by_tg_id: e.attributed_by.as_deref() == Some("tg_id"),
            event: e.event,
            inbox_id: e.inbox_id,
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &EventsPage {
            frame,
            name: ctx.param("space"),
            zone: zone_name.as_str().to_owned(),
            events,
            older,
            kinds: EventKind::ALL.iter().map(|k| k.as_str()).collect(),
            kind: q.get("kind").unwrap_or("").to_owned(),
            campaign: q.get("campaign").unwrap_or("").to_owned(),
            uid: q.get("uid").unwrap_or("").to_owned(),
            tg: q.get("tg").unwrap_or("").to_owned(),
            filter_query,
        },
    ))
}
