//! A space's costs page: the costs of a range of days (by campaign, ad set and ad, and where
//! each came from), the upload of a CSV file (ours or Meta's export) through the same import as
//! `tracker costs import`, the CSV's header row to fill in, a form for one day's spend of a
//! campaign (its ad set or ad) through the same operation as `POST /costs`, and the fetch of
//! spend from Meta: its last result and a button that fetches now through the same fetch as
//! `tracker costs fetch`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, csv_response, frame_of, html, space};
use crate::app::costs::CostsImport;
use crate::domain::input::Query;
use crate::domain::keyring::SpaceRef;
use crate::domain::stats;
use crate::error::{Code, Error};
use crate::web::context::Ctx;

/// Costs listed on the page at most; a wider range is for `GET /costs`.
const COSTS_SHOWN: usize = 1000;

#[derive(Template)]
#[template(path = "admin/costs.html")]
struct CostsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    imported: Option<CostsImport>,
    max_mib: u64,
    /// The range's days as the form shows them (empty: no bound).
    from: String,
    to: String,
    costs: Vec<crate::domain::cost::CostView>,
    /// More costs are in the range than are listed.
    cut: bool,
    /// The space's Meta ad account, when it and a token are set.
    meta_account: Option<String>,
    /// The last fetch of spend from Meta: when it ran, and what it did in a sentence.
    last_fetch: Option<String>,
    /// Whether the last fetch failed (shown as an error, not a notice).
    fetch_failed: bool,
    /// A fetch just asked for by the button.
    fetched: bool,
    /// The form of one day's spend, as it was filled in (refused) or to fill in.
    day_spend: DaySpend,
    /// What the form just set, in a sentence.
    spend_set: Option<String>,
}

/// The fields of the form of one day's spend, as text.
#[derive(Default)]
struct DaySpend {
    day: String,
    campaign_name: String,
    adset_name: String,
    ad_name: String,
    amount: String,
    currency: String,
}

impl DaySpend {
    /// The form's fields as they were sent.
    fn sent(form: &Query) -> DaySpend {
        let field = |name| form.get(name).unwrap_or_default().to_owned();
        DaySpend {
            day: field("day"),
            campaign_name: field("campaign_name"),
            adset_name: field("adset_name"),
            ad_name: field("ad_name"),
            amount: field("amount"),
            currency: field("currency"),
        }
    }
}

/// What the page shows after a request: an upload's import, a fetch just asked for, and the
/// day's spend just set. A refused form is the admin page's refusal (`Ctx::refused`): its page
/// shown again, the day's spend form as it was filled in.
#[derive(Default)]
struct Done {
    upload: Option<CostsImport>,
    fetched: bool,
    spend_set: Option<String>,
}

/// `GET .../costs?from=&to=`: the upload form, the costs of a range of days (as `GET /costs`
/// reads them), and what an upload just imported.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    costs_page(ctx, &space, Done::default()).await
}

/// The form of one day's spend: the cost of a campaign (its ad set or ad) on a day, checked
/// and set as `POST /costs` sets it; a refused one is shown with the form as it was filled in.
pub(in crate::web) async fn set_day(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let sent = DaySpend::sent(&ctx.form);
    let ad = crate::domain::cost::AdNames {
        adset_name: &sent.adset_name,
        ad_name: &sent.ad_name,
    };
    let cost = crate::domain::cost::Cost::of_ad(
        &sent.day,
        &sent.campaign_name,
        ad,
        &sent.amount,
        &sent.currency,
    )?;
    let view = crate::domain::cost::CostView::from(&cost);
    let what = if cost.amount.is_zero() {
        format!("Removed the cost of {} on {}.", cost.label(), view.day)
    } else {
        format!(
            "Set: {} {} for {} on {}.",
            view.amount,
            view.currency,
            cost.label(),
            view.day
        )
    };
    ctx.app.set_costs(&space, vec![cost]).await?;
    let done = Done {
        spend_set: Some(what),
        ..Done::default()
    };
    costs_page(ctx, &space, done).await
}

