//! A Google Ads destination: nothing is pushed. Google Ads fetches files on a schedule from
//! addresses of the tracker's, behind HTTP basic authentication, in one of two templates: Google
//! Ads Data Manager's HTTPS source, a file per conversion event
//! (`GET /conversions/<space>/<name>/<conversion>.csv`), or the legacy click-conversion template,
//! one file of every conversion (`GET /conversions/<space>/<name>.csv`, Goals > Conversions >
//! Uploads > Schedules). This holds its rules: the template, the conversion name each event kind
//! is written as in the legacy file, the rates a value is converted by, the user name and
//! password Google is given (the password shown once and kept as a digest), what its fetches
//! came to, and both files.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::ad_rules::{CURRENCY_RATES, rates_as_written};
use super::face::{Platform, Sending};
use super::given::{DestinationFields, Field};
use super::names::{NAMED_KINDS, check_named, named};
use crate::domain::base62;
use crate::domain::currency::CurrencyRates;
use crate::domain::display::zoned_time;
use crate::domain::event::EventKind;
use crate::domain::feed::FeedEvent;
use crate::domain::input::quoted;
use crate::domain::spreadsheet::safe_cell;
use crate::error::{Code, Error};

/// The user name Google Ads is given unless the destination sets another.
pub const DEFAULT_USER: &str = "google";

/// How far back the file reaches: Google Ads takes no conversion of a click older than 90 days.
pub const WINDOW_MS: u64 = 90 * 86_400_000;

/// The realm a `401` names in `WWW-Authenticate`.
pub const REALM: &str = "tracker conversions";

/// The conversion action name each event kind is written as, where the destination sets one;
/// the kind's own name otherwise (a deposit that was its customer's first: `first_deposit`'s,
/// else `deposit`'s).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConversionNames(pub BTreeMap<String, String>);

impl ConversionNames {
    /// From `{"deposit": "Purchase"}`: each key one of [`NAMED_KINDS`](super::names::NAMED_KINDS),
    /// each name 1 to 100 characters without control characters (the name of a conversion
    /// action in Google Ads, exactly as it is written there), and one the file writes as it is:
    /// not one a spreadsheet would take for a formula (beginning with `=`, `+`, `-` or `@`, and
    /// not a plain number), which [`safe_cell`] writes after a `'` and Google would then match
    /// to no action.
    pub fn parse(names: &BTreeMap<String, String>) -> Result<ConversionNames, Error> {
        check_named(
            "conversion_names",
            names,
            "the name of a conversion action in Google Ads: 1 to 100 characters, no control \
             characters, no space at either end, and not beginning with =, +, - or @ \
             unless it is a number",
            |name| {
                (1..=100).contains(&name.chars().count())
                    && !name.chars().any(char::is_control)
                    && name.trim() == name
                    && safe_cell(name) == name
            },
        )?;
        Ok(ConversionNames(names.clone()))
    }

    /// The conversion name an event of kind `event` is written as.
    #[must_use]
    pub fn name_for<'a>(&'a self, event: &'a str, first_deposit: bool) -> &'a str {
        named(&self.0, event, first_deposit).unwrap_or(event)
    }
}

/// The SHA-256 of a Google Ads destination's password: all that is kept of it. The password is
/// 128 random bits, so a fast digest is enough: there is nothing to guess.
#[derive(Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordDigest(pub [u8; 32]);

impl PasswordDigest {
    #[must_use]
    pub fn of(password: &str) -> PasswordDigest {
        PasswordDigest(Sha256::digest(password.as_bytes()).into())
    }
}

impl std::fmt::Debug for PasswordDigest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PasswordDigest(..)")
    }
}

/// A password for Google Ads as it is made, before only its digest is kept: never printed by
/// `Debug`, shown once.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(String);

impl Password {
    /// The password itself, for the one answer that shows it.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
}

