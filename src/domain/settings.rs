//! A space's settings (`docs/api.md#space-settings`): one typed value, [`SpaceSettings`], and
//! the one list of its fields, [`SETTINGS`], which every way in reads and writes them through.
//!
//! `GET`/`PATCH /space`, `tracker space set SPACE key=value` and the admin page's Settings page
//! all turn what they were given into a [`SettingsPatch`], validated here, and the writer applies
//! it to the stored settings inside its transaction. A setting is stored by name, as text
//! (`records::SpaceSettingsRecord`), so adding one is a field of [`SpaceSettings`], its default,
//! and one entry of [`SETTINGS`] with its parse and its text; no migration.

use std::borrow::Cow;
use std::collections::BTreeSet;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use serde::de;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::domain::attribution::Attribution;
use crate::domain::currency::CurrencyRates;
use crate::domain::input::{self, quoted};
use crate::domain::secret::Secret;
pub use crate::domain::setting_values::{
    GraphUrl, META_GRAPH_URL, META_TOKEN_MAX_CHARS, TimeZoneName, check_bot_unshared,
    is_graph_version,
};
use crate::domain::setting_values::{
    MAX_WATCHED_BOTS, check_ad_account, check_bot_token, check_meta_token, watched_tokens,
};
pub use crate::domain::settings_body::SettingsBody;
use crate::error::{Code, Error};

/// Every setting of a space, each at its default until set.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpaceSettings {
    pub attribution: Attribution,
    /// Whether a link click keeps the visitor's IP address and user agent (until
    /// `delivery_max_age`) for Meta's Conversions API to match with.
    pub meta_client_hints: bool,
    /// The space's days: stats by day, date ranges and costs (`docs/api.md#time-zones`).
    pub time_zone: TimeZoneName,
    /// The token of the space's Telegram bot (`docs/channels.md`), which makes invite links of
    /// channel links and reads who joined. Write-only: answers show its last 4 characters.
    pub telegram_bot_token: Option<Secret>,
    /// Meta's ad account whose spend the tracker fetches (`docs/costs.md`): `act_<digits>`.
    pub meta_ads_account: Option<String>,
    /// A token with `ads_read` on that account. Write-only: answers show its last 4 characters.
    pub meta_ads_token: Option<Secret>,
    /// Where Meta's Graph API is (a stand-in's address in tests): an `http` or `https` origin.
    pub meta_graph_url: GraphUrl,
    /// The Graph API version spend is fetched with (`v25.0`); `None`: the one this release
    /// asks, which follows Meta's retirements from release to release.
    pub meta_graph_version: Option<String>,
    /// The currency the stats show revenue, cost and return in (`docs/api.md#reporting-currency`);
    /// `None`: the configuration's `default_currency`.
    pub reporting_currency: Option<String>,
    /// What one unit of a currency is worth in another, which the stats convert by
    /// (`{"EUR": "1.08 USD"}`); destinations convert by their own.
    pub currency_rates: CurrencyRates,
    /// Other bots the space's links lead to, watched with `getMe` (`docs/api.md#target-health`).
    pub watched_bot_tokens: Vec<Secret>,
    /// Where alerts go (`docs/api.md#alerts`); the webhook's secret is write-only.
    pub alert_telegram_chat: Option<String>,
    pub alert_webhook_url: Option<String>,
    pub alert_webhook_secret: Option<Secret>,
    /// Where the ECB's daily rates are fetched from (`domain::ecb`); `None`: not fetched.
    pub ecb_rates_url: Option<String>,
}

/// How a setting's value is written in JSON (the API's answers and `PATCH /space`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    String,
    Boolean,
    /// An object of strings (`{"EUR": "1.08 USD"}`), written as text `EUR=1.08 USD`.
    StringMap,
    /// A list of strings, written as text separated by commas.
    StringList,
}

/// One setting: its name, what it takes, and how its value is read from and written as text (a
/// boolean as `true` or `false`).
pub struct Setting {
    pub name: &'static str,
    /// What it decides, for the API's readers: its description in `/openapi.json`.
    pub about: &'static str,
    /// Its name in words, as the admin page labels it.
    pub label: &'static str,
    /// What it decides in a marketer's words (no setting names, no JSON; what empty does).
    pub help: &'static str,
    /// The values it takes when they are a fixed few, offered to choose from; empty: free text.
    pub choices: &'static [&'static str],
    /// Each of `choices` in words, in their order.
    pub choice_words: &'static [&'static str],
    pub json: JsonType,
    get: fn(&SpaceSettings) -> String,
    /// Sets it from text; the error finishes the sentence "`name` ...".
    set: fn(&mut SpaceSettings, &str) -> Result<(), String>,
}

