//! A space's settings page: the settings with what each means, shown and changed through the
//! same check and operation as `PATCH /space` and `tracker space set`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, space};
use crate::domain::settings::{SETTINGS, SettingsPatch};
use crate::error::Error;
use crate::web::context::Ctx;

/// One setting as the form shows it.
struct SettingRow {
    name: &'static str,
    about: &'static str,
    choices: &'static [&'static str],
    value: String,
}

#[derive(Template)]
#[template(path = "admin/settings.html")]
struct SettingsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    settings: Vec<SettingRow>,
    message: Option<&'static str>,
}

/// `GET .../settings`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    settings(ctx, false).await
}

/// `POST .../settings`: the form's settings saved.
pub(in crate::web) async fn save(ctx: &Ctx<'_>) -> Result<Response, Error> {
    settings(ctx, true).await
}

/// The settings page, after saving the form's when `save`.
async fn settings(ctx: &Ctx<'_>, save: bool) -> Result<Response, Error> {
    let name = ctx.param("space");
    let space = space(ctx).await?;
    let current = if save {
        let changes = SETTINGS.iter().filter_map(|s| {
            let value = ctx.form.get(s.name)?;
            Some((s.name.to_owned(), value.trim().to_owned()))
        });
        let patch = SettingsPatch::new(changes)?;
        ctx.app.update_settings(&space, patch).await?
    } else {
        ctx.app.space_settings(&space).await?
    };
    let settings = current
        .pairs()
        .into_iter()
        .zip(&SETTINGS)
        .map(|((_, value), s)| SettingRow {
            name: s.name,
            about: s.about,
            choices: s.choices,
            value,
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &SettingsPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name,
            settings,
            message: save.then_some("Saved: in force for every event from now on."),
        },
    ))
}