/// A new password for Google Ads: 128 random bits as 22 base62 characters.
///
/// # Panics
/// Only on a broken system, whose random source fails.
#[must_use]
pub fn new_password() -> Password {
    let mut bytes = [0u8; 16];
    // The system's random source fails only on a broken system, where nothing else would work.
    getrandom::fill(&mut bytes).expect("the system's random source");
    Password(base62::encode(u128::from_be_bytes(bytes), 22))
}

/// What Google Ads' fetches of the files came to: the last one's time, rows and conversions
/// left out, and how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fetches {
    pub last_at_ms: Option<u64>,
    pub last_rows: u64,
    pub count: u64,
    pub last_not_sent: NotSent,
}

/// The conversions a Data Manager file left out, by why.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotSent {
    /// Its click has only a `gbraid` or `wbraid`: Google documents no column for them in Data
    /// Manager's files.
    pub click_ids: u64,
    /// Its value has no ISO 4217 currency: neither `currency_rates` nor its space's has a rate
    /// for its currency.
    pub currency: u64,
}

impl NotSent {
    #[must_use]
    pub fn total(self) -> u64 {
        self.click_ids + self.currency
    }

    /// Why they were left out, as the destination shows it; `None` when none were.
    #[must_use]
    pub fn why(self) -> Option<String> {
        let mut why = Vec::new();
        if self.click_ids > 0 {
            why.push(format!(
                "{} whose click has only a gbraid or wbraid, for which Google Ads Data Manager \
                 documents no column in a file",
                self.click_ids
            ));
        }
        if self.currency > 0 {
            why.push(format!(
                "{} whose value is in a currency Google does not take (not ISO 4217) and \
                 currency_rates has no rate for",
                self.currency
            ));
        }
        (!why.is_empty()).then(|| format!("not sent: {}", why.join("; ")))
    }
}

/// Which file Google Ads fetches: the stored tag is the variant's place, so append, never
/// reorder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Template {
    /// The click-conversion template of Google Ads' scheduled uploads: one file of every
    /// conversion, named in a column. What destinations made before Data Manager's template
    /// keep.
    #[default]
    Legacy,
    /// Google Ads Data Manager's HTTPS source: a file per conversion event.
    DataManager,
}

impl Template {
    pub const NAMES: [(&'static str, Template); 2] = [
        ("data_manager", Template::DataManager),
        ("legacy", Template::Legacy),
    ];

    #[must_use]
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("legacy", |(name, _)| name)
    }

    /// The address of the file (Data Manager's: of each conversion) destination `name` of
    /// space `space` serves on this template, as Google Ads is given it.
    #[must_use]
    pub fn served(self, space: &str, name: &str) -> String {
        match self {
            Template::DataManager => format!("/conversions/{space}/{name}/<conversion>.csv"),
            Template::Legacy => format!("/conversions/{space}/{name}.csv"),
        }
    }

    /// From its name, `data_manager` or `legacy`.
    pub fn parse(name: &str) -> Result<Template, Error> {
        Self::NAMES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                Error::field(
                    Code::InvalidField,
                    "template",
                    format!(
                        "template is data_manager (a file per conversion event, for Google Ads \
                         Data Manager) or legacy (the click-conversion template), got {}",
                        quoted(name)
                    ),
                )
            })
    }
}

/// The address Google Ads is given for destination `name` of space `space` whose `template` is
/// shown as given (a destination's view); one shown without a template serves the legacy file.
#[must_use]
pub fn served_file(template: Option<&str>, space: &str, name: &str) -> String {
    template
        .and_then(|t| Template::parse(t).ok())
        .unwrap_or_default()
        .served(space, name)
}

/// A Google Ads destination: the file it serves, what it writes, and who may fetch it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Google {
    pub conversion_names: ConversionNames,
    pub user: String,
    pub password: PasswordDigest,
    /// The password itself, only in the destination just made or given a new one, for the
    /// one answer that shows it; never stored.
    #[serde(skip)]
    pub new_password: Option<Password>,
    pub fetches: Fetches,
    pub template: Template,
    /// What a value in a currency Google does not take is converted by (Data Manager's file).
    #[serde(with = "rates_as_written")]
    pub currency_rates: CurrencyRates,
}

