//! Meta's Marketing API insights, as far as spend is read from it: `GET
//! <meta_graph_url>/<meta_graph_version>/<act_id>/insights` with `level=ad`, `time_increment=1`,
//! the fields `campaign_name,adset_name,ad_name,spend,account_currency`, a `time_range` of days,
//! a `filtering` on `ad.effective_status` that names every status (deleted and archived ads
//! included: Meta leaves them out of an account's insights otherwise) and the access token,
//! answered `{"data": [...], "paging": {"next": ...}}` a page at a time; each `paging.next` is
//! followed until a page has none. Errors are Meta's `{"error": {"code", "message", ...}}`, read
//! by the one reading of Meta's answers ([`crate::platform::meta::meta_answer`]), which also
//! says when the token no longer works.
//!
//! A range Meta finds too large to answer at once ("reduce the amount of data", code `100`
//! subcode `1504018`, or `2` subcode `1504038`) is asked again in halves, down to single days:
//! the same synchronous request, so no report is left running at Meta when a fetch stops, and
//! nothing waits on Meta's queue of asynchronous jobs. A range's rows count only once the whole
//! range was read.
//!
//! Every answer is read up to a bound ([`PAGE_BYTES`], [`ACCOUNT_BYTES`]) and refused past it,
//! whatever address `meta_graph_url` names.
//!
//! The token is in every URL, so no URL of this file is ever logged or put in an error: errors
//! carry Meta's message or the transport's words, with the token cut out.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::cost::{self, AdNames, Cost, Day, Source};
use crate::outbound::error_words;
use crate::platform::{
    Answer, asks_for_less, meta_answer, names_old_version, names_unknown_object,
};

/// The Graph API version asked for unless the space's `meta_graph_version` says otherwise: the
/// one Meta destinations use unless told otherwise, so one constant follows Meta's retirements.
pub const DEFAULT_GRAPH_VERSION: &str = crate::platform::DEFAULT_API_VERSION;
/// The fields asked for, per ad and day.
pub const FIELDS: &str = "campaign_name,adset_name,ad_name,spend,account_currency";
/// Every `effective_status` of an ad (Meta's Ad reference), so that ads deleted or archived
/// since still bring the spend of the days they ran.
pub const AD_STATUSES: [&str; 12] = [
    "ACTIVE",
    "PAUSED",
    "DELETED",
    "PENDING_REVIEW",
    "DISAPPROVED",
    "PREAPPROVED",
    "PENDING_BILLING_INFO",
    "CAMPAIGN_PAUSED",
    "ARCHIVED",
    "ADSET_PAUSED",
    "IN_PROCESS",
    "WITH_ISSUES",
];
/// The most pages one fetch follows (a page holds up to 25 rows by default, more with
/// `limit`): a `paging.next` that never ends is an error, not a loop.
pub const MAX_PAGES: usize = 2000;
/// Rows asked for per page.
const PAGE_ROWS: u32 = 500;
/// The largest page read: [`PAGE_ROWS`] rows of three names of 512 characters (the longest a
/// cost takes), every character escaped (`\uXXXX`), come to under 5 MiB.
pub const PAGE_BYTES: usize = 8 << 20;
/// The largest answer about the ad account (its time zone): a few dozen bytes by nature.
pub const ACCOUNT_BYTES: usize = 64 << 10;

/// Why a fetch did not succeed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Meta refuses the token (`190`, `10`, `200` to `299`): fetching waits for a new one.
    TokenRefused(String),
    /// Anything else: an error answer, no answer, an answer that is not insights.
    Failed(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::TokenRefused(m) => write!(
                f,
                "Meta refuses the token ({m}): set a new meta_ads_token with ads_read"
            ),
            Failure::Failed(m) => f.write_str(m),
        }
    }
}

/// What one fetch read: a cost per day, campaign, ad set and ad (rows of the same names added
/// up), the rows Meta answered, and those left out (a name over its bound, a spend that is not
/// a decimal).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Insights {
    pub costs: Vec<Cost>,
    pub rows: usize,
    pub skipped: usize,
}

/// A page of insights. `data` is required: a `200` without it (a proxy's or another service's
/// answer at `meta_graph_url`) is not a page of no spend.
#[derive(Deserialize)]
struct Page {
    data: Vec<Row>,
    #[serde(default)]
    paging: Option<Paging>,
}

#[derive(Deserialize)]
struct Paging {
    next: Option<String>,
}

#[derive(Deserialize)]
struct Row {
    #[serde(default)]
    campaign_name: String,
    #[serde(default)]
    adset_name: String,
    #[serde(default)]
    ad_name: String,
    #[serde(default)]
    spend: Option<String>,
    #[serde(default)]
    account_currency: String,
    date_start: String,
}

