//! A stand-in for Meta's Marketing API insights on 127.0.0.1: a small HTTP/1.1 server that
//! answers `GET /<version>/<act_id>/insights` as the Graph API documents it, for one ad account
//! and one access token.
//!
//! - The query's `level` must be `ad`, `time_increment` `1`, `fields` must name
//!   `campaign_name`, `adset_name`, `ad_name`, `spend` and `account_currency`; `time_range`
//!   (`{"since":"YYYY-MM-DD","until":"YYYY-MM-DD"}`) picks the rows by their `date_start`.
//! - Pages of [`Insights::page_rows`] rows (`limit` is read, and the smaller taken), with
//!   `paging.cursors` and, while rows remain, `paging.next`: the same URL with `after`.
//! - Each row carries the account's `account_currency`, `date_start` and `date_stop`.
//! - An access token other than the account's is answered `400` with Meta's `OAuthException`
//!   code `190`; another account `400` code `100`.
//! - `GET /<version>/<act_id>?fields=timezone_name` answers the account's time zone
//!   ([`Insights::set_zone`], `America/Los_Angeles` unless set, as an account made in the US
//!   has), counted apart from the insights' requests ([`Insights::zone_asked`]) and never
//!   answered by [`Insights::fail_next`].
//! - [`Insights::fail_next`] answers the next requests with an error of the test's choosing
//!   (`500` with a transient code `2`, say).
//! - Deleted and archived ads ([`Insights::set_status`]) are left out unless the query's
//!   `filtering` asks for them, as Meta's "Manage your ad object's status" says: "
//!   `<API_VERSION>/act_<AD_ACCOUNT_ID>/insights?level=ad` does not return stats for the
//!   deleted object ... You can query insights for DELETED objects using the
//!   `ad.effective_status` filter". A `filtering` on `ad.effective_status` with `IN` answers the
//!   ads of the statuses it names, and only those.
//! - [`Insights::set_max_days`] answers a `time_range` of more days with Meta's "Please reduce
//!   the amount of data you're asking for, then retry your request" (`100` subcode `1504018`,
//!   or `2` subcode `1504038`), as a large account's synchronous request is answered.
//! - [`Insights::send_huge`] answers the next insights requests `200` with a body of the given
//!   size that goes on and on (chunked, no `Content-Length`): rows of a page that never ends,
//!   made as they are sent, so the stand-in holds none of it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::net::TcpStream;

use super::loopback::{Listening, listen, read_request, send_endless, write_json};

/// The ad account and a token of Meta's shape.
pub const ACCOUNT: &str = "act_1234567890";
pub const TOKEN: &str = "EAAGstandinTOKEN0123456789abcdefXYZ";

/// One ad's spend on one day.
#[derive(Clone, Debug)]
pub struct Row {
    pub day: String,
    pub campaign: String,
    pub adset: String,
    pub ad: String,
    pub spend: String,
}

/// One request as it arrived: its path and its query's pairs.
#[derive(Clone, Debug)]
pub struct Asked {
    pub path: String,
    pub query: HashMap<String, String>,
}

#[derive(Default)]
struct State {
    rows: Vec<Row>,
    currency: String,
    page_rows: usize,
    /// Answers for the next requests, first first.
    failures: Vec<(u16, Value)>,
    asked: Vec<Asked>,
    zone: String,
    zone_asked: usize,
    /// Each ad's `effective_status` other than `ACTIVE`.
    statuses: HashMap<String, String>,
    /// The most days a `time_range` may span, and the code and subcode of the answer past it.
    max_days: Option<(i64, i64, i64)>,
    /// The sizes of the endless answers to send next.
    huge: Vec<usize>,
    /// Endless answers being sent now, and the most ever sent at once.
    in_flight: usize,
    most_in_flight: usize,
}

pub struct Insights {
    state: Arc<Mutex<State>>,
    listening: Listening,
}

impl Insights {
    /// Starts the stand-in with no rows, in `USD`, 2 rows a page.
    pub async fn start() -> Insights {
        let state = Arc::new(Mutex::new(State {
            currency: "USD".into(),
            page_rows: 2,
            zone: "America/Los_Angeles".into(),
            ..State::default()
        }));
        let s = state.clone();
        let listening = listen(move |stream| serve(stream, s.clone())).await;
        Insights { state, listening }
    }

