//! A split link's stats by variant: `GET /stats?by=variant&link=SLUG`
//! (`docs/api.md#split-tests`), apart from the other groupings of `GET /stats` (`read.rs`),
//! which hands it the request.

use schemars::JsonSchema;
use serde::Serialize;
use warp::http::StatusCode;
use warp::reply::Response;

use crate::domain::keyring::SpaceRef;
use crate::domain::variants::VariantStats;
use crate::error::{Code, Error};
use crate::surface::Call;
use crate::surface::respond::{self, Success};

/// The answer of `GET /stats?by=variant&link=SLUG`.
#[derive(Serialize, JsonSchema)]
pub struct VariantsAnswer {
    pub ok: Success,
    #[schemars(with = "VariantTag")]
    pub by: &'static str,
    pub link: String,
    /// Every target of the link, in variant order, all time.
    pub variants: Vec<VariantStats>,
}

#[derive(JsonSchema)]
#[allow(dead_code)] // Only its schema is used.
enum VariantTag {
    #[schemars(rename = "variant")]
    Variant,
}

/// `GET /stats?by=variant&link=SLUG`: each target's counts, rates per click and their
/// significance against the best.
pub async fn get(call: Call, space: SpaceRef) -> Result<Response, Error> {
    let link = call
        .query
        .get("link")
        .filter(|l| !l.is_empty())
        .ok_or_else(|| {
            Error::field(
                Code::InvalidField,
                "link",
                "stats by variant are of one split link: give link=SLUG",
            )
        })?
        .to_owned();
    let variants = call.app.variant_stats(&space, &link).await?;
    Ok(respond::json(
        StatusCode::OK,
        &VariantsAnswer {
            ok: Success,
            by: "variant",
            link,
            variants,
        },
    ))
}
