//! A space's postback URL builder: the `GET /e` address to paste into an affiliate network,
//! with that network's macros for the click id, payout and transaction id.

use std::fmt::Write as _;

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, space};
use crate::domain::event::EventKind;
use crate::error::{Code, Error};
use crate::web::context::Ctx;

/// An affiliate network's postback macros: its click id (our `uid`), payout, and transaction id
/// (our `eid`, so a resent postback counts once).
struct Network {
    id: &'static str,
    name: &'static str,
    uid: &'static str,
    value: &'static str,
    eid: &'static str,
}

const NETWORKS: [Network; 4] = [
    Network {
        id: "tune",
        name: "TUNE / HasOffers",
        uid: "{aff_sub}",
        value: "{payout}",
        eid: "{transaction_id}",
    },
    Network {
        id: "everflow",
        name: "Everflow",
        uid: "{sub1}",
        value: "{payout_amount}",
        eid: "{transaction_id}",
    },
    Network {
        id: "cake",
        name: "CAKE",
        uid: "#s1#",
        value: "#price#",
        eid: "#tid#",
    },
    Network {
        id: "generic",
        name: "Other ({clickid}, {payout}, {txid})",
        uid: "{clickid}",
        value: "{payout}",
        eid: "{txid}",
    },
];

#[derive(Template)]
#[template(path = "admin/postback.html")]
struct PostbackPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    /// `(id, name, selected)`.
    networks: Vec<(&'static str, &'static str, bool)>,
    /// `(event, selected)`.
    events: Vec<(&'static str, bool)>,
    token: &'a str,
    url: Option<String>,
}

/// `GET .../postback`: the form.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    postback(ctx, false).await
}

/// `POST .../postback` (so the token stays out of URLs and logs): the form and the address.
pub(in crate::web) async fn build(ctx: &Ctx<'_>) -> Result<Response, Error> {
    postback(ctx, true).await
}

async fn postback(ctx: &Ctx<'_>, build: bool) -> Result<Response, Error> {
    let name = ctx.param("space");
    space(ctx).await?;
    let network_id = ctx.form.get("network").unwrap_or("tune");
    let network = NETWORKS
        .iter()
        .find(|n| n.id == network_id)
        .ok_or_else(|| Error::field(Code::InvalidField, "network", "no such network"))?;
    let event = ctx.form.get("event").unwrap_or("deposit");
    let kind = EventKind::from_name(event)
        .ok_or_else(|| Error::field(Code::InvalidEvent, "event", "no such event"))?;
    let token = ctx.form.get("token").unwrap_or("").trim();
    let url = build.then(|| {
        let token = if token.is_empty() {
            "INGEST_TOKEN"
        } else {
            token
        };
        let mut url = format!(
            "{}/e?token={token}&event={}&uid={}",
            ctx.app.settings.public_url().trim_end_matches('/'),
            kind.as_str(),
            network.uid
        );
        if kind == EventKind::Deposit {
            let _ = write!(url, "&value={}", network.value);
        }
        let _ = write!(url, "&eid={}", network.eid);
        url
    });
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &PostbackPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            networks: NETWORKS
                .iter()
                .map(|n| (n.id, n.name, n.id == network.id))
                .collect(),
            events: EventKind::ALL
                .iter()
                .map(|k| (k.as_str(), *k == kind))
                .collect(),
            token,
            url,
        },
    ))
}
