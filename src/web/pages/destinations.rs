//! A space's destinations page: where conversions are sent, with counts per state and the last
//! error, the delivery log, and the buttons that create, test, retry and remove one, through the
//! same operations as `/destinations` and `/deliveries`.

use askama::Template;
use warp::http::StatusCode;
use warp::reply::Response;

use super::{Frame, form_text, frame_of, html, space};
use crate::clock::rfc3339_s;
use crate::error::Error;
use crate::platform::State;
use crate::web::context::Ctx;

struct DestinationRow {
    name: String,
    /// Its change and test forms' paths below the space's, as a refused form is told by.
    change_form: String,
    test_form: String,
    kind: &'static str,
    /// An ad platform's: a token of its own, and a test code for its test view.
    ad_platform: bool,
    /// The URL, or Meta's pixel with the token's last 4 characters.
    address: String,
    events: String,
    /// Meta's event names and rates, a postback's statuses: `deposit=Purchase, ...`.
    settings: String,
    pending: u64,
    delivered: u64,
    retrying: u64,
    dead: u64,
    paused: u64,
    /// Why it is paused, while it is.
    paused_reason: Option<String>,
    last_error: String,
    /// A Google Ads destination's fetches: how many, the last one's time and rows.
    fetched: Option<String>,
}

/// The kinds a new destination may be, with their titles: the registry's.
fn kinds_offered() -> Vec<(&'static str, &'static str)> {
    crate::platform::Kind::ALL
        .into_iter()
        .map(|k| (k.as_str(), k.title()))
        .collect()
}

/// A field of the new destination's form, as its kind's room declares it.
struct FormField {
    name: &'static str,
    label: &'static str,
    /// Where its value is found, or what it does; its default, and how a map is typed.
    help: String,
    required: bool,
    /// A credential: typed into a password field, never shown again (a refused form too).
    secret: bool,
}

/// The new destination's form for the kind chosen on the page (`?kind=`), or for the kind of
/// its refused form; none before a kind is chosen, so one kind's fields show at a time.
fn chosen_kind(ctx: &Ctx<'_>) -> Option<(&'static str, &'static str, Vec<FormField>)> {
    let refused = ctx
        .refused
        .as_ref()
        .filter(|r| r.posted_to(Some(ctx.param("space")), "destinations"))
        .and_then(|r| r.form.get("kind"));
    let kind = crate::platform::Kind::parse(ctx.query.get("kind").or(refused)?).ok()?;
    let fields = kind
        .fields()
        .iter()
        .map(|f| {
            let mut help = f.help.to_owned();
            if f.shape == crate::platform::Shape::Pairs {
                help.push_str(" Typed as name=value, separated by commas.");
            }
            if let Some(default) = f.default {
                help.push_str(" Default: ");
                help.push_str(default);
                help.push('.');
            }
            FormField {
                name: f.name,
                label: f.label,
                help,
                required: f.required,
                secret: f.secret,
            }
        })
        .collect();
    Some((kind.as_str(), kind.title(), fields))
}

/// `a=b, c=d`: a map of settings as the page shows it and its form takes it.
fn pairs_text(map: Option<&std::collections::BTreeMap<String, String>>) -> String {
    map.map(|m| {
        m.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
    .unwrap_or_default()
}

/// A form's `a=b, c=d` (commas or new lines between pairs) as a map; `None` when empty. A pair
/// without `=` is kept with an empty value, for the destination's rules to refuse by name.
fn form_pairs(ctx: &Ctx<'_>, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
    let text = form_text(ctx, name)?;
    Some(
        text.split([',', '\n'])
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (k.trim().to_owned(), v.trim().to_owned())
            })
            .collect(),
    )
}

struct DeliveryRow {
    inbox_id: String,
    destination: String,
    state: &'static str,
    attempts: u32,
    last_attempt: String,
    status: String,
    answer: String,
}

#[derive(Template)]
#[template(path = "admin/destinations.html")]
struct DestinationsPage<'a> {
    frame: Frame<'a>,
    csrf_token: &'a str,
    name: &'a str,
    destinations: Vec<DestinationRow>,
    /// The kinds a new destination may be, and their titles: the registry's.
    kinds: Vec<(&'static str, &'static str)>,
    /// The kind the new destination's form is for, once one is chosen: its name, its title and
    /// the fields its room declares, in its order.
    chosen: Option<(&'static str, &'static str, Vec<FormField>)>,
    log: Vec<DeliveryRow>,
    /// A new webhook's name and signing secret, shown once.
    secret: Option<(String, String)>,
    /// A Google Ads destination's name, user name and new password, shown once.
    password: Option<(String, String, String)>,
    tested: Option<crate::app::destinations::Tested>,
    note: Option<String>,
}

