//! A Google Ads destination: nothing is pushed. Google Ads fetches a file on a schedule (Goals >
//! Conversions > Uploads > Schedules) from an address of the tracker's,
//! `GET /conversions/<space>/<name>.csv`, behind HTTP basic authentication. This holds its
//! rules: the conversion name each event kind is written as, the user name and password Google
//! is given (the password shown once and kept as a digest), what its fetches came to, and the
//! file itself in Google's click-conversion template.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::face::{Platform, Sending};
use super::given::{DestinationFields, Field};
use super::names::{check_named, named};
use crate::domain::base62;
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

/// What Google Ads' fetches of the file came to: the last one's time and rows, and how many.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fetches {
    pub last_at_ms: Option<u64>,
    pub last_rows: u64,
    pub count: u64,
}

/// A Google Ads destination: the names it writes, and who may fetch its file.
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
}

impl Google {
    /// A new Google Ads destination with a new password.
    #[must_use]
    pub fn new(conversion_names: ConversionNames, user: String) -> Google {
        let mut google = Google {
            conversion_names,
            user,
            password: PasswordDigest([0; 32]),
            new_password: None,
            fetches: Fetches::default(),
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
        Ok(Google::new(conversion_names, user))
    }
}

impl Platform for Google {
    fn fields() -> &'static [Field] {
        &[
            Field {
                name: "conversion_names",
                label: "Conversion names",
                help: "The name of the conversion action in Google Ads written for each event \
                       kind (and `first_deposit`; without one, a deposit's).",
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
        ]
    }

    /// Nothing is sent: Google Ads fetches the file of its conversions.
    fn title() -> &'static str {
        "Google Ads (scheduled upload)"
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
        ]
    }

    fn shown(&self, view: &mut serde_json::Map<String, serde_json::Value>) {
        if let Some(at_ms) = self.fetches.last_at_ms {
            view.insert("last_fetched_at_ms".into(), at_ms.into());
        }
        view.insert("rows_served".into(), self.fetches.last_rows.into());
        view.insert("fetches".into(), self.fetches.count.into());
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
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(String::new, |t| {
            t.to_zoned_datetime(zone.clone())
                .strftime("%Y-%m-%d %H:%M:%S%z")
                .to_string()
        })
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