    /// The address to set as `meta_graph_url`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.listening.addr)
    }

    /// Replaces the account's rows.
    pub fn set_rows(&self, rows: Vec<Row>) {
        self.state.lock().unwrap().rows = rows;
    }

    /// Rows per page (Meta's default is 25; the request's `limit` may ask for fewer).
    pub fn set_page_rows(&self, rows: usize) {
        self.state.lock().unwrap().page_rows = rows;
    }

    /// The account's `timezone_name`.
    pub fn set_zone(&self, zone: &str) {
        zone.clone_into(&mut self.state.lock().unwrap().zone);
    }

    /// How many times the account's time zone was asked.
    #[must_use]
    pub fn zone_asked(&self) -> usize {
        self.state.lock().unwrap().zone_asked
    }

    pub fn set_currency(&self, currency: &str) {
        currency.clone_into(&mut self.state.lock().unwrap().currency);
    }

    /// Answers the next request `status` with `body` (after those already queued).
    pub fn fail_next(&self, status: u16, body: Value) {
        self.state.lock().unwrap().failures.push((status, body));
    }

    /// The `effective_status` of ad `ad` (`DELETED`, `ARCHIVED`, ...); `ACTIVE` unless set.
    pub fn set_status(&self, ad: &str, status: &str) {
        self.state
            .lock()
            .unwrap()
            .statuses
            .insert(ad.to_owned(), status.to_owned());
    }

    /// A `time_range` of more than `days` days is answered Meta's error `code`/`subcode`
    /// asking for less data.
    pub fn set_max_days(&self, days: i64, code: i64, subcode: i64) {
        self.state.lock().unwrap().max_days = Some((days, code, subcode));
    }

    /// The next `times` insights requests are answered with an endless body of `bytes`.
    pub fn send_huge(&self, bytes: usize, times: usize) {
        self.state
            .lock()
            .unwrap()
            .huge
            .extend(std::iter::repeat_n(bytes, times));
    }

    /// The most endless answers that were being sent at once.
    #[must_use]
    pub fn most_in_flight(&self) -> usize {
        self.state.lock().unwrap().most_in_flight
    }

    /// Every request so far.
    #[must_use]
    pub fn asked(&self) -> Vec<Asked> {
        self.state.lock().unwrap().asked.clone()
    }
}

/// Meta's error answer.
#[must_use]
pub fn error(code: i64, kind: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "code": code,
        "fbtrace_id": "AbCdEfStandIn"}})
}

/// As Meta answers an object (an ad account) that does not exist or the token's user does not
/// have: `100` with subcode `33`.
fn unknown_object(id: &str) -> Value {
    let mut e = error(
        100,
        "GraphMethodException",
        &format!(
            "Unsupported get request. Object with ID '{id}' does not exist, cannot be loaded due \
             to missing permissions, or does not support this operation. Please read the Graph \
             API documentation at https://developers.facebook.com/docs/graph-api"
        ),
    );
    e["error"]["error_subcode"] = 33.into();
    e
}

/// `GET /<version>/<act_id>?fields=timezone_name`, as Meta answers it.
fn zone_answer(zone: &str, account: &str, query: &HashMap<String, String>) -> (u16, Value) {
    if query.get("access_token").map(String::as_str) != Some(TOKEN) {
        return (
            400,
            error(190, "OAuthException", "Invalid OAuth access token"),
        );
    }
    if account != ACCOUNT {
        return (400, unknown_object(account));
    }
    if query.get("fields").map(String::as_str) != Some("timezone_name") {
        return (
            400,
            error(
                100,
                "OAuthException",
                "(#100) Tried accessing nonexisting field",
            ),
        );
    }
    (200, json!({"timezone_name": zone, "id": account}))
}

