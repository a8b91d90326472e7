//! Meta's Marketing API insights, as far as spend is read from it: `GET
//! <meta_graph_url>/<version>/<act_id>/insights` with `level=ad`, `time_increment=1`, the fields
//! `campaign_name,adset_name,ad_name,spend,account_currency`, a `time_range` of days and the
//! access token, answered `{"data": [...], "paging": {"next": ...}}` a page at a time; each
//! `paging.next` is followed until a page has none. Errors are Meta's `{"error": {"code",
//! "message", ...}}`, read by the one reading of Meta's answers
//! ([`crate::platform::meta::meta_answer`]), which also says when the token no longer
//! works.
//!
//! The token is in every URL, so no URL of this file is ever logged or put in an error: errors
//! carry Meta's message or the transport's words, with the token cut out.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::cost::{self, AdNames, Cost, Day, Source};
use crate::outbound::error_words;
use crate::platform::{Answer, meta_answer, names_old_version, names_unknown_object};

/// The Graph API version asked for: the one Meta destinations use unless told otherwise, so
/// one constant follows Meta's retirements.
pub const GRAPH_VERSION: &str = crate::platform::DEFAULT_API_VERSION;
/// The fields asked for, per ad and day.
pub const FIELDS: &str = "campaign_name,adset_name,ad_name,spend,account_currency";
/// The most pages one fetch follows (a page holds up to 25 rows by default, more with
/// `limit`): a `paging.next` that never ends is an error, not a loop.
pub const MAX_PAGES: usize = 2000;
/// Rows asked for per page.
const PAGE_ROWS: u32 = 500;

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
/// answer at `meta_graph_url`) is not a page of no spend, which would remove the range's costs.
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

/// The first URL of a fetch of the days `[first, last]` of `account` at `base`.
fn first_url(base: &str, account: &str, token: &str, (first, last): (Day, Day)) -> String {
    let range = format!(
        r#"{{"since":"{}","until":"{}"}}"#,
        cost::day_text(first),
        cost::day_text(last)
    );
    let query: String = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("level", "ad")
        .append_pair("time_increment", "1")
        .append_pair("fields", FIELDS)
        .append_pair("time_range", &range)
        .append_pair("limit", &PAGE_ROWS.to_string())
        .append_pair("access_token", token)
        .finish();
    format!("{base}/{GRAPH_VERSION}/{account}/insights?{query}")
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

/// An ad account's fields, as [`account_zone`] asks for them.
#[derive(Deserialize)]
struct Account {
    timezone_name: String,
}

/// The ad account's time zone (`timezone_name`, an IANA name): the zone whose days Meta's
/// insights are by.
///
/// # Errors
/// [`Failure`]: what Meta or the transport said, the token cut out.
pub async fn account_zone(
    client: &reqwest::Client,
    check: impl Fn(&str) -> Result<reqwest::Url, String>,
    base: &str,
    account: &str,
    token: &str,
) -> Result<String, Failure> {
    let failed = |m: &str| Failure::Failed(hide(m, token));
    let mut url = check(&format!("{base}/{GRAPH_VERSION}/{account}"))
        .map_err(|e| failed(&format!("meta_graph_url: {e}")))?;
    url.query_pairs_mut()
        .append_pair("fields", "timezone_name")
        .append_pair("access_token", token);
    let (status, body) = get(client, url, account, token).await?;
    serde_json::from_str::<Account>(&body)
        .map(|a| a.timezone_name)
        .map_err(|e| {
            failed(&format!(
                "Meta answered {status} without the account's zone: {e}"
            ))
        })
}

/// One request to Meta's Graph API: the answer's status and body when it is one to read.
async fn get(
    client: &reqwest::Client,
    url: reqwest::Url,
    account: &str,
    token: &str,
) -> Result<(u16, String), Failure> {
    let failed = |m: &str| Failure::Failed(hide(m, token));
    let response = client.get(url).send().await.map_err(|e| {
        failed(&format!(
            "Meta's Graph API did not answer: {}",
            error_words(&e)
        ))
    })?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|e| {
        failed(&format!(
            "Meta's Graph API did not answer whole: {}",
            error_words(&e)
        ))
    })?;
    check_answer(status, &body, account, token)?;
    Ok((status, body))
}