impl Google {
    /// A new Google Ads destination with a new password, serving Data Manager's files.
    #[must_use]
    pub fn new(conversion_names: ConversionNames, user: String) -> Google {
        let mut google = Google {
            conversion_names,
            user,
            password: PasswordDigest([0; 32]),
            new_password: None,
            fetches: Fetches::default(),
            template: Template::DataManager,
            currency_rates: CurrencyRates::default(),
        };
        google.set_password(new_password());
        google
    }

    /// Replaces the password: only its digest is kept, and the password itself for the answer
    /// that shows it once.
    pub fn set_password(&mut self, password: Password) {
        self.password = PasswordDigest::of(password.expose());
        self.new_password = Some(password);
    }

    /// Whether `authorization` (the request's `Authorization` header) is `Basic` with this
    /// destination's user name and password. Both are compared in constant time.
    #[must_use]
    pub fn admits(&self, authorization: Option<&str>) -> bool {
        let Some((scheme, encoded)) = authorization.and_then(|h| h.trim().split_once(' ')) else {
            return false;
        };
        if !scheme.eq_ignore_ascii_case("basic") {
            return false;
        }
        let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
            return false;
        };
        let Some(colon) = decoded.iter().position(|b| *b == b':') else {
            return false;
        };
        let (user, password) = (&decoded[..colon], &decoded[colon + 1..]);
        let user_ok = Sha256::digest(user).ct_eq(&Sha256::digest(self.user.as_bytes()));
        let password_ok = Sha256::digest(password).as_slice().ct_eq(&self.password.0);
        bool::from(user_ok & password_ok)
    }
}

impl Google {
    /// The settings given in `f`, checked, with a new password.
    fn check_fields(f: &DestinationFields) -> Result<Google, Error> {
        let conversion_names = match &f.pairs("conversion_names") {
            Some(names) => ConversionNames::parse(names)?,
            None => ConversionNames::default(),
        };
        let user = f.text("user").unwrap_or_else(|| DEFAULT_USER.to_owned());
        check_user(&user)?;
        let mut google = Google::new(conversion_names, user);
        if let Some(template) = f.text("template") {
            google.template = Template::parse(&template)?;
        }
        if let Some(rates) = f.pairs("currency_rates") {
            google.currency_rates = CurrencyRates::parse(&rates)?;
        }
        Ok(google)
    }
}