/// Where and as whom Meta's Graph API is asked: the guarded client, the check of an address
/// before it is requested (a private one unless allowed), `meta_graph_url`, the version, the
/// ad account and its token.
pub struct Graph<'a, Check> {
    pub client: &'a reqwest::Client,
    pub check: Check,
    pub base: &'a str,
    pub version: &'a str,
    pub account: &'a str,
    pub token: &'a str,
}

/// `text` with `token` cut out, as it is and as a URL's query writes it (an app token's `|`
/// is `%7C` there).
fn hide(text: &str, token: &str) -> String {
    if token.is_empty() {
        return text.to_owned();
    }
    let encoded: String = url::form_urlencoded::byte_serialize(token.as_bytes()).collect();
    text.replace(token, "…").replace(&encoded, "…")
}

/// The origin of a URL (scheme, host, port), to hold `paging.next` to the address asked.
fn origin(url: &reqwest::Url) -> String {
    url.origin().ascii_serialization()
}

/// The `filtering` that asks for every ad, whatever its status.
fn every_status() -> String {
    serde_json::json!([{"field": "ad.effective_status", "operator": "IN", "value": AD_STATUSES}])
        .to_string()
}

/// An ad account's fields, as [`Graph::account_zone`] asks for them.
#[derive(Deserialize)]
struct Account {
    timezone_name: String,
}

/// Why one range was not read.
enum RangeFailure {
    /// Meta asks for less at once: Meta's words.
    TooLarge(String),
    Failed(Failure),
}

impl From<Failure> for RangeFailure {
    fn from(f: Failure) -> RangeFailure {
        RangeFailure::Failed(f)
    }
}

