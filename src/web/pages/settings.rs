//! A space's settings page: the settings with what each means, shown and changed through the
//! same check and operation as `PATCH /space` and `tracker space set`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, frame_of, html, space};
use crate::domain::settings::{SETTINGS, SettingsPatch, is_write_only};
use crate::error::Error;
use crate::web::context::Ctx;

/// One setting as the form shows it.
struct SettingRow {
    name: &'static str,
    label: &'static str,
    help: &'static str,
    /// What to choose from, `(value, words)`; empty for free text.
    choices: Vec<(String, String)>,
    /// Its value, or what was typed in a refused form.
    value: String,
    /// Write-only: the form shows it empty (its last 4 characters as the placeholder), and an
    /// empty field keeps it.
    secret: bool,
}

#[derive(Template)]
#[template(path = "admin/settings.html")]
struct SettingsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    settings: Vec<SettingRow>,
    message: Option<&'static str>,
    /// The space's Telegram bot: its `@username`, or why it is not in use.
    telegram_bot: Option<String>,
}

/// What was typed in setting `name` of the refused form: shown again in its place (a secret
/// never is).
fn frame_typed(ctx: &Ctx<'_>, name: &str) -> Option<String> {
    let refused = ctx.refused.as_ref()?;
    if is_write_only(name) {
        return None;
    }
    refused.form.get(name).map(str::to_owned)
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
            let value = ctx.form.get(s.name)?.trim();
            if is_write_only(s.name) && value.is_empty() {
                return None;
            }
            Some((s.name.to_owned(), value.to_owned()))
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
        .map(|((_, value), s)| {
            let value = frame_typed(ctx, s.name).unwrap_or(value);
            SettingRow {
                name: s.name,
                label: s.label,
                help: s.help,
                choices: s.offered(&value),
                value,
                secret: is_write_only(s.name),
            }
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
            telegram_bot: ctx.app.telegram_bot(&space).await?,
        },
    ))
}