impl Platform for Google {
    fn fields() -> &'static [Field] {
        &[
            Field {
                name: "conversion_names",
                label: "Conversion names",
                help: "The name of the conversion action in Google Ads written for each kind \
                       of event (and first_deposit; without it, a deposit's), such as \
                       deposit=Telegram deposit.",
                default: Some("the kind"),
                schema: r#"{"type": ["object", "null"], "additionalProperties": {"type": "string"},
                    "examples": [{"deposit": "Telegram deposit"}]}"#,
                ..Field::PAIRS
            },
            Field {
                name: "user",
                label: "User name",
                help: "The user name Google Ads fetches the file with.",
                default: Some(DEFAULT_USER),
                schema: r#"{"type": ["string", "null"], "pattern": "^[!-9;-~]{0,64}$"}"#,
                ..Field::TEXT
            },
            Field {
                name: "template",
                label: "File template",
                help: "data_manager: a file per conversion event, for Google Ads Data \
                       Manager's HTTPS source (/conversions/<space>/<name>/<kind>.csv). \
                       legacy: one file of every conversion in the click-conversion \
                       template (/conversions/<space>/<name>.csv).",
                default: Some("data_manager"),
                schema: r#"{"type": ["string", "null"], "enum": ["data_manager", "legacy", null]}"#,
                ..Field::TEXT
            },
            CURRENCY_RATES,
        ]
    }

    /// Nothing is sent: Google Ads fetches the file of its conversions.
    fn title() -> &'static str {
        "Google Ads (Data Manager)"
    }

    fn sending() -> Sending {
        Sending::Fetched
    }

    fn from_fields(f: &DestinationFields, _allow_private: bool) -> Result<Google, Error> {
        Google::check_fields(f)
    }

    fn fields_of(&self, f: &mut DestinationFields) {
        f.set_pairs("conversion_names", Some(self.conversion_names.0.clone()));
        f.set_text("user", Some(self.user.clone()));
        f.set_text("template", Some(self.template.name().to_owned()));
        f.set_pairs("currency_rates", Some(self.currency_rates.shown()));
    }

    fn shown_fields() -> &'static [(&'static str, &'static str)] {
        &[
            (
                "last_fetched_at_ms",
                r#"{"type": "integer", "minimum": 0, "description": "When Google Ads last fetched the file (absent: never yet)."}"#,
            ),
            (
                "rows_served",
                r#"{"type": "integer", "minimum": 0, "description": "The rows the last fetch was served."}"#,
            ),
            (
                "fetches",
                r#"{"type": "integer", "minimum": 0, "description": "How many times the file was fetched."}"#,
            ),
            (
                "not_sent",
                r#"{"type": "object", "properties": {"click_ids": {"type": "integer", "minimum": 0}, "currency": {"type": "integer", "minimum": 0}}, "description": "The conversions the last fetch of a Data Manager file left out: whose click has only a gbraid or wbraid (click_ids), whose value's currency has no rate (currency)."}"#,
            ),
            (
                "not_sent_why",
                r#"{"type": "string", "description": "Why the last fetch left conversions out (absent: it left none out)."}"#,
            ),
        ]
    }

    fn shown(&self, view: &mut serde_json::Map<String, serde_json::Value>) {
        if let Some(at_ms) = self.fetches.last_at_ms {
            view.insert("last_fetched_at_ms".into(), at_ms.into());
        }
        view.insert("rows_served".into(), self.fetches.last_rows.into());
        view.insert("fetches".into(), self.fetches.count.into());
        let not_sent = self.fetches.last_not_sent;
        view.insert(
            "not_sent".into(),
            serde_json::json!({"click_ids": not_sent.click_ids, "currency": not_sent.currency}),
        );
        if let Some(why) = not_sent.why() {
            view.insert("not_sent_why".into(), why.into());
        }
    }

    /// Google keeps its password (a rotation replaces it) and what its fetches came to.
    fn keep_from(&mut self, before: &Google) {
        self.password = before.password;
        self.new_password = None;
        self.fetches = before.fetches;
    }
}

/// The rule of a user name Google is given: 1 to 64 visible ASCII characters, no `:`.
pub fn check_user(user: &str) -> Result<(), Error> {
    if (1..=64).contains(&user.len()) && user.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "user",
            format!(
                "user is the user name Google Ads fetches the file with: 1 to 64 visible ASCII \
                 characters, no ':', got {}",
                quoted(user)
            ),
        ))
    }
}

/// Which of Google's click ids a conversion is matched by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GoogleClick {
    Gclid(String),
    Gbraid(String),
    Wbraid(String),
}

impl GoogleClick {
    /// A click's Google id, `gclid` first.
    #[must_use]
    pub fn of(
        gclid: Option<String>,
        gbraid: Option<String>,
        wbraid: Option<String>,
    ) -> Option<Self> {
        gclid
            .map(GoogleClick::Gclid)
            .or_else(|| gbraid.map(GoogleClick::Gbraid))
            .or_else(|| wbraid.map(GoogleClick::Wbraid))
    }
}

/// One row of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversion {
    pub click: GoogleClick,
    pub name: String,
    pub at_ms: u64,
    pub value: Option<String>,
    pub currency: String,
}