/// Every setting, in the order they are shown.
pub const SETTINGS: [Setting; 15] = [
    Setting {
        name: "attribution",
        about: "Which of a Telegram user's bound clicks an event that names the user by tg_id \
                (and no uid) is attributed to: the first bound (first_touch) or the last \
                (last_touch).",
        label: "Which click gets a Telegram user's event",
        help: "When an event names the Telegram user but not the click, it counts for the first click that reached the bot, or for the last.",
        choices: &["first_touch", "last_touch"],
        choice_words: &[
            "The first click that reached the bot",
            "The last click that reached the bot",
        ],
        json: JsonType::String,
        get: |s| s.attribution.as_str().to_owned(),
        set: |s, text| {
            s.attribution = Attribution::parse(text)?;
            Ok(())
        },
    },
    Setting {
        name: "meta_client_hints",
        about: "Whether a tracking link's click keeps the visitor's IP address and user agent, \
                deleted after delivery_max_age, to send to Meta's Conversions API as \
                client_ip_address and client_user_agent (better matching). Off: no IP address \
                is stored.",
        label: "Keep visitors' IP address and browser for Meta",
        help: "Kept with each click until it is delivered, and sent to Meta with its conversions, which helps Meta match them to people. Without it, no IP address is stored.",
        choices: &["false", "true"],
        choice_words: &["No: store no IP address", "Yes: keep them until delivery"],
        json: JsonType::Boolean,
        get: |s| s.meta_client_hints.to_string(),
        set: |s, text| {
            s.meta_client_hints = match text {
                "true" => true,
                "false" => false,
                _ => return Err(format!("is true or false, got {}", quoted(text))),
            };
            Ok(())
        },
    },
    Setting {
        name: "time_zone",
        about: "The space's days, for stats by day, date ranges and costs: an IANA time zone \
                name such as Europe/Berlin, Asia/Kolkata or UTC. Changing it changes no count: \
                days are read in the new zone from then on.",
        label: "Time zone of the space's days",
        help: "The zone your days are counted in: stats by day, date ranges and costs. Changing it changes no count; days are read in the new zone from then on.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.time_zone.as_str().to_owned(),
        set: |s, text| {
            s.time_zone = TimeZoneName::parse(text)?;
            Ok(())
        },
    },
    Setting {
        name: "telegram_bot_token",
        about: "The token of the space's Telegram bot, from @BotFather, for links that lead to a \
                channel: the bot, an admin of the channel allowed to invite users, makes an \
                invite link per click and reads who joined. A bot serves one space: another \
                space's bot is refused. Write-only: shown by its last 4 characters. \"\" \
                removes it.",
        label: "Telegram bot token",
        help: "From @BotFather: the bot that makes an invite link per click for links to a channel (it must be an admin of the channel, allowed to invite). A bot serves one space. Never shown again; left empty, the token stays as it is.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| {
            s.telegram_bot_token
                .as_ref()
                .map_or_else(String::new, |t| t.expose().to_owned())
        },
        set: |s, text| {
            s.telegram_bot_token = if text.is_empty() {
                None
            } else {
                check_bot_token(text)?;
                Some(Secret::new(text.to_owned()))
            };
            Ok(())
        },
    },
    Setting {
        name: "meta_ads_account",
        about: "Meta's ad account whose spend is fetched into costs by campaign, ad set and ad \
                (act_ and its digits, as Ads Manager's address shows it). \"\" stops fetching.",
        label: "Meta ad account",
        help: "The ad account whose spend is fetched into costs by campaign, ad set and ad: act_ and its digits, as Ads Manager's address shows it. Left empty: no spend is fetched.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.meta_ads_account.clone().unwrap_or_default(),
        set: |s, text| {
            s.meta_ads_account = if text.is_empty() {
                None
            } else {
                check_ad_account(text)?;
                Some(text.to_owned())
            };
            Ok(())
        },
    },
    Setting {
        name: "meta_ads_token",
        about: "An access token with ads_read on that ad account (it may be the Meta \
                destination's). Write-only: shown by its last 4 characters. \"\" removes it.",
        label: "Meta token to read spend",
        help: "An access token that may read that ad account's spend (ads_read); the Meta destination's may serve. Never shown again; left empty, the token stays as it is.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| {
            s.meta_ads_token
                .as_ref()
                .map_or_else(String::new, |t| t.expose().to_owned())
        },
        set: |s, text| {
            s.meta_ads_token = if text.is_empty() {
                None
            } else {
                check_meta_token(text)?;
                Some(Secret::new(text.to_owned()))
            };
            Ok(())
        },
    },
    Setting {
        name: "meta_graph_url",
        about: "Where Meta's Graph API is, for fetching spend: https://graph.facebook.com \
                unless a stand-in is used. \"\" sets it back.",
        label: "Meta Graph API address",
        help: "Where Meta is asked for spend. Left empty: https://graph.facebook.com, which is right unless you test with a stand-in.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.meta_graph_url.as_str().to_owned(),
        set: |s, text| {
            s.meta_graph_url = GraphUrl::parse(text)?;
            Ok(())
        },
    },
    Setting {
        name: "meta_graph_version",
        about: "The Graph API version spend is fetched with, such as v25.0. \"\" (the default) \
                asks the version of this release, which a newer release moves on as Meta \
                retires versions.",
        label: "Meta Graph API version",
        help: "The version spend is asked with, such as v25.0. Left empty: this release's, which newer releases move on as Meta retires versions.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.meta_graph_version.clone().unwrap_or_default(),
        set: |s, text| {
            if !text.is_empty() && !is_graph_version(text) {
                return Err(format!(
                    "is a Graph API version, v and two numbers of 1 to 3 digits such as v25.0, \
                     or \"\" for this release's, got {}",
                    quoted(text)
                ));
            }
            s.meta_graph_version = (!text.is_empty()).then(|| text.to_owned());
            Ok(())
        },
    },
    Setting {
        name: "reporting_currency",
        about: "The currency the dashboard, the stats and the command line show revenue, cost, \
                ROI, CPA and EPC in, each amount converted by currency_rates (the amounts as \
                they came are shown beside). \"\" sets it back to the default_currency of the \
                configuration.",
        label: "Currency of the reports",
        help: "The currency the dashboard, the stats and the command line show revenue, cost and ROI in, each amount converted by the rates below. Left empty: the server's default currency.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.reporting_currency.clone().unwrap_or_default(),
        set: |s, text| {
            s.reporting_currency = if text.is_empty() {
                None
            } else {
                let code = crate::domain::event::check_currency(text)
                    .map_err(|_| format!("is 3 to 10 letters or digits, got {}", quoted(text)))?;
                Some(code)
            };
            Ok(())
        },
    },
    Setting {
        name: "currency_rates",
        about: "What one unit of a currency is worth in an ISO 4217 currency, for the stats in \
                the reporting currency: EUR=1.08 USD, XTR=0.013 USD (a rate into the reporting \
                currency, from it, or both into one currency all serve); an ad destination without \
                a rate of its own for a currency converts by these. \"\" removes them.",
        label: "Currency rates",
        help: "What one unit of a currency is worth, such as EUR=1.08 USD, XTR=0.013 USD, separated by commas. Left empty: none.",
        choices: &[],
        choice_words: &[],
        json: JsonType::StringMap,
        get: |s| s.currency_rates.text(),
        set: |s, text| {
            s.currency_rates = CurrencyRates::from_text(text)?;
            Ok(())
        },
    },
    Setting {
        name: "watched_bot_tokens",
        about: "Tokens of other bots the space's links lead to (a split link's targets), from \
                @BotFather, only for the health checks: each is asked getMe every \
                target_check_every, and a bot whose token Telegram refuses twice in a row gets \
                no visits until it answers again. At most 16. Write-only: each shown by its \
                last 4 characters. A list replaces the one before; [] removes them.",
        label: "Other bots to watch",
        help: "Tokens of the other bots your split links send visitors to, separated by commas. The tracker asks Telegram about each every minute and stops sending visitors to a bot Telegram has banned. Never shown again; left empty, the list stays as it is.",
        choices: &[],
        choice_words: &[],
        json: JsonType::StringList,
        get: |s| {
            s.watched_bot_tokens
                .iter()
                .map(Secret::expose)
                .collect::<Vec<_>>()
                .join(", ")
        },
        set: |s, text| {
            s.watched_bot_tokens = watched_tokens(text)?;
            Ok(())
        },
    },
    Setting {
        name: "alert_telegram_chat",
        about: "Where the space's bot (telegram_bot_token) sends alerts with sendMessage: a chat \
                id or a public chat's @username, a chat the bot may write to. \"\" none.",
        label: "Chat for alerts",
        help: "The chat your bot tells when a bot or channel goes down or comes back: its id (-100...) or @username; the bot must be allowed to write there. Left empty: no alerts in Telegram.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.alert_telegram_chat.clone().unwrap_or_default(),
        set: |s, text| {
            crate::domain::alert::check_chat(text)?;
            s.alert_telegram_chat = (!text.is_empty()).then(|| text.to_owned());
            Ok(())
        },
    },
    Setting {
        name: "alert_webhook_url",
        about: "An https:// address alerts are POSTed to as JSON, signed as webhooks are \
                (Standard Webhooks) under alert_webhook_secret, which it needs. \"\" none.",
        label: "Address for alerts",
        help: "An https:// address that is sent each alert, signed with the secret below. Left empty: no alerts sent there.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.alert_webhook_url.clone().unwrap_or_default(),
        set: |s, text| {
            s.alert_webhook_url = (!text.is_empty()).then(|| text.to_owned());
            Ok(())
        },
    },
    Setting {
        name: "alert_webhook_secret",
        about: "The Standard Webhooks secret alerts to alert_webhook_url are signed under: \
                whsec_ and the base64 of 24 to 64 random bytes. Write-only: shown by its last \
                4 characters. \"\" removes it.",
        label: "Secret that signs alerts",
        help: "whsec_ and the base64 of 32 random bytes, which your receiver checks the signature with. Never shown again; left empty, it stays as it is.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| {
            s.alert_webhook_secret
                .as_ref()
                .map_or_else(String::new, |t| t.expose().to_owned())
        },
        set: |s, text| {
            crate::domain::alert::check_webhook_secret(text)?;
            s.alert_webhook_secret = (!text.is_empty()).then(|| Secret::new(text.to_owned()));
            Ok(())
        },
    },
    Setting {
        name: "ecb_rates_url",
        about: "Where the European Central Bank's daily reference rates are fetched from, once a \
                day, for the stats in the reporting currency: \
                https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml to use them. Each \
                day's rates are kept for that day; a rate in currency_rates wins over the ECB's \
                for its currency. \"\" (the default) fetches none.",
        label: "Daily rates from the European Central Bank",
        help: "To convert with the European Central Bank's rates of each day, put https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml here. A rate you type under Currency rates wins over the bank's for that currency. Left empty: the bank's rates are not fetched.",
        choices: &[],
        choice_words: &[],
        json: JsonType::String,
        get: |s| s.ecb_rates_url.clone().unwrap_or_default(),
        set: |s, text| {
            s.ecb_rates_url = crate::domain::ecb::check_url(text)?;
            Ok(())
        },
    },
];

