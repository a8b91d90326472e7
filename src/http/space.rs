//! The space's own settings (`docs/api.md#get-space`): read and changed with the space's secret.

use schemars::JsonSchema;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::domain::keyring::SpaceRef;
use crate::domain::settings::{SettingsPatch, SpaceSettings};
use crate::error::Error;
use crate::surface::Call;
use crate::surface::respond::{self, Success};

/// The answer of `GET /space` and `PATCH /space`: every setting as it now is.
#[derive(Serialize, JsonSchema)]
pub struct SpaceAnswer<'a> {
    pub ok: Success,
    /// The space's name.
    pub space: &'a str,
    pub settings: SpaceSettings,
}

fn space_answer(space: &SpaceRef, settings: SpaceSettings) -> Response {
    respond::json(
        StatusCode::OK,
        &SpaceAnswer {
            ok: Success,
            space: &space.name,
            settings,
        },
    )
}

/// `GET /space`: the space's name and every setting.
pub async fn get_space(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let settings = call.app.space_settings(&space).await?;
    Ok(space_answer(&space, settings))
}

/// `PATCH /space`: changes any of the settings; answers them all as they now are.
pub async fn patch_space(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let body = call.body.read(call.app.settings.max_body_bytes).await?;
    let patch = SettingsPatch::from_json(&body)?;
    let settings = call.app.update_settings(&space, patch).await?;
    Ok(space_answer(&space, settings))
}