/// The button: fetches the space's spend from Meta now, through the same fetch as `tracker
/// costs fetch`; the page shows what it did, or why it could not start.
pub(in crate::web) async fn fetch(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    ctx.app.fetch_costs(&space).await?;
    let done = Done {
        fetched: true,
        ..Done::default()
    };
    costs_page(ctx, &space, done).await
}

/// The upload: the file's text through the same import as `tracker costs import`. A refused
/// file is the page's refusal, with the sentence and status the command line and the API give
/// it, so the form is there to try again.
pub(in crate::web) async fn import(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let csv = ctx
        .form
        .get("file")
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Error::field(
                Code::MissingField,
                "file",
                "file is required: choose a CSV file to import",
            )
        })?;
    let done = Done {
        upload: Some(ctx.app.import_costs(&space, csv).await?),
        ..Done::default()
    };
    costs_page(ctx, &space, done).await
}

/// The costs page after what was `done`: an upload's import (its days are the range listed),
/// or why it was refused; a fetch; the day's spend set, or refused with its form as filled in.
async fn costs_page(ctx: &Ctx<'_>, space: &SpaceRef, done: Done) -> Result<Response, Error> {
    use crate::domain::cost::{Day, day_range, day_text};
    let Done {
        upload,
        fetched,
        spend_set,
    } = done;
    let q = ctx.query;
    let (first, last) = match &upload {
        _ if q.get("from").is_some() || q.get("to").is_some() => {
            day_range(q.get("from"), q.get("to"))?
        }
        Some(CostsImport {
            span: Some(span), ..
        }) => *span,
        _ => {
            let zone = ctx.app.space_settings(space).await?.time_zone.zone();
            let today = stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms()));
            (today.saturating_sub(30), today)
        }
    };
    let settings = ctx.app.space_settings(space).await?;
    let day_spend = ctx
        .refused
        .as_ref()
        .filter(|r| r.posted_to(Some(ctx.param("space")), "costs/day"))
        .map_or_else(DaySpend::default, |r| DaySpend::sent(&r.form));
    let day_spend = DaySpend {
        day: Some(day_spend.day)
            .filter(|d| !d.is_empty())
            .unwrap_or_else(|| {
                let zone = settings.time_zone.zone();
                day_text(stats::local_day(&zone, stats::quarter_of(ctx.app.now_ms())))
            }),
        currency: Some(day_spend.currency)
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| ctx.app.reporting_currency(&settings)),
        ..day_spend
    };
    let meta_account = settings
        .meta_ads_account
        .filter(|_| settings.meta_ads_token.is_some());
    let last_fetch = ctx.app.last_costs_fetch(space);
    let fetch_failed = last_fetch
        .as_ref()
        .is_some_and(|f| !matches!(f, crate::workers::spend::LastFetch::Done(_)));
    let last_fetch =
        last_fetch.map(|f| format!("{}: {}", crate::clock::rfc3339_s(f.at_ms()), f.summary()));
    let mut costs = ctx.app.costs(space, (first, last)).await?;
    let cut = costs.len() > COSTS_SHOWN;
    costs.truncate(COSTS_SHOWN);
    let frame = frame_of(ctx);
    let bound = |day: Day, none: Day| {
        if day == none {
            String::new()
        } else {
            day_text(day)
        }
    };
    Ok(html(
        StatusCode::OK,
        &CostsPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name: ctx.param("space"),
            imported: upload,
            max_mib: crate::web::context::MAX_UPLOAD_BYTES / 1024 / 1024,
            from: bound(first, 0),
            to: bound(last, Day::MAX),
            costs: costs.iter().map(Into::into).collect(),
            cut,
            meta_account,
            last_fetch,
            fetch_failed,
            fetched,
            day_spend,
            spend_set,
        },
    ))
}

/// `GET .../costs/template.csv`: the header row of our columns, to fill in a spreadsheet.
pub(in crate::web) async fn template(ctx: &Ctx<'_>) -> Result<Response, Error> {
    space(ctx).await?;
    let header_row = format!("{}\n", crate::domain::cost::CSV_COLUMNS.join(","));
    Ok(csv_response(header_row.into_bytes(), "costs-template"))
}