/// The settings whose value is a secret: stored as it is, shown by its last 4 characters.
const WRITE_ONLY: [&str; 4] = [
    "telegram_bot_token",
    "meta_ads_token",
    "watched_bot_tokens",
    "alert_webhook_secret",
];

/// Whether setting `name` is write-only (a secret, shown by its last 4 characters).
#[must_use]
pub fn is_write_only(name: &str) -> bool {
    WRITE_ONLY.contains(&name)
}

/// `text` of setting `name` as answers and pages show it.
fn shown(name: &str, text: String) -> String {
    if !WRITE_ONLY.contains(&name) || text.is_empty() {
        return text;
    }
    match setting(name).map(|s| s.json) {
        Some(JsonType::StringList) => text
            .split(", ")
            .map(|t| Secret::new(t.to_owned()).last4())
            .collect::<Vec<_>>()
            .join(", "),
        _ => Secret::new(text).last4(),
    }
}

fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

fn names() -> String {
    SETTINGS.map(|s| s.name).join(", ")
}

impl SpaceSettings {
    /// Every setting's name and value as text, in [`SETTINGS`] order, as answers and pages
    /// show them (a write-only one by its last 4 characters).
    #[must_use]
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        SETTINGS
            .iter()
            .map(|s| (s.name, shown(s.name, (s.get)(self))))
            .collect()
    }

    /// Every setting's name and value as text, secrets whole: what the data file keeps.
    #[must_use]
    pub fn stored_pairs(&self) -> Vec<(&'static str, String)> {
        SETTINGS.iter().map(|s| (s.name, (s.get)(self))).collect()
    }

    /// The settings that `pairs` holds, the others at their defaults; an error names what does
    /// not read (a stored record this build cannot hold).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<SpaceSettings, String> {
        let mut settings = SpaceSettings::default();
        for (name, value) in pairs {
            let s = setting(name).ok_or_else(|| format!("unknown setting {name:?}"))?;
            (s.set)(&mut settings, value).map_err(|why| format!("`{name}` {why}"))?;
        }
        Ok(settings)
    }
}

