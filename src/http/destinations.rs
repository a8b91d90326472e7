//! Conversions out (`docs/api.md#destinations`): a space's destinations and the log of their
//! deliveries, with the space's secret.

use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::destinations::{Retried, Tested};
use crate::domain::destination::{
    DeliveryQuery, DeliveryView, DestinationFields, DestinationView, RetryRequest,
};
use crate::domain::keyring::SpaceRef;
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond;

#[derive(Serialize)]
struct DestinationAnswer {
    ok: bool,
    destination: DestinationView,
}

/// `POST /destinations`: `201` with the destination (a webhook's signing secret, once), or
/// `409 conflict` for a name the space uses.
pub async fn post_destinations(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let destination = call
        .app
        .create_destination(&space, DestinationFields::from_json(&body)?)
        .await?;
    Ok(respond::json(
        StatusCode::CREATED,
        &DestinationAnswer {
            ok: true,
            destination,
        },
    ))
}

#[derive(Serialize)]
struct DestinationsAnswer {
    ok: bool,
    destinations: Vec<DestinationView>,
}

/// `GET /destinations`: the space's destinations with their counts and last error.
pub async fn get_destinations(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let destinations = call.app.destinations(&space).await?;
    Ok(respond::json(
        StatusCode::OK,
        &DestinationsAnswer {
            ok: true,
            destinations,
        },
    ))
}

/// `DELETE /destinations/<name>`: sends nothing more; its open deliveries are cancelled.
pub async fn delete_destination(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let name = call.param.unwrap_or_default();
    call.app.remove_destination(&space, name).await?;
    Ok(respond::ok())
}

#[derive(Serialize)]
struct TestAnswer {
    ok: bool,
    #[serde(flatten)]
    test: Tested,
}

/// `POST /destinations/<name>/test`: sends one synthetic event and answers what the remote
/// answered (`delivered` says whether it took it).
pub async fn post_destination_test(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let name = call.param.unwrap_or_default();
    let test = call.app.test_destination(&space, name).await?;
    Ok(respond::json(
        StatusCode::OK,
        &TestAnswer { ok: true, test },
    ))
}

#[derive(Serialize)]
struct DeliveriesAnswer {
    ok: bool,
    deliveries: Vec<DeliveryView>,
}

/// `GET /deliveries?destination=&state=&limit=`: the newest deliveries first.
pub async fn get_deliveries(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let q = &call.query;
    let query = DeliveryQuery::parse(q.get("destination"), q.get("state"), q.get("limit"))?;
    let deliveries = call.app.deliveries(&space, query).await?;
    Ok(respond::json(
        StatusCode::OK,
        &DeliveriesAnswer {
            ok: true,
            deliveries,
        },
    ))
}

#[derive(Serialize)]
struct RetryAnswer {
    ok: bool,
    #[serde(flatten)]
    retried: Retried,
}

/// `POST /deliveries/retry {"destination", "state": "dead"}`: the destination's dead
/// deliveries are due again now.
pub async fn post_deliveries_retry(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let r = RetryRequest::from_json(&body)?;
    let retried = call
        .app
        .retry_deliveries(&space, r.destination, r.state)
        .await?;
    Ok(respond::json(
        StatusCode::OK,
        &RetryAnswer { ok: true, retried },
    ))
}