fn answer(state: &Mutex<State>, path: &str, query: &HashMap<String, String>) -> (u16, Value) {
    let mut s = state.lock().unwrap();
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if let [_, account] = parts.as_slice() {
        s.zone_asked += 1;
        return zone_answer(&s.zone, account, query);
    }
    s.asked.push(Asked {
        path: path.to_owned(),
        query: query.clone(),
    });
    if !s.failures.is_empty() {
        return s.failures.remove(0);
    }
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let [version, account, "insights"] = parts.as_slice() else {
        return (
            400,
            error(2500, "OAuthException", "Unknown path components"),
        );
    };
    if !version.starts_with('v') {
        return (
            400,
            error(2500, "OAuthException", "Unknown path components"),
        );
    }
    let get = |k: &str| query.get(k).map_or("", String::as_str);
    if get("access_token") != TOKEN {
        return (
            400,
            error(
                190,
                "OAuthException",
                "Invalid OAuth access token - Cannot parse access token",
            ),
        );
    }
    if *account != ACCOUNT {
        return (400, unknown_object(account));
    }
    let fields: Vec<&str> = get("fields").split(',').collect();
    let wanted = [
        "campaign_name",
        "adset_name",
        "ad_name",
        "spend",
        "account_currency",
    ];
    if get("level") != "ad"
        || get("time_increment") != "1"
        || wanted.iter().any(|f| !fields.contains(f))
    {
        return (
            400,
            error(100, "OAuthException", "(#100) Invalid parameter"),
        );
    }
    let range: Value = serde_json::from_str(get("time_range")).unwrap_or(Value::Null);
    let (Some(since), Some(until)) = (range["since"].as_str(), range["until"].as_str()) else {
        return (
            400,
            error(100, "OAuthException", "(#100) time_range is invalid"),
        );
    };
    if let Some(too_many) = too_many_days(&s, since, until) {
        return too_many;
    }
    let rows = rows_asked(&s, (since, until), get("filtering"));
    let limit: usize = get("limit").parse().unwrap_or(25);
    let per_page = s.page_rows.min(limit).max(1);
    let after: usize = get("after").parse().unwrap_or(0);
    let page: Vec<Value> = rows
        .iter()
        .skip(after)
        .take(per_page)
        .map(|r| {
            json!({"campaign_name": r.campaign, "adset_name": r.adset, "ad_name": r.ad,
                "spend": r.spend, "account_currency": s.currency,
                "date_start": r.day, "date_stop": r.day})
        })
        .collect();
    let end = after + page.len();
    let mut paging = json!({"cursors": {"before": after.to_string(), "after": end.to_string()}});
    if end < rows.len() {
        let mut next: Vec<(String, String)> = query
            .iter()
            .filter(|(k, _)| *k != "after")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        next.push(("after".into(), end.to_string()));
        let text: String = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(next)
            .finish();
        paging["next"] = json!(format!("http://{{host}}{path}?{text}"));
    }
    (200, json!({"data": page, "paging": paging}))
}

/// Meta's answer asking for less data, when `[since, until]` is more days than
/// [`Insights::set_max_days`] allows.
fn too_many_days(s: &State, since: &str, until: &str) -> Option<(u16, Value)> {
    let (most, code, subcode) = s.max_days?;
    let date = |t: &str| t.parse::<jiff::civil::Date>().unwrap();
    if (date(until) - date(since)).get_days() < i32::try_from(most).unwrap() {
        return None;
    }
    let mut e = error(
        code,
        "OAuthException",
        "Please reduce the amount of data you're asking for, then retry your request",
    );
    e["error"]["error_subcode"] = subcode.into();
    Some((if code == 2 { 500 } else { 400 }, e))
}

/// The rows of the days `[since, until]` that `filtering` shows.
fn rows_asked<'a>(s: &'a State, (since, until): (&str, &str), filtering: &str) -> Vec<&'a Row> {
    let shown = shown_statuses(filtering);
    s.rows
        .iter()
        .filter(|r| since <= r.day.as_str() && r.day.as_str() <= until)
        .filter(|r| is_shown(s, r, shown.as_deref()))
        .collect()
}

/// Whether row `r` is answered: its ad's status is among those `filtering` names, or, without
/// one, the ad is neither deleted nor archived.
fn is_shown(s: &State, r: &Row, named: Option<&[String]>) -> bool {
    let status = s.statuses.get(&r.ad).map_or("ACTIVE", String::as_str);
    named.map_or(!matches!(status, "DELETED" | "ARCHIVED"), |named| {
        named.iter().any(|n| n == status)
    })
}

/// The statuses a `filtering` on `ad.effective_status` names; `None` without one.
fn shown_statuses(filtering: &str) -> Option<Vec<String>> {
    let filters: Value = serde_json::from_str(filtering).ok()?;
    filters.as_array()?.iter().find_map(|f| {
        (f["field"] == "ad.effective_status" && f["operator"] == "IN").then(|| {
            f["value"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
    })
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<State>>) {
    let host = stream
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut stream, &mut buf).await {
        let (path, query) = request
            .target
            .split_once('?')
            .unwrap_or((&request.target, ""));
        let query: HashMap<String, String> = url::form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        let huge = {
            let mut s = state.lock().unwrap();
            (path.ends_with("/insights") && !s.huge.is_empty()).then(|| {
                s.asked.push(Asked {
                    path: path.to_owned(),
                    query: query.clone(),
                });
                s.in_flight += 1;
                s.most_in_flight = s.most_in_flight.max(s.in_flight);
                s.huge.remove(0)
            })
        };
        if let Some(bytes) = huge {
            let row = r#"{"campaign_name":"c","adset_name":"a","ad_name":"x","spend":"1","account_currency":"USD","date_start":"2027-01-15","date_stop":"2027-01-15"},"#;
            send_endless(&mut stream, r#"{"data":["#, row, bytes).await;
            state.lock().unwrap().in_flight -= 1;
            return;
        }
        let (status, body) = answer(&state, path, &query);
        let text = body.to_string().replace("{host}", &host);
        if write_json(&mut stream, status, &[], &text).await.is_err() {
            return;
        }
    }
}