/// In JSON, an object of every setting under its name, with its JSON type.
impl Serialize for SpaceSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(SETTINGS.len()))?;
        for s in &SETTINGS {
            let text = shown(s.name, (s.get)(self));
            match s.json {
                JsonType::String => map.serialize_entry(s.name, &text)?,
                JsonType::Boolean => map.serialize_entry(s.name, &(text == "true"))?,
                JsonType::StringMap => {
                    let rates = CurrencyRates::text_pairs(&text).unwrap_or_default();
                    map.serialize_entry(s.name, &rates)?;
                }
                JsonType::StringList => {
                    let items: Vec<&str> = text.split(", ").filter(|t| !t.is_empty()).collect();
                    map.serialize_entry(s.name, &items)?;
                }
            }
        }
        map.end()
    }
}

impl Setting {
    /// What a form offers to choose from, `(value, words)`: its choices, or for the time zone
    /// [`zones_offered`](crate::domain::setting_values::zones_offered); empty for free text.
    #[must_use]
    pub fn offered(&self, current: &str) -> Vec<(String, String)> {
        if self.name == "time_zone" {
            return crate::domain::setting_values::zones_offered(current);
        }
        let words = self.choice_words.iter().map(|w| (*w).to_owned());
        self.choices
            .iter()
            .map(|v| (*v).to_owned())
            .zip(words)
            .collect()
    }

    /// The schema of its JSON value: its type, its choices where it has a fixed few, and what
    /// it decides.
    pub(crate) fn schema(&self) -> serde_json::Value {
        let mut schema = match (self.json, self.choices) {
            (JsonType::Boolean, _) => serde_json::json!({"type": "boolean"}),
            (JsonType::StringMap, _) => serde_json::json!({
                "type": "object",
                "additionalProperties": {"type": "string"},
            }),
            (JsonType::StringList, _) => serde_json::json!({
                "type": "array",
                "items": {"type": "string"},
                "maxItems": MAX_WATCHED_BOTS,
            }),
            (JsonType::String, []) => serde_json::json!({"type": "string"}),
            (JsonType::String, choices) => serde_json::json!({"type": "string", "enum": choices}),
        };
        schema["description"] = self.about.into();
        schema
    }
}

/// The schema of what [`Serialize`] writes: every setting of [`SETTINGS`], always present.
impl JsonSchema for SpaceSettings {
    fn schema_name() -> Cow<'static, str> {
        "SpaceSettings".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let properties: serde_json::Map<String, serde_json::Value> = SETTINGS
            .iter()
            .map(|s| (s.name.to_owned(), s.schema()))
            .collect();
        json_schema!({
            "type": "object",
            "description": "Every setting of the space, each at its default until set.",
            "properties": properties,
            "required": SETTINGS.map(|s| s.name),
        })
    }
}

impl<'de> Deserialize<'de> for SpaceSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let values = serde_json::Map::<String, serde_json::Value>::deserialize(deserializer)?;
        let texts: Vec<(String, String)> = values
            .into_iter()
            .map(|(name, v)| {
                let text = match &v {
                    serde_json::Value::String(text) => text.clone(),
                    serde_json::Value::Object(members) => members
                        .iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                        .collect::<Vec<_>>()
                        .join(", "),
                    serde_json::Value::Array(items) => items
                        .iter()
                        .map(|v| v.as_str().unwrap_or_default())
                        .collect::<Vec<_>>()
                        .join(", "),
                    other => other.to_string(),
                };
                (name, text)
            })
            .collect();
        // A write-only setting comes back as answers show it (`…` and its last 4 characters),
        // which is no value of its rule: it is kept as shown.
        let is_shown =
            |(n, v): &&(String, String)| WRITE_ONLY.contains(&n.as_str()) && v.starts_with('…');
        let mut settings = SpaceSettings::from_pairs(
            texts
                .iter()
                .filter(|p| !is_shown(p))
                .map(|(n, v)| (n.as_str(), v.as_str())),
        )
        .map_err(de::Error::custom)?;
        for (name, v) in texts.iter().filter(|p| is_shown(p)) {
            let shown = Some(Secret::new(v.clone()));
            match name.as_str() {
                "meta_ads_token" => settings.meta_ads_token = shown,
                "alert_webhook_secret" => settings.alert_webhook_secret = shown,
                "watched_bot_tokens" => {
                    settings.watched_bot_tokens =
                        v.split(", ").map(|t| Secret::new(t.to_owned())).collect();
                }
                _ => settings.telegram_bot_token = shown,
            }
        }
        Ok(settings)
    }
}

/// Settings to change, each checked against its rule: what every way in hands the writer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettingsPatch {
    /// `(name, value)` as text, in the order given.
    changes: Vec<(String, String)>,
}

impl SettingsPatch {
    /// The one check of a change: each name a setting, named once, each value within its rule.
    /// A broken rule is `invalid_field` naming the setting.
    pub fn new(
        changes: impl IntoIterator<Item = (String, String)>,
    ) -> Result<SettingsPatch, Error> {
        let changes: Vec<(String, String)> = changes.into_iter().collect();
        let mut seen = BTreeSet::new();
        let mut check = SpaceSettings::default();
        for (name, value) in &changes {
            let Some(s) = setting(name) else {
                return Err(Error::field(
                    Code::InvalidField,
                    "settings",
                    format!(
                        "there is no setting {}; the settings are {}",
                        quoted(name),
                        names()
                    ),
                ));
            };
            if !seen.insert(s.name) {
                return Err(Error::field(
                    Code::InvalidField,
                    s.name,
                    format!("`{}` is given twice", s.name),
                ));
            }
            (s.set)(&mut check, value).map_err(|why| {
                Error::field(Code::InvalidField, s.name, format!("`{}` {why}", s.name))
            })?;
        }
        Ok(SettingsPatch { changes })
    }

