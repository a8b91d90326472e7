//! What a data file needs before it is first served, and how it is shown: the `default` space
//! and the admin password, made by `tracker init` (shown on this terminal, never in a service's
//! log) or by the first `tracker serve`; a new space's credentials as lines to paste into a
//! shell.

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::admin::{admin_page_text, admin_url};
use super::output::CliResult;
use super::output::Output;
use crate::app::App;
use crate::app::spaces::CreatedSpace;
use crate::clock::SystemClock;
use crate::config::Settings;
use crate::storage::{Store, StoreOptions};

/// What a first start made: each is shown once, so each is `Some` only when made now.
pub(super) struct Made {
    /// The `default` space, on a data file without spaces (`None` with known credentials,
    /// which the caller already has).
    pub(super) space: Option<CreatedSpace>,
    /// The admin page's password, when none was set.
    pub(super) admin_password: Option<String>,
}

/// The `default` space's secret and ingest token, given by the caller of `serve --ephemeral`.
pub(super) type DevCredentials = (
    crate::domain::credential::Issued,
    crate::domain::credential::Issued,
);

/// Makes what a data file needs before it is served: the `default` space if it has no space
/// (with `dev`'s credentials when given), and the admin page's password if none is set.
pub(super) async fn first_start(
    app: &App,
    dev: Option<DevCredentials>,
) -> Result<Made, crate::error::Error> {
    let mut space = None;
    if app.spaces().await?.is_empty() {
        match dev {
            Some((secret, ingest)) => {
                app.create_space_with("default", secret, ingest).await?;
            }
            None => space = Some(app.create_space("default").await?),
        }
    }
    let admin_password = app.ensure_password().await?;
    Ok(Made {
        space,
        admin_password,
    })
}

/// `tracker init`: a new data file with what a first start makes, shown on this terminal and
/// never in a service's log; the server started later finds it ready.
pub(super) fn init(settings: &Settings, out: Output) -> CliResult {
    /// `--json`: the new space's credentials, with the data file and the admin page.
    #[derive(Serialize)]
    struct Initialised<'a> {
        data: &'a Path,
        #[serde(flatten)]
        space: &'a CreatedSpace,
        admin_url: String,
        admin_password: &'a str,
    }
    let path = &settings.data;
    if crate::storage::holds_data(path) {
        return Err(format!(
            "there is already a data file at {}; `tracker init` only makes a new one (add a \
             space to it with `tracker space create NAME`)",
            path.display()
        )
        .into());
    }
    let options = StoreOptions {
        cache_bytes: crate::storage::COMMAND_CACHE_BYTES,
        ..StoreOptions::default()
    };
    let (store, _) = Store::open(path, &options)?;
    let app = App::new(settings.clone(), Arc::new(store), Arc::new(SystemClock));
    let made = tokio::runtime::Builder::new_current_thread()
        .build()?
        .block_on(first_start(&app, None));
    app.store.close();
    let made = made?;
    let (Some(space), Some(password)) = (made.space, made.admin_password) else {
        return Err("the new data file already had a space or a password".into());
    };
    let data = std::path::absolute(path)?;
    let base = settings.public_url();
    out.print(
        &Initialised {
            data: &data,
            space: &space,
            admin_url: admin_url(&base),
            admin_password: &password,
        },
        &initialised_text(&space, &data, &base, &password),
    );
    Ok(())
}

/// `tracker init`'s report: the first start's, and the admin page with its password.
fn initialised_text(c: &CreatedSpace, data: &Path, base: &str, password: &str) -> String {
    format!(
        "Created the data file {} with a space named {}. {}\n{}\n\nStart the server with \
         `tracker serve` (with the same --config and --data), or the service that runs it.",
        data.display(),
        c.space,
        credentials_text(c, base, FIRST_SHOWN, PASTE_FIRST),
        admin_page_text(base, Some(password)),
    )
}

/// What a first start says it made: its space's credentials, which the admin password's line
/// follows (`data`: the data file it made; `None` for an existing file without spaces, or
/// `--ephemeral`).
pub(super) fn first_start_text(c: &CreatedSpace, data: Option<&Path>, base: &str) -> String {
    let made = data.map_or_else(
        || format!("Created space {}.", c.space),
        |path| {
            format!(
                "Created the data file {} with a space named {}.",
                path.display(),
                c.space
            )
        },
    );
    let shown = credentials_text(c, base, FIRST_SHOWN, PASTE_FIRST);
    format!("{made} {shown}")
}

/// What a first start shows once: its space's credentials and the admin password.
const FIRST_SHOWN: &str = "Its secret and ingest token, and the admin password below, are";

/// What the `export` lines are for: the first space's are the README's examples' own; a later
/// space's replace them.
const PASTE_FIRST: &str = "Paste these lines into your shell; the README's examples use them:";
pub(super) const PASTE_OTHER: &str = "To work with this space, paste these lines into your shell (they \
                           replace the SECRET and INGEST_TOKEN of the space you used before):";

/// A new space's credentials as `export` lines to paste into a shell, under the names the
/// README's examples use, with a request to try them; `shown` says what is shown only once.
pub(super) fn credentials_text(c: &CreatedSpace, base: &str, shown: &str, paste: &str) -> String {
    format!(
        "{shown} shown only this once: keep them somewhere safe.\n\
         {paste}\n\
         \n  export TRACKER={base}\
         \n  export SECRET={secret}\
         \n  export INGEST_TOKEN={token}\n\
         \nSECRET is for your servers only (Authorization: Bearer $SECRET); INGEST_TOKEN goes in \
         postback URLs (?token=$INGEST_TOKEN).\n\
         \nTry it (with the server running):\
         \n  curl -s \"$TRACKER/events\" -H \"Authorization: Bearer $SECRET\" \
         -d '{{\"event\":\"contact\",\"uid\":\"test-click\"}}'\n",
        base = shell_word(base),
        secret = c.secret,
        token = c.ingest_token,
    )
}

/// `text` as one shell word: as it is when it holds only characters no shell treats specially
/// (every credential, and a plain address), else in single quotes.
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.:/@%+=,[]".contains(c);
    if text.chars().all(plain) {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}