/// The first line of Google's template and its header row.
pub const TIME_ZONE_PARAMETER: &str = "Parameters:TimeZone=";
pub const COLUMNS: [&str; 5] = [
    "Google Click ID",
    "Conversion Name",
    "Conversion Time",
    "Conversion Value",
    "Conversion Currency",
];
/// The columns of the iOS click ids, added when a row has one.
pub const BRAID_COLUMNS: [&str; 2] = ["GBRAID", "WBRAID"];

/// A moment as Google's `Conversion Time`: `yyyy-MM-dd HH:mm:ss+hhmm`, the wall clock of `zone`
/// with its offset then, so no daylight-saving change makes it ambiguous.
#[must_use]
pub fn conversion_time(ms: u64, zone: &jiff::tz::TimeZone) -> String {
    zoned_time(ms, zone, "%Y-%m-%d %H:%M:%S%z")
}

/// The file in Google's click-conversion template: `Parameters:TimeZone=<zone>`, the header
/// row, and one row per conversion (the `GBRAID` and `WBRAID` columns only when a row has one),
/// each cell written as every CSV of the tracker is ([`safe_cell`]).
///
/// # Panics
/// Only when memory runs out: the file is written into memory.
#[must_use]
pub fn conversion_file(zone_name: &str, zone: &jiff::tz::TimeZone, rows: &[Conversion]) -> String {
    let braids = rows
        .iter()
        .any(|r| !matches!(r.click, GoogleClick::Gclid(_)));
    let mut out = csv::WriterBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_writer(Vec::new());
    let mut write = |cells: Vec<String>| {
        // Writing to memory fails only when out of memory.
        out.write_record(cells.iter().map(|c| safe_cell(c).into_owned()))
            .expect("CSV into memory");
    };
    write(vec![format!("{TIME_ZONE_PARAMETER}{zone_name}")]);
    let mut header: Vec<String> = COLUMNS.iter().map(|c| (*c).to_owned()).collect();
    if braids {
        header.extend(BRAID_COLUMNS.iter().map(|c| (*c).to_owned()));
    }
    write(header);
    for r in rows {
        let (gclid, gbraid, wbraid) = match &r.click {
            GoogleClick::Gclid(id) => (id.clone(), String::new(), String::new()),
            GoogleClick::Gbraid(id) => (String::new(), id.clone(), String::new()),
            GoogleClick::Wbraid(id) => (String::new(), String::new(), id.clone()),
        };
        let mut cells = vec![
            gclid,
            r.name.clone(),
            conversion_time(r.at_ms, zone),
            r.value.clone().unwrap_or_default(),
            if r.value.is_some() {
                r.currency.clone()
            } else {
                String::new()
            },
        ];
        if braids {
            cells.extend([gbraid, wbraid]);
        }
        write(cells);
    }
    // Into memory: the writer's buffer is the only place it can fail, and it cannot.
    String::from_utf8(out.into_inner().expect("CSV into memory")).unwrap_or_default()
}

/// The columns of a Data Manager file, in Google's words: "The first row must contain the
/// column headers" and "One file is required per conversion event or audience list"
/// (support.google.com/google-ads-data-manager/answer/14605515, HTTPS). The names are those of
/// Google's click-conversion fields (`Order ID`: "An order id can only be used for one
/// conversion per conversion action"), mapped to them when the connection is made.
pub const DATA_MANAGER_COLUMNS: [&str; 5] = [
    "Google Click ID",
    "Conversion Time",
    "Conversion Value",
    "Conversion Currency",
    "Order ID",
];

/// Whether `conversion` (a file's name without `.csv`) names a file of this destination's:
/// one of [`NAMED_KINDS`].
#[must_use]
pub fn is_conversion(conversion: &str) -> bool {
    NAMED_KINDS.contains(&conversion)
}

/// Whether `event` belongs in the file of `conversion`: an event of that kind; for
/// `first_deposit`, a deposit that was its customer's first (a first deposit is also in
/// `deposit`'s file).
#[must_use]
pub fn belongs_in(conversion: &str, event: &FeedEvent) -> bool {
    if conversion == "first_deposit" {
        event.event == "deposit" && event.first_deposit == Some(true)
    } else {
        event.event == conversion
    }
}