    /// The value this patch gives setting `name`, if it gives one.
    #[must_use]
    pub fn value(&self, name: &str) -> Option<&str> {
        self.changes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// From the command line's `key=value` arguments.
    pub fn from_assignments(assignments: &[String]) -> Result<SettingsPatch, Error> {
        let changes = assignments
            .iter()
            .map(|a| {
                a.split_once('=')
                    .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
                    .ok_or_else(|| {
                        Error::field(
                            Code::InvalidField,
                            "settings",
                            format!(
                                "a setting is written name=value (attribution=last_touch), got {}",
                                quoted(a)
                            ),
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()?;
        SettingsPatch::new(changes)
    }

    /// From a `PATCH /space` body: a JSON object of any of the settings, each of its JSON type;
    /// `null` counts as absent. A name that is no setting, or given twice, or a value of the wrong
    /// JSON type is `invalid_json`, as in every body.
    pub fn from_json(body: &[u8]) -> Result<SettingsPatch, Error> {
        let SettingsBody(fields) = input::parse_body(body)?;
        let mut changes = Vec::new();
        for (name, raw) in fields {
            let Some(s) = setting(&name) else {
                return Err(Error::new(
                    Code::InvalidJson,
                    format!(
                        "request body has a field problem: unknown field {}, expected one of {}",
                        quoted(&name),
                        names()
                    ),
                ));
            };
            if raw.get() == "null" {
                continue;
            }
            let text = match s.json {
                JsonType::String => input::json_string(raw, s.name)?,
                JsonType::Boolean => input::json_bool(raw, s.name)?.to_string(),
                JsonType::StringMap => {
                    let rates = input::json_string_map(
                        raw,
                        s.name,
                        "an object of rates such as {\"EUR\": \"1.08 USD\"}",
                    )?;
                    if let Some(key) = rates.keys().find(|k| k.contains([',', '=', '\n'])) {
                        return Err(Error::field(
                            Code::InvalidField,
                            s.name,
                            format!("`{}` has no currency {}", s.name, quoted(key)),
                        ));
                    }
                    rates
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
                JsonType::StringList => {
                    let items: Vec<String> = serde_json::from_str(raw.get())
                        .map_err(|_| input::wrong_type(s.name, "a list of strings", raw))?;
                    if let Some(i) = items.iter().position(|t| t.contains(',')) {
                        return Err(Error::field(
                            Code::InvalidField,
                            s.name,
                            format!("`{}` [{i}] is no bot token", s.name),
                        ));
                    }
                    items.join(", ")
                }
            };
            changes.push((name, text));
        }
        SettingsPatch::new(changes)
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Applies the change to `settings`.
    ///
    /// # Errors
    /// Never for a patch made by [`SettingsPatch::new`], which checked every value; the error
    /// is there for one that came over the control socket unchecked.
    pub fn apply(&self, settings: &mut SpaceSettings) -> Result<(), Error> {
        let checked = SettingsPatch::new(self.changes.clone())?;
        let graph_url = settings.meta_graph_url.clone();
        for (name, value) in &checked.changes {
            if let Some(s) = setting(name) {
                (s.set)(settings, value).map_err(|why| {
                    Error::field(Code::InvalidField, s.name, format!("`{}` {why}", s.name))
                })?;
            }
        }
        // The stored token, which nobody can read back, goes only to the address it was given
        // for.
        if settings.meta_graph_url != graph_url
            && settings.meta_ads_token.is_some()
            && self.value("meta_ads_token").is_none()
        {
            return Err(Error::field(
                Code::InvalidField,
                "meta_ads_token",
                "changing `meta_graph_url` sends `meta_ads_token` to another address: give \
                 `meta_ads_token` again in the same change",
            ));
        }
        crate::domain::alert::check_webhook_signed(
            settings.alert_webhook_url.is_some(),
            settings.alert_webhook_secret.is_some(),
        )
    }
}

/// The body of `PATCH /space`: any of the settings of [`SETTINGS`], each of its JSON type or
/// `null` (absent); a name that is no setting is `invalid_json`.
impl JsonSchema for SettingsBody<'_> {
    fn schema_name() -> Cow<'static, str> {
        "SettingsPatch".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let properties: serde_json::Map<String, serde_json::Value> = SETTINGS
            .iter()
            .map(|s| {
                let schema = serde_json::json!({"anyOf": [s.schema(), {"type": "null"}]});
                (s.name.to_owned(), schema)
            })
            .collect();
        json_schema!({
            "type": "object",
            "description": "Any of the settings (`SpaceSettings`); one sent as `null` counts as \
                            absent. A field that is no setting is `invalid_json`.",
            "properties": properties,
            "additionalProperties": false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_is_labelled_in_words_and_each_choice_has_its_words() {
        for s in &SETTINGS {
            assert!(!s.label.is_empty() && !s.help.is_empty(), "{}", s.name);
            assert!(
                !s.help.contains("\"\""),
                "{}: the page says what empty does in words",
                s.name
            );
            assert_eq!(s.choices.len(), s.choice_words.len(), "{}", s.name);
        }
    }

    #[test]
    fn the_time_zone_is_chosen_from_the_zones_the_server_knows() {
        let zone = SETTINGS.iter().find(|s| s.name == "time_zone").unwrap();
        let offered = zone.offered("UTC");
        let values: Vec<&str> = offered.iter().map(|(v, _)| v.as_str()).collect();
        for known in ["UTC", "Europe/Berlin", "Asia/Kolkata", "America/New_York"] {
            assert!(values.contains(&known), "{known}");
        }
        assert!(values.windows(2).all(|w| w[0] < w[1]), "sorted, once each");
        assert!(offered.contains(&("America/New_York".into(), "America/New York".into())));
        assert!(
            zone.offered("EST").iter().any(|(v, _)| v == "EST"),
            "the current kept"
        );
        assert!(!values.contains(&"EST"));
    }

    fn patch(body: &str) -> Result<SpaceSettings, Error> {
        let mut s = SpaceSettings::default();
        SettingsPatch::from_json(body.as_bytes())?.apply(&mut s)?;
        Ok(s)
    }

    #[test]
    fn attribution_takes_first_and_last_touch() {
        assert_eq!(
            SpaceSettings::default().attribution,
            Attribution::FirstTouch
        );
        assert_eq!(
            patch(r#"{"attribution":"last_touch"}"#)
                .unwrap()
                .attribution,
            Attribution::LastTouch
        );
        assert_eq!(
            patch(r#"{"attribution":"first_touch"}"#)
                .unwrap()
                .attribution,
            Attribution::FirstTouch
        );
        for bad in ["Last_touch", "last", "", "last_touch "] {
            let e = patch(&format!(r#"{{"attribution":"{bad}"}}"#)).unwrap_err();
            assert_eq!(
                (e.code, e.field),
                (Code::InvalidField, Some("attribution")),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_body_is_any_subset_and_nothing_else() {
        assert_eq!(patch("{}").unwrap(), SpaceSettings::default());
        assert_eq!(
            patch(r#"{"attribution":null}"#).unwrap(),
            SpaceSettings::default()
        );
        for (body, code) in [
            (r#"{"atribution":"last_touch"}"#, Code::InvalidJson),
            (r#"{"attribution":1}"#, Code::InvalidJson),
            (
                r#"{"attribution":"last_touch","attribution":"first_touch"}"#,
                Code::InvalidJson,
            ),
            ("[]", Code::InvalidJson),
            ("", Code::InvalidJson),
        ] {
            assert_eq!(patch(body).unwrap_err().code, code, "{body}");
        }
        let unknown = patch(r#"{"atribution":"last_touch"}"#).unwrap_err().message;
        assert!(
            unknown.contains("atribution") && unknown.contains("attribution"),
            "{unknown}"
        );
    }

    #[test]
    fn a_time_zone_is_an_iana_name() {
        for good in ["UTC", "Europe/Berlin", "Asia/Kolkata", "America/St_Johns"] {
            let p = SettingsPatch::from_assignments(&[format!("time_zone={good}")]).unwrap();
            let mut s = SpaceSettings::default();
            p.apply(&mut s).unwrap();
            assert_eq!(s.time_zone.as_str(), good);
        }
        assert_eq!(SpaceSettings::default().time_zone.as_str(), "UTC");
        for bad in ["Mars/Olympus", "", "+05:30", "Europe/Berlin "] {
            let e = SettingsPatch::new([("time_zone".to_owned(), bad.to_owned())]).unwrap_err();
            assert_eq!(e.field, Some("time_zone"), "{bad:?}");
        }
    }

    #[test]
    fn assignments_are_name_equals_value() {
        let p = SettingsPatch::from_assignments(&["attribution=last_touch".into()]).unwrap();
        let mut s = SpaceSettings::default();
        p.apply(&mut s).unwrap();
        assert_eq!(s.attribution, Attribution::LastTouch);
        for bad in ["attribution", "colour=red", "attribution=sometimes"] {
            let e = SettingsPatch::from_assignments(&[bad.into()]).unwrap_err();
            assert_eq!(e.code, Code::InvalidField, "{bad}");
        }
        let twice = SettingsPatch::from_assignments(&[
            "attribution=last_touch".into(),
            "attribution=first_touch".into(),
        ]);
        assert_eq!(twice.unwrap_err().field, Some("attribution"));
    }

    /// The reporting currency is a currency the tracker takes, or "" for the default; the
    /// rates are an object in JSON and `EUR=1.08 USD` as text, each value a positive amount
    /// and an ISO 4217 code.
    #[test]
    fn a_reporting_currency_and_rates_have_their_rules() {
        let s = patch(r#"{"reporting_currency": "eur", "currency_rates": {"XTR": "0.013 USD"}}"#)
            .unwrap();
        assert_eq!(s.reporting_currency.as_deref(), Some("EUR"));
        assert_eq!(s.currency_rates.shown()["XTR"], "0.013 USD");
        assert_eq!(
            patch(r#"{"reporting_currency": ""}"#)
                .unwrap()
                .reporting_currency,
            None
        );
        for (body, field) in [
            (r#"{"reporting_currency": "US"}"#, "reporting_currency"),
            (
                r#"{"reporting_currency": "ABCDEFGHIJK"}"#,
                "reporting_currency",
            ),
            (r#"{"currency_rates": {"EUR": "1.08"}}"#, "currency_rates"),
            (r#"{"currency_rates": {"EUR": "0 USD"}}"#, "currency_rates"),
            (r#"{"currency_rates": {"EUR": "1 XTR"}}"#, "currency_rates"),
            (r#"{"currency_rates": {"E=R": "1 USD"}}"#, "currency_rates"),
            (r#"{"currency_rates": "EUR=1.08 USD"}"#, "currency_rates"),
            (r#"{"currency_rates": {"EUR": 1.08}}"#, "currency_rates"),
        ] {
            let e = patch(body).unwrap_err();
            assert_eq!(e.field, Some(field), "{body}: {}", e.message);
        }
        // Just inside: 3 and 10 characters, the smallest positive rate.
        assert!(patch(r#"{"reporting_currency": "ABC"}"#).is_ok());
        assert!(patch(r#"{"reporting_currency": "ABCDEFGHIJ"}"#).is_ok());
        assert!(patch(r#"{"currency_rates": {"EUR": "0.000001 USD"}}"#).is_ok());
        let cli =
            SettingsPatch::from_assignments(&["currency_rates=EUR=1.08 USD, XTR=0.013 USD".into()])
                .unwrap();
        let mut s = SpaceSettings::default();
        cli.apply(&mut s).unwrap();
        assert_eq!(s.currency_rates.shown().len(), 2);
        let e =
            SettingsPatch::from_assignments(&["currency_rates=EUR 1.08 USD".into()]).unwrap_err();
        assert!(e.message.contains("EUR=1.08 USD"), "{}", e.message);
    }

    #[test]
    fn settings_round_trip_as_pairs_and_json() {
        const TOKEN: &str = "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
        let s = SpaceSettings {
            attribution: Attribution::LastTouch,
            meta_client_hints: true,
            time_zone: TimeZoneName::parse("Asia/Kathmandu").unwrap(),
            telegram_bot_token: Some(Secret::new(TOKEN.to_owned())),
            meta_ads_account: Some("act_42".into()),
            meta_ads_token: Some(Secret::new("EAAGtoken0123456789".into())),
            meta_graph_url: GraphUrl::parse("http://127.0.0.1:9").unwrap(),
            meta_graph_version: Some("v23.0".into()),
            reporting_currency: Some("EUR".into()),
            currency_rates: CurrencyRates::from_text("usd=0.93 eur, XTR=0.012 EUR").unwrap(),
            watched_bot_tokens: vec![
                Secret::new(TOKEN.replace("aw0", "aw2")),
                Secret::new(TOKEN.replace("aw0", "aw3")),
            ],
            alert_telegram_chat: Some("@alerts_chat".into()),
            alert_webhook_url: Some("https://hooks.example.com/a".into()),
            alert_webhook_secret: Some(Secret::new(
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
            )),
            ecb_rates_url: Some(crate::domain::ecb::ECB_DAILY_URL.into()),
        };
        let pairs = s.pairs();
        assert_eq!(
            pairs,
            vec![
                ("attribution", "last_touch".to_owned()),
                ("meta_client_hints", "true".to_owned()),
                ("time_zone", "Asia/Kathmandu".to_owned()),
                ("telegram_bot_token", "…saw0".to_owned()),
                ("meta_ads_account", "act_42".to_owned()),
                ("meta_ads_token", "…6789".to_owned()),
                ("meta_graph_url", "http://127.0.0.1:9".to_owned()),
                ("meta_graph_version", "v23.0".to_owned()),
                ("reporting_currency", "EUR".to_owned()),
                ("currency_rates", "USD=0.93 EUR, XTR=0.012 EUR".to_owned()),
                ("watched_bot_tokens", "…saw2, …saw3".to_owned()),
                ("alert_telegram_chat", "@alerts_chat".to_owned()),
                (
                    "alert_webhook_url",
                    "https://hooks.example.com/a".to_owned()
                ),
                ("alert_webhook_secret", "…LaSw".to_owned()),
                (
                    "ecb_rates_url",
                    crate::domain::ecb::ECB_DAILY_URL.to_owned()
                ),
            ]
        );
        let stored = s.stored_pairs();
        assert_eq!(stored[3], ("telegram_bot_token", TOKEN.to_owned()));
        let back = SpaceSettings::from_pairs(stored.iter().map(|(n, v)| (*n, v.as_str()))).unwrap();
        assert_eq!(back, s);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"attribution": "last_touch", "meta_client_hints": true,
                "time_zone": "Asia/Kathmandu", "telegram_bot_token": "…saw0",
                "meta_ads_account": "act_42", "meta_ads_token": "…6789",
                "meta_graph_url": "http://127.0.0.1:9", "meta_graph_version": "v23.0",
                "reporting_currency": "EUR",
                "currency_rates": {"USD": "0.93 EUR", "XTR": "0.012 EUR"},
                "watched_bot_tokens": ["…saw2", "…saw3"],
                "alert_telegram_chat": "@alerts_chat",
                "alert_webhook_url": "https://hooks.example.com/a",
                "alert_webhook_secret": "…LaSw",
                "ecb_rates_url": crate::domain::ecb::ECB_DAILY_URL})
        );
        let shown = serde_json::from_value::<SpaceSettings>(json.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&shown).unwrap(),
            json,
            "shown as it was"
        );
        assert!(SpaceSettings::from_pairs([("colour", "red")]).is_err());
    }

    #[test]
    fn metas_ad_account_token_and_address_have_their_shapes() {
        assert!(check_ad_account("act_1").is_ok());
        assert!(check_ad_account(&format!("act_{}", "9".repeat(20))).is_ok());
        for bad in [
            "act_",
            "1234",
            "act_12a",
            &format!("act_{}", "9".repeat(21)),
        ] {
            assert!(check_ad_account(bad).is_err(), "{bad}");
        }
        let t = |n: usize| "E".repeat(n);
        assert!(check_meta_token(&t(16)).is_ok());
        assert!(check_meta_token(&t(META_TOKEN_MAX_CHARS)).is_ok());
        assert!(check_meta_token("EAAB|x.y-z_0123456789").is_ok());
        for bad in [t(15), t(META_TOKEN_MAX_CHARS + 1), format!("{} x", t(20))] {
            let why = check_meta_token(&bad).unwrap_err();
            assert!(!why.contains(&bad), "the value is never repeated");
        }
        assert_eq!(GraphUrl::parse("").unwrap(), GraphUrl::default());
        assert_eq!(
            GraphUrl::parse("http://127.0.0.1:9/graph/")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/graph"
        );
        let long = format!("https://a.example/{}", "p".repeat(256 - 18));
        assert_eq!(long.len(), 256);
        assert!(GraphUrl::parse(&long).is_ok());
        for bad in [
            format!("{long}p"),
            "ftp://a.example".into(),
            "https://a.example/?x=1".into(),
            "graph.facebook.com".into(),
            "https://u:p@a.example".into(),
        ] {
            assert!(GraphUrl::parse(&bad).is_err(), "{bad}");
        }
        let patch = SettingsPatch::new([
            ("meta_ads_account".into(), "act_42".into()),
            ("meta_ads_token".into(), t(20)),
        ])
        .unwrap();
        let mut s = SpaceSettings::default();
        patch.apply(&mut s).unwrap();
        let shown: Vec<_> = s.pairs().into_iter().skip(4).take(4).collect();
        assert_eq!(
            shown,
            [
                ("meta_ads_account", "act_42".to_owned()),
                ("meta_ads_token", "…EEEE".to_owned()),
                ("meta_graph_url", META_GRAPH_URL.to_owned()),
                ("meta_graph_version", String::new()),
            ]
        );
    }

    /// `meta_graph_version`: `v` and two numbers of 1 to 3 digits; "" is this release's.
    #[test]
    fn a_graph_version_is_v_and_two_numbers() {
        for good in ["v25.0", "v1.0", "v999.999", ""] {
            let mut s = SpaceSettings::default();
            let set = SettingsPatch::new([("meta_graph_version".into(), good.into())])
                .and_then(|p| p.apply(&mut s));
            assert!(set.is_ok(), "{good}: {set:?}");
            assert_eq!(
                s.meta_graph_version.as_deref(),
                Some(good).filter(|g| !g.is_empty())
            );
        }
        for bad in [
            "25.0", "v25", "v1000.0", "v25.1000", "v25.0 ", "v.0", "v2x.0",
        ] {
            let e = SettingsPatch::new([("meta_graph_version".into(), bad.into())]).unwrap_err();
            assert_eq!(e.field, Some("meta_graph_version"), "{bad}");
        }
    }

    /// A stored `meta_ads_token` goes only where it was given: a new `meta_graph_url` takes a
    /// new token in the same change; the same address, or no token stored, needs none.
    #[test]
    fn a_new_graph_url_takes_a_new_ads_token() {
        let t = "EAAB".repeat(5);
        let stored = || {
            let mut s = SpaceSettings::default();
            SettingsPatch::new([("meta_ads_token".into(), t.clone())])
                .unwrap()
                .apply(&mut s)
                .unwrap();
            s
        };
        let change = |pairs: &[(&str, &str)], s: &mut SpaceSettings| {
            SettingsPatch::new(
                pairs
                    .iter()
                    .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
            )
            .unwrap()
            .apply(s)
        };
        let elsewhere = ("meta_graph_url", "https://collector.example");
        let e = change(&[elsewhere], &mut stored()).unwrap_err();
        assert_eq!(
            (e.code, e.field),
            (Code::InvalidField, Some("meta_ads_token"))
        );
        assert!(e.message.contains("meta_graph_url"), "{e:?}");
        assert!(change(&[elsewhere, ("meta_ads_token", &t)], &mut stored()).is_ok());
        assert!(change(&[elsewhere, ("meta_ads_token", "")], &mut stored()).is_ok());
        assert!(change(&[("meta_graph_url", META_GRAPH_URL)], &mut stored()).is_ok());
        assert!(change(&[elsewhere], &mut SpaceSettings::default()).is_ok());
    }

    #[test]
    fn a_bot_serves_one_space() {
        let key = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0";
        let shops = [("shop", "7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0")];
        // The same bot, by the token @BotFather issued it since: refused, naming the space.
        let e = check_bot_unshared("7000000001:BBBdqTcvCH1vGWJxfSeofSAs0K5PALDsaw9", shops)
            .unwrap_err();
        assert_eq!(
            (e.code, e.field),
            (Code::InvalidField, Some("telegram_bot_token"))
        );
        assert!(e.message.contains("\"shop\""), "{}", e.message);
        assert!(!e.message.contains(key), "the token is never repeated");
        // Bots whose ids are one apart, or begin alike: each a bot of its own.
        for other in ["7000000002", "7000000000", "700000000", "70000000011"] {
            let token = format!("{other}:{key}");
            assert!(check_bot_unshared(&token, shops).is_ok(), "{other}");
        }
        assert!(check_bot_unshared(shops[0].1, []).is_ok());
    }

    #[test]
    fn a_bot_token_has_telegrams_shape() {
        let key = |n: usize| "A".repeat(n);
        assert!(check_bot_token(&format!("1:{}", key(30))).is_ok());
        assert!(check_bot_token(&format!("{}:{}", "9".repeat(20), key(64))).is_ok());
        assert!(check_bot_token("7000000001:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw0").is_ok());
        for bad in [
            format!("1:{}", key(29)),
            format!("1:{}", key(65)),
            format!("{}:{}", "9".repeat(21), key(30)),
            format!(":{}", key(30)),
            format!("1a:{}", key(30)),
            format!("1:{}!", key(30)),
            key(40),
        ] {
            let why = check_bot_token(&bad).unwrap_err();
            assert!(!why.contains(&bad), "the value is never repeated");
        }
        let patch = SettingsPatch::new([("telegram_bot_token".into(), "x".into())]);
        assert_eq!(patch.unwrap_err().field, Some("telegram_bot_token"));
        let clear = SettingsPatch::new([("telegram_bot_token".into(), String::new())]).unwrap();
        let mut s = SpaceSettings {
            telegram_bot_token: Some(Secret::new("t".into())),
            ..SpaceSettings::default()
        };
        clear.apply(&mut s).unwrap();
        assert_eq!(s.telegram_bot_token, None, "\"\" removes it");
    }
}
