//! A destination's fields as every way in gives them (a body, flags, the admin form), before
//! any platform's rules check them: what each room reads its settings from.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error};

/// A destination's fields as every way in gives them, before they are checked.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DestinationFields {
    pub name: Option<String>,
    pub kind: Option<String>,
    /// Event names; `None`: all four.
    pub events: Option<Vec<String>>,
    pub only_attributed: Option<bool>,
    pub pixel_id: Option<String>,
    pub access_token: Option<String>,
    pub test_event_code: Option<String>,
    pub api_version: Option<String>,
    pub graph_url: Option<String>,
    pub url: Option<String>,
    /// `meta_capi`: the event name sent per kind (and `first_deposit`).
    pub event_names: Option<BTreeMap<String, String>>,
    /// `meta_capi`: `{"XTR": "0.013 USD"}`.
    pub currency_rates: Option<BTreeMap<String, String>>,
    /// `postback`: the word `{status}` gives per event kind.
    pub statuses: Option<BTreeMap<String, String>>,
    /// An ad platform's pixel, by its code.
    pub pixel_code: Option<String>,
    /// An ad platform's API address.
    pub api_url: Option<String>,
    /// `google_ads`: the conversion action name written per kind (and `first_deposit`).
    pub conversion_names: Option<BTreeMap<String, String>>,
    /// `google_ads`: the user name Google Ads fetches the file with.
    pub user: Option<String>,
}

/// `missing_field` for `field`, which is required `why`.
pub(super) fn missing(field: &'static str, why: &str) -> Error {
    Error::field(
        Code::MissingField,
        field,
        format!("{field} is required {why}"),
    )
}

impl DestinationFields {
    /// The fields of a kind of their own that were given.
    pub(super) fn given(&self) -> Vec<&'static str> {
        [
            ("pixel_id", self.pixel_id.is_some()),
            ("access_token", self.access_token.is_some()),
            ("test_event_code", self.test_event_code.is_some()),
            ("api_version", self.api_version.is_some()),
            ("graph_url", self.graph_url.is_some()),
            ("url", self.url.is_some()),
            ("event_names", self.event_names.is_some()),
            ("currency_rates", self.currency_rates.is_some()),
            ("statuses", self.statuses.is_some()),
            ("pixel_code", self.pixel_code.is_some()),
            ("api_url", self.api_url.is_some()),
            ("conversion_names", self.conversion_names.is_some()),
            ("user", self.user.is_some()),
        ]
        .into_iter()
        .filter(|(_, given)| *given)
        .map(|(field, _)| field)
        .collect()
    }
}