/// A moment in ISO 8601 with its offset (`2012-08-14T17:01:54-07:00`, "ISO 8601 Standard
/// with Offset" of support.google.com/google-ads-data-manager/answer/14184381), the wall
/// clock of `zone`.
#[must_use]
pub fn iso_time(ms: u64, zone: &jiff::tz::TimeZone) -> String {
    zoned_time(ms, zone, "%Y-%m-%dT%H:%M:%S%:z")
}

impl Google {
    /// Whether destination `name` of space `space` serves the file asked for: Data Manager's
    /// of `conversion` (one of [`NAMED_KINDS`] of a kind it `takes`) on that
    /// template, the legacy one (no conversion) on the legacy template; `not_found` naming
    /// the address it serves otherwise.
    pub fn check_file(
        &self,
        space: &str,
        name: &str,
        conversion: Option<&str>,
        takes: impl Fn(EventKind) -> bool,
    ) -> Result<(), Error> {
        let serves = self.template.served(space, name);
        let wrong_file = |why: String| Err(Error::new(Code::NotFound, why));
        match (self.template, conversion) {
            (Template::DataManager, Some(c)) if !is_conversion(c) => wrong_file(format!(
                "{serves}: <conversion> is contact, subscribed, registration, deposit or \
                 first_deposit, got {}",
                quoted(c)
            )),
            (Template::DataManager, Some(c)) => {
                let kind = if c == "first_deposit" { "deposit" } else { c };
                if EventKind::from_name(kind).is_some_and(takes) {
                    Ok(())
                } else {
                    wrong_file(format!(
                        "destination {name} takes no {kind} events, so it has no {c}.csv"
                    ))
                }
            }
            (Template::Legacy, None) => Ok(()),
            (template, _) => wrong_file(format!(
                "destination {name} has the {} template and serves {serves}",
                template.name()
            )),
        }
    }
}

/// A Data Manager file, and what it left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataManagerFile {
    pub csv: String,
    pub rows: u64,
    pub not_sent: NotSent,
}