impl<Check: Fn(&str) -> Result<reqwest::Url, String>> Graph<'_, Check> {
    fn failed(&self, m: &str) -> Failure {
        Failure::Failed(hide(m, self.token))
    }

    /// The address of `path` under the account, checked, without its query.
    fn checked(&self, path: &str) -> Result<reqwest::Url, Failure> {
        (self.check)(&format!(
            "{}/{}/{}{path}",
            self.base, self.version, self.account
        ))
        .map_err(|e| self.failed(&format!("meta_graph_url: {e}")))
    }

    /// The first URL of a read of the days `[first, last]`.
    fn first_url(&self, (first, last): (Day, Day)) -> Result<reqwest::Url, Failure> {
        let range = format!(
            r#"{{"since":"{}","until":"{}"}}"#,
            cost::day_text(first),
            cost::day_text(last)
        );
        let mut url = self.checked("/insights")?;
        url.query_pairs_mut()
            .append_pair("level", "ad")
            .append_pair("time_increment", "1")
            .append_pair("fields", FIELDS)
            .append_pair("time_range", &range)
            .append_pair("filtering", &every_status())
            .append_pair("limit", &PAGE_ROWS.to_string())
            .append_pair("access_token", self.token);
        Ok(url)
    }

    /// The ad account's time zone (`timezone_name`, an IANA name): the zone whose days Meta's
    /// insights are by.
    ///
    /// # Errors
    /// [`Failure`]: what Meta or the transport said, the token cut out.
    pub async fn account_zone(&self) -> Result<String, Failure> {
        let mut url = self.checked("")?;
        url.query_pairs_mut()
            .append_pair("fields", "timezone_name")
            .append_pair("access_token", self.token);
        let (status, body) = self.get(url, ACCOUNT_BYTES).await.map_err(|e| match e {
            RangeFailure::TooLarge(words) => self.failed(&words),
            RangeFailure::Failed(f) => f,
        })?;
        serde_json::from_slice::<Account>(&body)
            .map(|a| a.timezone_name)
            .map_err(|e| {
                self.failed(&format!(
                    "Meta answered {status} without the account's zone: {e}"
                ))
            })
    }

    /// One request: the answer's status and body when it is one to read (at most `bound`
    /// bytes).
    async fn get(&self, url: reqwest::Url, bound: usize) -> Result<(u16, Vec<u8>), RangeFailure> {
        let response = self.client.get(url).send().await.map_err(|e| {
            self.failed(&format!(
                "Meta's Graph API did not answer: {}",
                error_words(&e)
            ))
        })?;
        let status = response.status().as_u16();
        let body = crate::outbound::read_bounded(response, bound)
            .await
            .map_err(|e| self.failed(&format!("Meta's Graph API {e}")))?;
        let text = String::from_utf8_lossy(&body);
        if asks_for_less(&text) {
            return Err(RangeFailure::TooLarge(meta_words(status, &text)));
        }
        self.check_answer(status, &text)?;
        Ok((status, body))
    }

    /// Meta's answer `status` with `body`, as a fetch takes it: `Ok` for a page to read.
    fn check_answer(&self, status: u16, body: &str) -> Result<(), Failure> {
        let account = self.account;
        match meta_answer(status, body) {
            Answer::Delivered => Ok(()),
            // A wrong account is not a refused token: the fetch fails naming the setting, and
            // the next hour tries again.
            Answer::TokenRejected { message } if names_unknown_object(body) => {
                Err(self.failed(&format!(
                    "{message}: Meta has no ad account {account} that this token may read; \
                     check meta_ads_account, and that the token's user has the account"
                )))
            }
            // Nor is a version Meta no longer serves.
            Answer::TokenRejected { message } if names_old_version(body) => {
                Err(self.failed(&format!(
                    "{message}: this space asks Meta's Graph API {}, which Meta no longer \
                     serves; set meta_graph_version to a version Meta serves",
                    self.version
                )))
            }
            Answer::TokenRejected { message } => {
                Err(Failure::TokenRefused(hide(&message, self.token)))
            }
            Answer::Retry { .. } | Answer::Refused { .. } => {
                Err(self.failed(&meta_words(status, body)))
            }
        }
    }

    /// Every row of the days `[first, last]`, page by page: the insights' address is checked
    /// before it is requested, and every `paging.next` must have its origin. A range Meta
    /// finds too large is read again in halves, down to single days.
    ///
    /// # Errors
    /// [`Failure`]: what Meta or the transport said, the token cut out.
    pub async fn insights(&self, days: (Day, Day)) -> Result<Insights, Failure> {
        let mut sums: BTreeMap<(Day, String, String, String), Cost> = BTreeMap::new();
        let mut read = Insights::default();
        let mut pages = 0;
        // Ranges still to read, the next last: the earliest first.
        let mut ranges = vec![days];
        while let Some((first, last)) = ranges.pop() {
            match self.range((first, last), &mut pages).await {
                Ok(rows) => {
                    for row in rows {
                        add_row(&mut sums, &mut read, &row);
                    }
                }
                Err(RangeFailure::TooLarge(words)) if first < last => {
                    tracing::info!(
                        account = %self.account,
                        from = %cost::day_text(first),
                        to = %cost::day_text(last),
                        answer = ?words,
                        "Meta asks for fewer days at once: asking in halves"
                    );
                    let middle = first + (last - first) / 2;
                    ranges.push((middle + 1, last));
                    ranges.push((first, middle));
                }
                Err(RangeFailure::TooLarge(words)) => {
                    return Err(self.failed(&format!(
                        "{words}: Meta finds even one day ({}) too much to answer",
                        cost::day_text(first)
                    )));
                }
                Err(RangeFailure::Failed(f)) => return Err(f),
            }
        }
        read.costs = sums.into_values().collect();
        Ok(read)
    }

    /// The rows of one range, every page of it; `pages` counts the fetch's pages.
    async fn range(&self, days: (Day, Day), pages: &mut usize) -> Result<Vec<Row>, RangeFailure> {
        let first = self.first_url(days)?;
        let home = origin(&first);
        let mut next = Some(first);
        let mut rows = Vec::new();
        while let Some(url) = next.take() {
            *pages += 1;
            if *pages > MAX_PAGES {
                return Err(self
                    .failed(&format!("Meta's insights went on past {MAX_PAGES} pages"))
                    .into());
            }
            let (status, body) = self.get(url, PAGE_BYTES).await?;
            let page: Page = serde_json::from_slice(&body).map_err(|e| {
                self.failed(&format!(
                    "Meta answered {status} with a body that is not insights: {e}"
                ))
            })?;
            drop(body);
            rows.extend(page.data);
            if let Some(link) = page.paging.and_then(|p| p.next) {
                let url = reqwest::Url::parse(&link)
                    .map_err(|_| self.failed("Meta's paging.next is not a URL"))?;
                if origin(&url) != home {
                    return Err(self
                        .failed("Meta's paging.next leads to another address than meta_graph_url")
                        .into());
                }
                next = Some(url);
            }
        }
        Ok(rows)
    }
}

/// Meta's answer in a few words: its status and the first 300 characters of its body.
fn meta_words(status: u16, body: &str) -> String {
    let words: String = body.chars().take(300).collect();
    format!("Meta answered {status}: {words}")
}

