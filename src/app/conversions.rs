//! Google Ads' fetches (`docs/api.md#google-ads`): the files of a `google_ads`
//! destination's conversions (Data Manager's, one per conversion event, or the legacy one of
//! them all), served to whoever has its user name and password, each fetch recorded with the
//! destination and logged.

use std::net::IpAddr;

use crate::app::App;
use crate::domain::event::EventKind;
use crate::domain::input;
use crate::domain::warnings::clipped;
use crate::error::{Code, Error};
use crate::platform::{
    Conversion, Destination, GoogleClick, NotSent, Target, WINDOW_MS, belongs_in, conversion_file,
};

/// The file Google Ads fetched, how many conversions it holds, and those it left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConversionsFile {
    pub csv: String,
    pub rows: u64,
    pub not_sent: NotSent,
}

impl App {
    /// A file of destination `name` of space `space_name` for Google Ads, when `authorization`
    /// is `Basic` with its user name and password, of the events that occurred in the last 90
    /// days whose click has a Google click id, in the space's time zone. With `conversion` (a
    /// kind, or `first_deposit`), Data Manager's file of that conversion event; without, the
    /// legacy file of every event of its kinds; each served only by a destination of that
    /// template (`not_found` naming the address it serves otherwise). Anything else (a wrong
    /// or missing password, a space or destination that does not exist, or is not a Google Ads
    /// one) is `unauthorized` with nothing of the file, and logged at WARN without the password
    /// (once a minute per client address, the names from the path clipped and escaped). The
    /// fetch is recorded (time, rows and those left out) before the file is answered.
    pub async fn conversions_file(
        &self,
        space_name: &str,
        name: &str,
        conversion: Option<&str>,
        authorization: Option<&str>,
        client: Option<IpAddr>,
    ) -> Result<ConversionsFile, Error> {
        let refused = |why: &str| {
            if let Some(left_out) = self.admit_warning(client, "conversions file refused") {
                tracing::warn!(
                    space = %clipped(space_name),
                    destination = %clipped(name),
                    client = ?client,
                    why,
                    left_out_since_last = left_out,
                    "conversions file refused"
                );
            }
            Error::unauthorized(
                "this file needs the destination's user name and password (HTTP basic \
                 authentication), as its answer showed them when it was created",
            )
        };
        if !input::is_lowercase_name(space_name) || !input::is_lowercase_name(name) {
            return Err(refused("no such destination"));
        }
        let space = match self.space_named(space_name.to_owned()).await {
            Ok(space) => space,
            Err(e) if matches!(e.code, Code::NotFound | Code::InvalidField) => {
                return Err(refused("no such space"));
            }
            Err(e) => return Err(e),
        };
        let found: Option<std::sync::Arc<Destination>> = self
            .store
            .destination_directory()
            .of_space(space.no)
            .and_then(|list| list.iter().find(|d| d.name == name).cloned());
        let Some(d) = found else {
            return Err(refused("no such destination"));
        };
        let Target::GoogleAds(google) = &d.target else {
            return Err(refused("not a google_ads destination"));
        };
        if !google.admits(authorization) {
            return Err(refused(if authorization.is_some() {
                "wrong user name or password"
            } else {
                "no Authorization header"
            }));
        }
        google.check_file(space_name, name, conversion, |kind| d.events.contains(kind))?;
        let now = self.now_ms();
        let no = space.no;
        let settings = self.store.read(move |s| s.space_settings(no)).await?;
        let since_ms = now.saturating_sub(WINDOW_MS);
        let events = self
            .store
            .read(move |s| s.google_conversions(no, since_ms))
            .await?;
        let file = match conversion {
            Some(c) => {
                let events: Vec<_> = events.into_iter().filter(|e| belongs_in(c, e)).collect();
                let file = google.data_manager_file(
                    &events,
                    &settings.time_zone.zone(),
                    &settings.currency_rates,
                );
                ConversionsFile {
                    csv: file.csv,
                    rows: file.rows,
                    not_sent: file.not_sent,
                }
            }
            None => legacy_file(&d, google, events, &settings.time_zone),
        };
        let (count, not_sent) = (file.rows, file.not_sent);
        let destination = d.no;
        self.store
            .write(move |t| t.record_fetch(destination, now, count, not_sent))
            .await?;
        tracing::info!(
            space = space_name,
            destination = name,
            conversion = conversion.unwrap_or("all"),
            rows = count,
            not_sent = not_sent.total(),
            "Google Ads fetched its conversions file"
        );
        Ok(file)
    }
}

/// The legacy file: every event of the destination's kinds, in Google's click-conversion
/// template, named by its conversion names.
fn legacy_file(
    d: &Destination,
    google: &crate::platform::Google,
    events: Vec<crate::domain::feed::FeedEvent>,
    zone: &crate::domain::settings::TimeZoneName,
) -> ConversionsFile {
    let rows: Vec<Conversion> = events
        .into_iter()
        .filter_map(|e| {
            let kind = EventKind::from_name(&e.event)?;
            if !d.events.contains(kind) {
                return None;
            }
            let name = google
                .conversion_names
                .name_for(&e.event, e.first_deposit == Some(true))
                .to_owned();
            Some(Conversion {
                click: GoogleClick::of(e.gclid, e.gbraid, e.wbraid)?,
                name,
                at_ms: e.occurred_at_ms,
                value: e.value,
                currency: e.currency,
            })
        })
        .collect();
    ConversionsFile {
        csv: conversion_file(zone.as_str(), &zone.zone(), &rows),
        rows: rows.len() as u64,
        not_sent: NotSent::default(),
    }
}
