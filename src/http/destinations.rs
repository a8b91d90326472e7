//! Conversions out (`docs/api.md#destinations`): a space's destinations and the log of their
//! deliveries, with the space's secret.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::app::destinations::{Retried, Tested};
use crate::domain::keyring::SpaceRef;
use crate::error::Error;
use crate::platform::{
    DeliveryQuery, DeliveryView, DestinationFields, DestinationPatch, DestinationView,
    RetryRequest, State, StateCounts, TestBody,
};
use crate::surface::Call;
use crate::surface::respond::{self, Success};

/// The schema of what `StateCounts` writes by hand (`platform/delivery.rs`): a count
/// under the name of each [`State`], every one present.
impl JsonSchema for StateCounts {
    fn schema_name() -> Cow<'static, str> {
        "DeliveryCounts".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let count = generator.subschema_for::<u64>();
        let properties: serde_json::Map<String, serde_json::Value> = State::ALL
            .iter()
            .map(|s| (s.as_str().to_owned(), count.clone().to_value()))
            .collect();
        json_schema!({
            "type": "object",
            "description": "How many of its deliveries are in each state.",
            "properties": properties,
            "required": State::ALL.map(State::as_str),
        })
    }
}

/// The answer of `POST /destinations` (the destination created), `PATCH
/// /destinations/<name>` (as it now is) and `POST /destinations/<name>/rotate-secret` (with
/// its new secret).
#[derive(Serialize, JsonSchema)]
pub struct DestinationAnswer {
    pub ok: Success,
    pub destination: DestinationView,
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
            ok: Success,
            destination,
        },
    ))
}

/// The answer of `GET /destinations`.
#[derive(Serialize, JsonSchema)]
pub struct DestinationsAnswer {
    pub ok: Success,
    pub destinations: Vec<DestinationView>,
}

/// `GET /destinations`: the space's destinations with their counts and last error.
pub async fn get_destinations(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let destinations = call.app.destinations(&space).await?;
    Ok(respond::json(
        StatusCode::OK,
        &DestinationsAnswer {
            ok: Success,
            destinations,
        },
    ))
}

/// `PATCH /destinations/<name>`: new secrets or settings, checked as `POST` checks them; its
/// deliveries stay, and a paused destination resumes.
pub async fn patch_destination(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let name = call.param.clone().unwrap_or_default();
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let destination = call
        .app
        .change_destination(&space, name, DestinationPatch::from_json(&body)?)
        .await?;
    Ok(respond::json(
        StatusCode::OK,
        &DestinationAnswer {
            ok: Success,
            destination,
        },
    ))
}

/// `POST /destinations/<name>/rotate-secret`: a webhook's new signing secret, shown once; the
/// old one signs beside it for 24 hours.
pub async fn post_destination_rotate_secret(
    call: Call,
    space: SpaceRef,
) -> Result<Response, Error> {
    let name = call.param.unwrap_or_default();
    let destination = call.app.rotate_destination_secret(&space, name).await?;
    Ok(respond::json(
        StatusCode::OK,
        &DestinationAnswer {
            ok: Success,
            destination,
        },
    ))
}

/// `DELETE /destinations/<name>`: sends nothing more; its open deliveries are cancelled.
pub async fn delete_destination(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let name = call.param.unwrap_or_default();
    call.app.remove_destination(&space, name).await?;
    Ok(respond::ok())
}

/// The answer of `POST /destinations/<name>/test`: what the remote answered.
#[derive(Serialize, JsonSchema)]
pub struct TestAnswer {
    pub ok: Success,
    pub destination: String,
    /// Whether the remote took it (a `2xx`).
    pub delivered: bool,
    /// The answer's HTTP status; `null` when none came.
    pub status: Option<u16>,
    /// The first 300 bytes of the answer, or what went wrong.
    pub answer: String,
}

impl From<Tested> for TestAnswer {
    fn from(t: Tested) -> Self {
        TestAnswer {
            ok: Success,
            destination: t.destination,
            delivered: t.delivered,
            status: t.status,
            answer: t.answer,
        }
    }
}

/// `POST /destinations/<name>/test`: sends one synthetic event and answers what the remote
/// answered (`delivered` says whether it took it).
pub async fn post_destination_test(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let name = call.param.clone().unwrap_or_default();
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let code = TestBody::from_json(&body)?;
    let test = call.app.test_destination(&space, name, code).await?;
    Ok(respond::json(StatusCode::OK, &TestAnswer::from(test)))
}

/// The answer of `GET /deliveries`: the newest first.
#[derive(Serialize, JsonSchema)]
pub struct DeliveriesAnswer {
    pub ok: Success,
    pub deliveries: Vec<DeliveryView>,
}

/// `GET /deliveries?destination=&state=&limit=`: the newest deliveries first.
pub async fn get_deliveries(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let q = &call.query;
    let query = DeliveryQuery::parse(q.get("destination"), q.get("state"), q.get("limit"))?;
    let deliveries = call.app.deliveries(&space, query).await?;
    Ok(respond::json(
        StatusCode::OK,
        &DeliveriesAnswer {
            ok: Success,
            deliveries,
        },
    ))
}

/// The answer of `POST /deliveries/retry`.
#[derive(Serialize, JsonSchema)]
pub struct RetryAnswer {
    pub ok: Success,
    #[serde(flatten)]
    pub retried: Retried,
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
        &RetryAnswer {
            ok: Success,
            retried,
        },
    ))
}
