//! A space's keys page (`/admin/spaces/<space>`): its credentials by their first characters,
//! with their state; rotate (the new key shown once) and revoke a kind of key, through the same
//! functions as `tracker keys`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, space};
use crate::app::spaces::Rotated;
use crate::domain::credential::Kind;
use crate::domain::display;
use crate::error::{Code, Error};
use crate::web::context::Ctx;

struct CredentialRow {
    kind: String,
    prefix: String,
    created: String,
    last_used: String,
    state: String,
}

/// A rotation's result, as the keys page shows it once.
struct NewCredential {
    kind_label: String,
    credential: String,
    previous: String,
}

#[derive(Template)]
#[template(path = "admin/keys.html")]
struct KeysPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    credentials: Vec<CredentialRow>,
    rotated: Option<NewCredential>,
    message: Option<String>,
    grace: String,
    /// The space's time zone, which the times are in.
    zone: String,
}

/// `GET /admin/spaces/<space>`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    keys(ctx, None, None).await
}

/// The keys page, with a rotation's new key or a revocation's sentence.
async fn keys(
    ctx: &Ctx<'_>,
    rotated: Option<Rotated>,
    message: Option<String>,
) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let zone_name = ctx.app.space_settings(&space).await?.time_zone;
    let zone = zone_name.zone();
    let time = |ms| display::local_time(ms, &zone);
    let name = ctx.param("space");
    let now = ctx.app.now_ms();
    let credentials = ctx
        .app
        .spaces()
        .await?
        .into_iter()
        .find(|s| s.space == name)
        .map(|s| s.credentials)
        .unwrap_or_default()
        .into_iter()
        .map(|c| CredentialRow {
            state: c.state(now, time),
            kind: c.kind,
            prefix: c.prefix,
            created: time(c.created_at_ms),
            last_used: c.last_used_ms.map_or_else(|| "never".to_owned(), time),
        })
        .collect();
    let rotated = rotated.map(|r| NewCredential {
        kind_label: if r.kind == "secret" {
            "secret".to_owned()
        } else {
            "ingest token".to_owned()
        },
        previous: r.previous_valid_until_ms.map_or_else(
            || "No key of this kind was active, so none is in grace.".to_owned(),
            |ms| {
                format!(
                    "The replaced one keeps working until {} ({}).",
                    time(ms),
                    zone_name.as_str()
                )
            },
        ),
        credential: r.credential,
    });
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &KeysPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            credentials,
            rotated,
            message,
            grace: crate::clock::duration_text(ctx.app.settings.rotation_grace),
            zone: zone_name.as_str().to_owned(),
        },
    ))
}

fn kind_of(text: Option<&str>) -> Result<Kind, Error> {
    match text {
        Some("secret") => Ok(Kind::Secret),
        Some("ingest") => Ok(Kind::Ingest),
        _ => Err(Error::field(
            Code::InvalidField,
            "kind",
            "the kind of key is secret or ingest",
        )),
    }
}

/// `POST .../rotate`: a new key of the form's kind, shown once; the old one in grace.
pub(in crate::web) async fn rotate(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let kind = kind_of(ctx.form.get("kind"))?;
    let rotated = ctx.app.rotate(ctx.param("space"), kind).await?;
    keys(ctx, Some(rotated), None).await
}

/// `POST .../revoke`: every key of the form's kind ends at once.
pub(in crate::web) async fn revoke(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let kind = kind_of(ctx.form.get("kind"))?;
    let revoked = ctx.app.revoke(ctx.param("space"), kind).await?;
    let message = format!(
        "Revoked {} {} key(s); none of that kind works until you rotate.",
        revoked.revoked, revoked.kind
    );
    keys(ctx, None, Some(message)).await
}