/// What a Destinations page shows beside its tables.
#[derive(Default)]
struct DestinationsShown {
    secret: Option<(String, String)>,
    password: Option<(String, String, String)>,
    tested: Option<crate::app::destinations::Tested>,
    note: Option<String>,
}

impl DestinationsShown {
    /// A sentence of what an action did, and nothing else.
    fn note(note: String) -> DestinationsShown {
        DestinationsShown {
            note: Some(note),
            ..DestinationsShown::default()
        }
    }
}

/// Deliveries the page's log shows.
const DELIVERY_LOG_ROWS: usize = 50;

/// A destination's maps as its row shows them, each by its room's label: `Event names:
/// deposit=Purchase; Currency rates: ...`.
fn settings_text(d: &crate::platform::DestinationView) -> String {
    d.kind
        .fields()
        .iter()
        .filter(|f| f.shape == crate::platform::Shape::Pairs)
        .map(|f| (f.label, pairs_text(d.pairs(f.name).as_ref())))
        .filter(|(_, text)| !text.is_empty())
        .map(|(what, text)| format!("{what}: {text}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `GET .../destinations`.
pub(in crate::web) async fn show(ctx: &Ctx<'_>) -> Result<Response, Error> {
    destinations(ctx, DestinationsShown::default()).await
}

/// The destinations page, with what an action just did.
async fn destinations(ctx: &Ctx<'_>, shown: DestinationsShown) -> Result<Response, Error> {
    use crate::platform::DeliveryQuery;
    let space = space(ctx).await?;
    let rows = ctx
        .app
        .destinations(&space)
        .await?
        .into_iter()
        .map(|d| DestinationRow {
            change_form: format!("destinations/{}/change", d.name),
            test_form: format!("destinations/{}/test", d.name),
            settings: settings_text(&d),
            paused: d.deliveries.get(State::Paused),
            paused_reason: d.paused_reason.clone(),
            kind: d.kind.as_str(),
            ad_platform: d.kind.takes("access_token"),
            fetched: d
                .number("fetches")
                .map(|count| match d.number("last_fetched_at_ms") {
                    None => "never yet".to_owned(),
                    Some(at) => format!(
                        "{count} time(s); last {}, {} rows served{}",
                        rfc3339_s(at),
                        d.number("rows_served").unwrap_or(0),
                        d.text("not_sent_why")
                            .map(|why| format!("; {why}"))
                            .unwrap_or_default()
                    ),
                }),
            address: match (d.text("url"), d.text("user")) {
                (Some(url), _) => url.to_owned(),
                (None, Some(user)) => format!(
                    "fetched by Google Ads from {} as user {user}",
                    crate::platform::served_file(d.text("template"), ctx.param("space"), &d.name)
                ),
                (None, None) => format!(
                    "pixel {} (token {})",
                    d.text("pixel_id")
                        .or_else(|| d.text("pixel_code"))
                        .unwrap_or_default(),
                    d.text("access_token").unwrap_or_default()
                ),
            },
            events: d.events.join(", "),
            pending: d.deliveries.get(State::Pending),
            delivered: d.deliveries.get(State::Delivered),
            retrying: d.deliveries.get(State::Retrying),
            dead: d.deliveries.get(State::Dead),
            last_error: d.last_error.map_or_else(String::new, |e| {
                let status = e
                    .status
                    .map_or_else(|| "no answer".to_owned(), |s| s.to_string());
                format!("{} {status}: {}", rfc3339_s(e.at_ms), e.answer)
            }),
            name: d.name,
        })
        .collect();
    let query = DeliveryQuery {
        limit: DELIVERY_LOG_ROWS,
        ..DeliveryQuery::default()
    };
    let log = ctx
        .app
        .deliveries(&space, query)
        .await?
        .into_iter()
        .map(|l| DeliveryRow {
            state: l.state.as_str(),
            attempts: l.attempts,
            last_attempt: l.last_attempt_at_ms.map_or_else(String::new, rfc3339_s),
            status: l.last_status.map_or_else(String::new, |s| s.to_string()),
            answer: l.last_answer.unwrap_or_default(),
            inbox_id: l.inbox_id,
            destination: l.destination,
        })
        .collect();
    let frame = frame_of(ctx);
    Ok(html(
        StatusCode::OK,
        &DestinationsPage {
            frame,
            csrf_token: &ctx.live.csrf,
            name: ctx.param("space"),
            destinations: rows,
            kinds: kinds_offered(),
            chosen: chosen_kind(ctx),
            log,
            secret: shown.secret,
            password: shown.password,
            tested: shown.tested,
            note: shown.note,
        },
    ))
}

/// `POST .../destinations`: one from the form, judged as `POST /destinations` judges it; a
/// webhook's signing secret is shown once.
pub(in crate::web) async fn create(ctx: &Ctx<'_>) -> Result<Response, Error> {
    use crate::platform::{DestinationFields, Kind, Shape};
    let field = |n| form_text(ctx, n);
    let only_attributed = match field("only_attributed").as_deref() {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    let mut fields = DestinationFields {
        name: field("name"),
        kind: field("kind"),
        events: field("events").map(|e| e.split(',').map(|k| k.trim().to_owned()).collect()),
        only_attributed,
        ..DestinationFields::default()
    };
    // The chosen kind's own fields, as its room declares them; an unknown kind is refused by
    // the check.
    let kind = fields.kind.as_deref().and_then(|k| Kind::parse(k).ok());
    for f in kind.map_or(&[][..], Kind::fields) {
        match f.shape {
            Shape::Text => fields.set_text(f.name, field(f.name)),
            Shape::Pairs => fields.set_pairs(f.name, form_pairs(ctx, f.name)),
        }
    }
    let space = space(ctx).await?;
    let created = ctx.app.create_destination(&space, fields).await?;
    let user = created.text("user").unwrap_or_default().to_owned();
    let shown = DestinationsShown {
        secret: created.signing_secret.map(|s| (created.name.clone(), s)),
        password: created
            .password
            .map(|p| (created.name.clone(), user.clone(), p)),
        note: Some(format!("Destination {} created.", created.name)),
        ..DestinationsShown::default()
    };
    destinations(ctx, shown).await
}

/// `POST .../destinations/<name>/test`: a test conversion sent, the remote's answer shown.
pub(in crate::web) async fn test(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let tested = ctx
        .app
        .test_destination(
            &space,
            ctx.param("name").to_owned(),
            form_text(ctx, "test_event_code"),
        )
        .await?;
    let shown = DestinationsShown {
        tested: Some(tested),
        ..DestinationsShown::default()
    };
    destinations(ctx, shown).await
}

/// `POST .../destinations/<name>/retry`: its dead deliveries due again now.
pub(in crate::web) async fn retry(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let r = ctx
        .app
        .retry_deliveries(&space, ctx.param("name").to_owned(), State::Dead)
        .await?;
    let note = format!(
        "{} dead deliveries of {} are due again now.",
        r.retried, r.destination
    );
    destinations(ctx, DestinationsShown::note(note)).await
}

/// `POST .../destinations/<name>/delete`: it is removed, its open deliveries cancelled.
pub(in crate::web) async fn remove(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let destination = ctx.param("name");
    ctx.app
        .remove_destination(&space, destination.to_owned())
        .await?;
    let note = format!("Destination {destination} removed; its open deliveries are cancelled.");
    destinations(ctx, DestinationsShown::note(note)).await
}

/// `POST .../destinations/<name>/change`: the fields filled in replace the destination's (an
/// empty one changes nothing), as `PATCH /destinations/<name>` does; a paused destination
/// resumes.
pub(in crate::web) async fn change(ctx: &Ctx<'_>) -> Result<Response, Error> {
    use crate::platform::{DestinationFields, DestinationPatch};
    let field = |n| form_text(ctx, n);
    let mut set = DestinationFields::default();
    for name in ["url", "access_token", "test_event_code", "user"] {
        set.set_text(name, field(name));
    }
    for name in [
        "event_names",
        "currency_rates",
        "statuses",
        "conversion_names",
    ] {
        set.set_pairs(name, form_pairs(ctx, name));
    }
    let space = space(ctx).await?;
    let changed = ctx
        .app
        .change_destination(
            &space,
            ctx.param("name").to_owned(),
            DestinationPatch {
                set,
                cleared: Vec::new(),
            },
        )
        .await?;
    let note = format!(
        "Destination {} changed; it keeps its deliveries, and sends again if it was paused.",
        changed.name
    );
    destinations(ctx, DestinationsShown::note(note)).await
}

/// `POST .../destinations/<name>/rotate-secret`: a webhook's new signing secret, shown once.
pub(in crate::web) async fn rotate(ctx: &Ctx<'_>) -> Result<Response, Error> {
    let space = space(ctx).await?;
    let rotated = ctx
        .app
        .rotate_destination_secret(&space, ctx.param("name").to_owned())
        .await?;
    let user = rotated.text("user").unwrap_or_default().to_owned();
    let note = if rotated.password.is_some() {
        format!(
            "Google Ads destination {}: new password. The old one no longer works; give this \
             one to each of Google Ads' connections to its files.",
            rotated.name
        )
    } else {
        format!(
            "Webhook {}: new signing secret. The old one signs beside it for 24 hours.",
            rotated.name
        )
    };
    let shown = DestinationsShown {
        secret: rotated.signing_secret.map(|s| (rotated.name.clone(), s)),
        password: rotated
            .password
            .map(|p| (rotated.name.clone(), user.clone(), p)),
        note: Some(note),
        ..DestinationsShown::default()
    };
    destinations(ctx, shown).await
}