/// Adds one row of Meta's to the fetch's costs: rows of the same day and names add up; a row
/// that does not read, or of another currency than its names' first, is left out.
fn add_row(
    sums: &mut BTreeMap<(Day, String, String, String), Cost>,
    read: &mut Insights,
    row: &Row,
) {
    read.rows += 1;
    let spend = row.spend.as_deref().unwrap_or("0");
    let ad = AdNames {
        adset_name: &row.adset_name,
        ad_name: &row.ad_name,
    };
    let Ok(mut c) = Cost::of_ad(
        &row.date_start,
        &row.campaign_name,
        ad,
        spend,
        &row.account_currency,
    ) else {
        read.skipped += 1;
        return;
    };
    c.source = Source::Meta;
    let key = (
        c.day,
        c.campaign_name.clone(),
        c.adset_name.clone(),
        c.ad_name.clone(),
    );
    match sums.get_mut(&key) {
        Some(sum) if sum.currency == c.currency => {
            if let Some(added) = sum.amount.checked_add(c.amount) {
                sum.amount = added;
            } else {
                read.skipped += 1;
            }
        }
        Some(_) => read.skipped += 1,
        None => {
            sums.insert(key, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(
        version: &'static str,
    ) -> Graph<'static, impl Fn(&str) -> Result<reqwest::Url, String>> {
        static CLIENT: std::sync::LazyLock<reqwest::Client> =
            std::sync::LazyLock::new(reqwest::Client::new);
        Graph {
            client: &CLIENT,
            check: |url: &str| crate::outbound::check_before_send(url, true),
            base: "http://127.0.0.1:9",
            version,
            account: "act_42",
            token: "TOKEN",
        }
    }

    #[test]
    fn the_first_url_asks_for_every_ad_by_day_and_hides_nothing_it_needs() {
        let url = graph("v25.0")
            .first_url((20781, 20783))
            .unwrap()
            .to_string();
        assert!(url.starts_with("http://127.0.0.1:9/v25.0/act_42/insights?level=ad&time_increment=1&fields=campaign_name%2Cadset_name%2Cad_name%2Cspend%2Caccount_currency&time_range=%7B%22since%22%3A%222026-11-24%22%2C%22until%22%3A%222026-11-26%22%7D&filtering=%5B%7B%22field%22%3A%22ad.effective_status%22%2C%22operator%22%3A%22IN%22%2C%22value%22%3A%5B%22ACTIVE%22"), "{url}");
        assert!(
            url.contains("%22DELETED%22") && url.contains("%22ARCHIVED%22"),
            "{url}"
        );
        assert!(url.ends_with("&access_token=TOKEN"), "{url}");
        let other = graph("v99.0")
            .first_url((20781, 20783))
            .unwrap()
            .to_string();
        assert!(
            other.starts_with("http://127.0.0.1:9/v99.0/act_42/insights?"),
            "{other}"
        );
        assert_eq!(hide("x TOKEN y", "TOKEN"), "x … y");
        assert_eq!(
            hide("?access_token=12%7Cab&x TOKEN", "12|ab"),
            "?access_token=…&x TOKEN"
        );
    }

    /// A refused token stops the hourly fetches until a new one is given; a version Meta no
    /// longer serves is no fault of the token, and fails this fetch only, saying why.
    #[test]
    fn an_old_version_fails_the_fetch_and_blames_no_token() {
        let answer = |code: i64| {
            format!(
                r#"{{"error":{{"message":"(#{code}) no","type":"OAuthException","code":{code}}}}}"#
            )
        };
        let graph = graph("v99.0");
        let check = |code| graph.check_answer(400, &answer(code));
        assert!(matches!(check(190), Err(Failure::TokenRefused(_))));
        for code in [2635, 12] {
            let Err(Failure::Failed(why)) = check(code) else {
                panic!("{code}: {:?}", check(code))
            };
            assert!(
                why.contains("v99.0") && why.contains("meta_graph_version"),
                "{why}"
            );
        }
    }

    /// Only Meta's two "reduce the amount of data" answers split a range; the same codes with
    /// another subcode, or another code, do not.
    #[test]
    fn only_metas_reduce_the_data_answers_ask_for_less() {
        let answer = |code: i64, subcode: i64| {
            format!(
                r#"{{"error":{{"message":"Please reduce the amount of data you're asking for, then retry your request","code":{code},"error_subcode":{subcode}}}}}"#
            )
        };
        assert!(asks_for_less(&answer(100, 1_504_018)));
        assert!(asks_for_less(&answer(2, 1_504_038)));
        for (code, subcode) in [(100, 1_504_038), (2, 1_504_018), (100, 33), (1, 99)] {
            assert!(!asks_for_less(&answer(code, subcode)), "{code}/{subcode}");
        }
        assert!(!asks_for_less("{}"));
    }
}
