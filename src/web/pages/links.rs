//! A space's links page: its tracking links with their clicks and bound clicks (a channel
//! link's pool of invite links and joins too); create one
//! (its public address shown), delete one, through the same operations as `/links`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, form_text, frame_of, html, space};
use crate::domain::link::{ChannelFields, LinkView, NewLink};
use crate::error::Error;
use crate::web::context::Ctx;

struct LinkRow {
    slug: String,
    goes_to: String,
    campaign: String,
    clicks: u64,
    bound_clicks: u64,
    url: String,
    /// The landing page's line (`docs/landing-pages.md`), and the views it counted.
    script: String,
    views: u64,
    /// A channel link's pool and counts in a line, and its last Bot API error.
    channel: Option<String>,
    channel_error: Option<String>,
    /// Why its joins may count as unattributed (a public channel).
    channel_warning: Option<String>,
}

#[derive(Template)]
#[template(path = "admin/links.html")]
struct LinksPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    links: Vec<LinkRow>,
    created: Option<LinkView>,
    /// The address links are made of when `public_url` is not set (this machine's own, which
    /// no visitor reaches): the page says so beside every address it hands out.
    public_url_unset: Option<String>,
}

/// `GET .../links`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    links(ctx, None).await
}

/// The links page, with a link just created.
async fn links(ctx: &Ctx<'_>, created: Option<LinkView>) -> Result<Response, Error> {
    let name = ctx.param("space");
    let space = space(ctx).await?;
    let links = ctx
        .app
        .links(&space)
        .await?
        .into_iter()
        .map(|l| LinkRow {
            goes_to: crate::domain::display::goes_to(&l),
            channel: l.channel_state.as_ref().map(|c| {
                format!(
                    "{} ready, {} handed out, {} used, {} to the fallback; {} joins, {} leaves",
                    c.pool, c.handed_out, c.used, c.fallbacks, c.joins, c.leaves
                )
            }),
            channel_error: l.channel_state.as_ref().and_then(|c| c.last_error.clone()),
            channel_warning: l.channel_state.as_ref().and_then(|c| c.warning.clone()),
            script: l.script_line(),
            views: l.views,
            campaign: l.campaign_name.unwrap_or_default(),
            slug: l.slug,
            clicks: l.clicks,
            bound_clicks: l.bound_clicks,
            url: l.url,
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &LinksPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            links,
            created,
            public_url_unset: ctx
                .app
                .settings
                .public_url
                .is_empty()
                .then(|| ctx.app.settings.public_url()),
        },
    ))
}

/// `POST .../links`: a link from the form, judged as `POST /links` judges it.
pub(in crate::web) async fn create(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let field = |n| form_text(ctx, n);
    let channel = ChannelFields {
        join_requests: field("channel")
            .is_some()
            .then(|| field("join_requests").is_some()),
        channel: field("channel"),
        fallback: field("fallback"),
    };
    let link = NewLink::with_channel(
        field("slug"),
        field("bot"),
        field("target"),
        channel,
        field("campaign_name"),
        field("mode"),
    )?;
    let link = NewLink {
        allowed_origins: field("allowed_origins")
            .map(|text| {
                text.split([',', ' ', '\n'])
                    .map(str::trim)
                    .filter(|o| !o.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default(),
        ..link
    };
    let space = space(ctx).await?;
    let created = ctx.app.create_link(&space, link).await?;
    links(ctx, Some(created)).await
}

/// `POST .../links/<slug>/delete`.
pub(in crate::web) async fn delete(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    ctx.app
        .delete_link(&space, ctx.param("slug").to_owned())
        .await?;
    links(ctx, None).await
}