/// Meta's answer `status` with `body`, as a fetch takes it: `Ok` for a page to read.
fn check_answer(status: u16, body: &str, account: &str, token: &str) -> Result<(), Failure> {
    let failed = |m: &str| Failure::Failed(hide(m, token));
    match meta_answer(status, body) {
        Answer::Delivered => Ok(()),
        // A wrong account is not a refused token: the fetch fails naming the setting, and the
        // next hour tries again.
        Answer::TokenRejected { message } if names_unknown_object(body) => Err(failed(&format!(
            "{message}: Meta has no ad account {account} that this token may read; check \
                 meta_ads_account, and that the token's user has the account"
        ))),
        // Nor is a version Meta no longer serves: the fetch's version is this build's.
        Answer::TokenRejected { message } if names_old_version(body) => Err(failed(&format!(
            "{message}: this tracker asks Meta's Graph API {GRAPH_VERSION}, which Meta no longer \
             serves; a newer release of the tracker asks a newer version"
        ))),
        Answer::TokenRejected { message } => Err(Failure::TokenRefused(hide(&message, token))),
        Answer::Retry { .. } | Answer::Refused { .. } => {
            let words: String = body.chars().take(300).collect();
            Err(failed(&format!("Meta answered {status}: {words}")))
        }
    }
}

/// Every row of the days `[first, last]` of `account` at `base` (`meta_graph_url`), page by
/// page. `check` refuses an address before it is requested (a private one unless allowed): the
/// insights' address without its query (which holds the token), and every `paging.next` must
/// have that address's origin.
///
/// # Errors
/// [`Failure`]: what Meta or the transport said, the token cut out.
pub async fn fetch(
    client: &reqwest::Client,
    check: impl Fn(&str) -> Result<reqwest::Url, String>,
    base: &str,
    account: &str,
    token: &str,
    days: (Day, Day),
) -> Result<Insights, Failure> {
    let failed = |m: &str| Failure::Failed(hide(m, token));
    let checked = check(&format!("{base}/{GRAPH_VERSION}/{account}/insights"))
        .map_err(|e| failed(&format!("meta_graph_url: {e}")))?;
    let home = origin(&checked);
    let first = reqwest::Url::parse(&first_url(base, account, token, days))
        .map_err(|_| failed("meta_graph_url and meta_ads_account make no URL"))?;
    let mut next = Some(first);
    let mut sums: BTreeMap<(Day, String, String, String), Cost> = BTreeMap::new();
    let mut read = Insights::default();
    let mut pages = 0;
    while let Some(url) = next.take() {
        pages += 1;
        if pages > MAX_PAGES {
            return Err(failed(&format!(
                "Meta's insights went on past {MAX_PAGES} pages"
            )));
        }
        let (status, body) = get(client, url, account, token).await?;
        let page: Page = serde_json::from_str(&body).map_err(|e| {
            failed(&format!(
                "Meta answered {status} with a body that is not insights: {e}"
            ))
        })?;
        for row in page.data {
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
                continue;
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
        if let Some(link) = page.paging.and_then(|p| p.next) {
            let url = reqwest::Url::parse(&link)
                .map_err(|_| failed("Meta's paging.next is not a URL"))?;
            if origin(&url) != home {
                return Err(failed(
                    "Meta's paging.next leads to another address than meta_graph_url",
                ));
            }
            next = Some(url);
        }
    }
    read.costs = sums.into_values().collect();
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_url_asks_for_ads_by_day_and_hides_nothing_it_needs() {
        let url = first_url("http://127.0.0.1:9", "act_42", "TOKEN", (20781, 20783));
        assert!(url.starts_with("http://127.0.0.1:9/v25.0/act_42/insights?level=ad&time_increment=1&fields=campaign_name%2Cadset_name%2Cad_name%2Cspend%2Caccount_currency&time_range=%7B%22since%22%3A%222026-11-24%22%2C%22until%22%3A%222026-11-26%22%7D"), "{url}");
        assert!(url.ends_with("&access_token=TOKEN"), "{url}");
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
        let check = |code| check_answer(400, &answer(code), "act_1", "TOKEN");
        assert!(matches!(check(190), Err(Failure::TokenRefused(_))));
        for code in [2635, 12] {
            let Err(Failure::Failed(why)) = check(code) else {
                panic!("{code}: {:?}", check(code))
            };
            assert!(why.contains(GRAPH_VERSION), "{why}");
        }
    }
}