impl Google {
    /// The Data Manager file of `events` (those of its conversion, oldest first): the header
    /// row, then a row per event whose click has a `gclid`, its time in `zone`, its value in an
    /// ISO 4217 currency (converted by `currency_rates`, or its space's `space_rates` for a
    /// currency it has no rate for, where it is not in one; empty when the event has none), its
    /// `event_id` as the `Order ID`. The others are counted as not sent.
    ///
    /// # Panics
    /// Only when memory runs out: the file is written into memory.
    #[must_use]
    pub fn data_manager_file(
        &self,
        events: &[FeedEvent],
        zone: &jiff::tz::TimeZone,
        space_rates: &CurrencyRates,
    ) -> DataManagerFile {
        let rates = CurrencyRates::of_destination(&self.currency_rates, space_rates);
        let mut out = csv::WriterBuilder::new()
            .has_headers(false)
            .from_writer(Vec::new());
        let mut write = |cells: [&str; 5]| {
            // Writing to memory fails only when out of memory.
            out.write_record(cells.iter().map(|c| safe_cell(c).into_owned()))
                .expect("CSV into memory");
        };
        write(DATA_MANAGER_COLUMNS);
        let (mut rows, mut not_sent) = (0, NotSent::default());
        for e in events {
            let Some(gclid) = &e.gclid else {
                not_sent.click_ids += 1;
                continue;
            };
            let (value, currency) = match &e.value {
                None => (String::new(), String::new()),
                Some(v) => {
                    let Ok((amount, currency)) = rates.to_iso(v, &e.currency) else {
                        not_sent.currency += 1;
                        continue;
                    };
                    (amount.to_string(), currency)
                }
            };
            let time = iso_time(e.occurred_at_ms, zone);
            write([gclid, &time, &value, &currency, &e.event_id]);
            rows += 1;
        }
        // Into memory: the writer's buffer is the only place it can fail, and it cannot.
        let csv = String::from_utf8(out.into_inner().expect("CSV into memory")).unwrap_or_default();
        DataManagerFile {
            csv,
            rows,
            not_sent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_default_to_the_kind_and_first_deposit_falls_back_to_deposit() {
        let none = ConversionNames::default();
        assert_eq!(none.name_for("registration", false), "registration");
        assert_eq!(none.name_for("deposit", true), "deposit");
        let set = ConversionNames::parse(&BTreeMap::from([(
            "deposit".to_owned(),
            "Telegram deposit".to_owned(),
        )]))
        .unwrap();
        assert_eq!(set.name_for("deposit", true), "Telegram deposit");
        let ok = "n".repeat(100);
        let long = "n".repeat(101);
        let plain = |text: &str| text.to_owned();
        for (name, good) in [
            (&ok, true),
            (&long, false),
            (&plain(" x"), false),
            (&plain("Lead - form"), true),
            (&plain("-Purchase"), false),
            (&plain("-5"), true),
            (&plain("=x"), false),
            (&plain("+x"), false),
            (&plain("@x"), false),
            (&plain("'=x"), false),
            (&plain("'x"), true),
        ] {
            let map = BTreeMap::from([("contact".to_owned(), name.clone())]);
            assert_eq!(ConversionNames::parse(&map).is_ok(), good, "{name:?}");
        }
        let map = BTreeMap::from([("purchase".to_owned(), "P".to_owned())]);
        assert!(ConversionNames::parse(&map).is_err());
    }

    #[test]
    fn only_the_right_user_and_password_are_admitted() {
        let g = Google::new(ConversionNames::default(), DEFAULT_USER.into());
        let password = g.new_password.clone().unwrap();
        assert_eq!(password.expose().len(), 22);
        let basic = |text: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(text)
            )
        };
        assert!(g.admits(Some(&basic(&format!("google:{}", password.expose())))));
        assert!(!g.admits(Some(&basic(&format!("googlf:{}", password.expose())))));
        assert!(!g.admits(Some(&basic(&format!("google:{}x", password.expose())))));
        assert!(!g.admits(Some(&basic("google"))));
        assert!(!g.admits(Some("Bearer x")));
        assert!(!g.admits(None));
        assert!(check_user(&"u".repeat(64)).is_ok());
        assert!(check_user(&"u".repeat(65)).is_err());
        assert!(check_user("a:b").is_err());
    }

    #[test]
    fn the_file_follows_googles_template() {
        let zone = jiff::tz::db().get("Asia/Kolkata").unwrap();
        let rows = [
            Conversion {
                click: GoogleClick::Gclid("Cj0,\"x".into()),
                name: "deposit".into(),
                at_ms: 1_700_000_000_000,
                value: Some("12.50".into()),
                currency: "USD".into(),
            },
            Conversion {
                click: GoogleClick::Gbraid("0AA".into()),
                name: "=contact".into(),
                at_ms: 1_700_000_000_000,
                value: None,
                currency: "USD".into(),
            },
        ];
        let file = conversion_file("Asia/Kolkata", &zone, &rows);
        assert_eq!(
            file,
            "Parameters:TimeZone=Asia/Kolkata\n\
             Google Click ID,Conversion Name,Conversion Time,Conversion Value,\
             Conversion Currency,GBRAID,WBRAID\n\
             \"Cj0,\"\"x\",deposit,2023-11-15 03:43:20+0530,12.50,USD,,\n\
             ,'=contact,2023-11-15 03:43:20+0530,,,0AA,\n"
        );
        let only_gclid = conversion_file("UTC", &jiff::tz::TimeZone::UTC, &rows[..1]);
        assert!(only_gclid.contains("Currency\n"), "{only_gclid}");
    }
}
