//! What campaigns spent (`docs/api.md#costs`): set one day's cost of a campaign, ad set or ad,
//! list them, and fetch them from Meta now.

use schemars::JsonSchema;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::domain::cost::{self, Cost, CostView};
use crate::domain::keyring::SpaceRef;
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond::{self, Success};

/// The answer of `POST /costs`: the cost as stored.
#[derive(Serialize, JsonSchema)]
pub struct CostAnswer {
    pub ok: Success,
    /// Whether the cost was removed (an amount of 0) rather than set.
    pub removed: bool,
    pub cost: CostView,
}

/// `POST /costs`: sets what one campaign spent on one day, replacing what was set; an amount of
/// 0 removes it.
pub async fn post_costs(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let cost = Cost::from_json(&body)?;
    let view = CostView::from(&cost);
    let removed = cost.amount.is_zero();
    call.app.set_costs(&space, vec![cost]).await?;
    Ok(respond::json(
        StatusCode::OK,
        &CostAnswer {
            ok: Success,
            removed,
            cost: view,
        },
    ))
}

/// The answer of `GET /costs`: by day, then campaign.
#[derive(Serialize, JsonSchema)]
pub struct CostsAnswer {
    pub ok: Success,
    pub costs: Vec<CostView>,
}

/// `GET /costs?from=&to=`: the costs on the days from `from` to `to`, both included (either
/// absent: no bound), by day, then campaign.
pub async fn get_costs(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let q = &call.query;
    let days = cost::day_range(q.get("from"), q.get("to"))?;
    let costs = call.app.costs(&space, days).await?;
    Ok(respond::json(
        StatusCode::OK,
        &CostsAnswer {
            ok: Success,
            costs: costs.iter().map(CostView::from).collect(),
        },
    ))
}

/// The answer of `POST /costs/fetch`: what the fetch did, or why it failed at Meta.
#[derive(Serialize, JsonSchema)]
pub struct FetchAnswer {
    pub ok: Success,
    pub fetch: crate::workers::spend::FetchView,
}

/// `POST /costs/fetch`: fetches the space's spend of the last 28 days from Meta now, replacing
/// those days' costs that came from Meta.
pub async fn post_costs_fetch(call: Call, space: SpaceRef) -> Result<Response, Error> {
    // The body is ignored, but held to the bound every body is.
    call.body.read(call.app.settings.max_body_bytes).await?;
    let last = call.app.fetch_costs(&space).await?;
    Ok(respond::json(
        StatusCode::OK,
        &FetchAnswer {
            ok: Success,
            fetch: (&last).into(),
        },
    ))
}
