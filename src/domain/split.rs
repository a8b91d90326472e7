//! Split tests (`docs/api.md#split-tests`): a link with several weighted targets and a
//! fallback. The rules of `targets` and `fallback`, which target a visit goes to (by weight,
//! the same for a repeat of the same ad click, never to a target that is down), and the
//! in-memory health of the targets the health checks watch.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use sha2::{Digest as _, Sha256};

use crate::domain::click::{AD_CLICK_IDS, NewClick};
use crate::domain::destination::{Destination, bot_or_target};
use crate::error::{Code, Error};

/// The most targets a link splits its visits between.
pub const MAX_TARGETS: usize = 16;

/// The largest weight of one target (weights are relative: 1 and 3 split as 25 and 75).
pub const MAX_WEIGHT: u32 = 10_000;

/// One target of a split link and its share of the visits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedTarget {
    pub destination: Destination,
    pub weight: u32,
}

/// A link's targets, at least two, and where visits go when every one of them is down.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Split {
    pub targets: Vec<WeightedTarget>,
    pub fallback: Option<Destination>,
}

/// One entry of `targets` (with `weight`) or the `fallback` (without), as `POST /links`
/// takes it: what a one-target link takes, a bot or a target URL.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetEntry {
    /// A Telegram bot username, as a one-target link's `bot`.
    #[schemars(pattern(r"^@?[A-Za-z0-9_]{2,29}[Bb][Oo][Tt]$"))]
    bot: Option<String>,
    /// An `https://` URL template with `{uid}`, as a one-target link's `target` (a Mini App's
    /// `https://t.me/<bot>/<app>?startapp={uid}` among them).
    #[schemars(length(max = crate::domain::destination::MAX_TARGET_LEN))]
    target: Option<String>,
    /// The target's share of the visits, relative to the others': 1 to 10000. Not in a
    /// `fallback`.
    #[schemars(range(min = 1, max = MAX_WEIGHT))]
    weight: Option<u32>,
}

/// A target as `GET /links` shows it, in `targets` (with its weight, variant and health) and
/// as the `fallback`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TargetView {
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub bot: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub target: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub weight: Option<u32>,
    /// The variant its clicks record: its place in `targets`, from 0.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub variant: Option<u8>,
    /// `false` while the health checks hold it down (two failed checks in a row).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub up: Option<bool>,
    /// While it is down: since when (Unix ms), the second failed check in a row.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub down_since_ms: Option<u64>,
}

impl TargetView {
    #[must_use]
    pub fn of(destination: &Destination) -> TargetView {
        match destination {
            Destination::Bot(b) => TargetView {
                bot: Some(b.clone()),
                ..TargetView::default()
            },
            Destination::Target(t) => TargetView {
                target: Some(t.clone()),
                ..TargetView::default()
            },
            Destination::Channel(c) => TargetView {
                target: Some(c.fallback.clone()),
                ..TargetView::default()
            },
        }
    }

    /// Its `bot` and `target`, as a one-target link's fields.
    #[must_use]
    pub fn bot_and_target(self) -> (Option<String>, Option<String>) {
        (self.bot, self.target)
    }

    /// How the Links page and `tracker stats` name a variant: `@bot` or the URL.
    #[must_use]
    pub fn label(&self) -> String {
        match (&self.bot, &self.target) {
            (Some(bot), _) => format!("@{bot}"),
            (None, Some(target)) => target.clone(),
            (None, None) => String::new(),
        }
    }
}

/// `fallback` in `/openapi.json`: a channel link's invite link, or a split link's target.
pub struct FallbackJson;

impl JsonSchema for FallbackJson {
    // Inline, so that the shapes of `POST /links` see a text field (`input::by_variant`).
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "LinkFallback".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let entry = generator.subschema_for::<TargetEntry>();
        schemars::json_schema!({
            "type": ["string", "object", "null"],
            "description": "For a channel: an invite link of it (`https://t.me/+...`), where \
                visitors go when the pool of invite links is empty. For `targets`: a `bot` or a \
                `target` (no `weight`), where visits go when every target is down.",
            "anyOf": [
                {"type": "null"},
                {"type": "string", "pattern": r"^(https://t\.me/(\+|joinchat/)[A-Za-z0-9_-]{1,64})?$"},
                entry,
            ]
        })
    }
}

/// `POST /links`'s shapes with the split's made exact: its `targets` required (a shape's
/// required fields are text for the others), its `fallback` a target, not an invite link.
///
/// # Panics
/// If `shapes` has no shape titled `targets` (`link::NewLinkJson` makes one).
#[must_use]
pub fn with_split_shape(
    mut shapes: schemars::Schema,
    generator: &mut schemars::SchemaGenerator,
) -> schemars::Schema {
    use serde_json::{Value, json};
    let entry = serde_json::to_value(generator.subschema_for::<TargetEntry>()).unwrap_or_default();
    let list = json!({"type": "array", "minItems": 2, "maxItems": MAX_TARGETS, "items": entry});
    let split = shapes
        .get_mut("oneOf")
        .and_then(Value::as_array_mut)
        .and_then(|all| all.iter_mut().find(|s| s["title"] == "targets"))
        .expect("a shape of targets");
    split["properties"]["targets"] = list;
    split["properties"]["fallback"] = json!({"anyOf": [{"type": "null"}, entry]});
    if let Some(required) = split["required"].as_array_mut() {
        required.push("targets".into());
    }
    shapes
}

/// The split of a `POST /links` body, if it has `targets`: then it takes the `fallback` (a
/// target, not a channel's invite link) and no `bot`, `target` or `channel` (`one_target`).
pub fn from_body(
    targets: Option<&RawValue>,
    fallback: &mut Option<&RawValue>,
    one_target: [Option<&RawValue>; 3],
) -> Result<Option<Split>, Error> {
    let Some(targets) = targets.filter(|raw| raw.get() != "null") else {
        return Ok(None);
    };
    let given = |raw: Option<&RawValue>| raw.is_some_and(|r| !matches!(r.get(), "null" | "\"\""));
    if one_target.into_iter().any(given) {
        return Err(Error::field(
            Code::InvalidField,
            "targets",
            "a link has several targets or one bot, target or channel, not both",
        ));
    }
    Split::from_json(targets, fallback.take()).map(Some)
}

fn entry_error(i: Option<usize>, why: &str) -> Error {
    match i {
        Some(i) => Error::field(
            Code::InvalidField,
            "targets",
            format!("targets[{i}]: {why}"),
        ),
        None => Error::field(Code::InvalidField, "fallback", format!("fallback: {why}")),
    }
}

/// Reads one entry: `i` its place in `targets`, or `None` for the fallback.
fn entry(raw: &RawValue, i: Option<usize>) -> Result<WeightedTarget, Error> {
    let e: TargetEntry = serde_json::from_str(raw.get()).map_err(|e| {
        let e = e.to_string();
        entry_error(
            i,
            &format!(
                "an object of a \"bot\" or a \"target\"{}: {}",
                if i.is_some() { " and a \"weight\"" } else { "" },
                e.split(" at line ").next().unwrap_or(&e)
            ),
        )
    })?;
    let weight = match (i, e.weight) {
        (Some(_), Some(w)) if (1..=MAX_WEIGHT).contains(&w) => w,
        (Some(_), w) => {
            return Err(entry_error(
                i,
                &format!(
                    "weight must be a whole number from 1 to {MAX_WEIGHT}, got {}",
                    w.map_or("none".to_owned(), |w| w.to_string())
                ),
            ));
        }
        (None, None) => 0,
        (None, Some(_)) => return Err(entry_error(i, "a fallback has no weight")),
    };
    let destination = bot_or_target(e.bot, e.target).map_err(|err| entry_error(i, &err.message))?;
    Ok(WeightedTarget {
        destination,
        weight,
    })
}

impl Split {
    /// `targets` (2 to [`MAX_TARGETS`] entries) and the optional `fallback` of `POST /links`.
    pub fn from_json(targets: &RawValue, fallback: Option<&RawValue>) -> Result<Split, Error> {
        let items: Vec<&RawValue> = serde_json::from_str(targets.get()).map_err(|_| {
            Error::field(
                Code::InvalidField,
                "targets",
                "targets must be a list of objects, each a \"bot\" or a \"target\" with a \
                 \"weight\"",
            )
        })?;
        if !(2..=MAX_TARGETS).contains(&items.len()) {
            return Err(Error::field(
                Code::InvalidField,
                "targets",
                format!(
                    "targets must hold 2 to {MAX_TARGETS} entries, got {} (a link with one \
                     target takes \"bot\" or \"target\")",
                    items.len()
                ),
            ));
        }
        let targets = items
            .iter()
            .enumerate()
            .map(|(i, raw)| entry(raw, Some(i)))
            .collect::<Result<Vec<_>, _>>()?;
        let fallback = fallback
            .filter(|raw| raw.get() != "null")
            .map(|raw| entry(raw, None).map(|t| t.destination))
            .transpose()?;
        Ok(Split { targets, fallback })
    }

    /// The targets as `GET /links` shows them, each with whether `health` holds it up.
    #[must_use]
    pub fn views(&self, space: u32, health: Option<&Health>) -> Vec<TargetView> {
        self.targets
            .iter()
            .enumerate()
            .map(|(i, t)| TargetView {
                weight: Some(t.weight),
                variant: u8::try_from(i).ok(),
                up: health.map(|h| h.is_up(space, &t.destination)),
                down_since_ms: health.and_then(|h| h.down_since(space, &t.destination)),
                ..TargetView::of(&t.destination)
            })
            .collect()
    }
}

/// Where a visit of a split link goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The target of this place in `targets`: the click's variant.
    Variant(u8),
    /// Every target is down: the link's fallback (or, without one, the targets as if up).
    Fallback,
}

/// Which target a visit goes to. `point` places the visit on the line of the weights: the
/// same for a repeat of the same ad click ([`sticky_point`]), so it keeps its target while
/// that target is up. A visit whose target is down is placed again among the targets that are
/// up, by the same point, so the others' visits do not move.
#[must_use]
pub fn pick(targets: &[WeightedTarget], point: u64, is_up: impl Fn(&Destination) -> bool) -> Pick {
    let on_line = |candidates: &[(usize, u32)]| {
        let total: u64 = candidates.iter().map(|(_, w)| u64::from(*w)).sum();
        if total == 0 {
            return None;
        }
        let mut at = point % total;
        candidates.iter().find_map(|(i, w)| {
            if at < u64::from(*w) {
                Some(*i)
            } else {
                at -= u64::from(*w);
                None
            }
        })
    };
    let all: Vec<(usize, u32)> = targets.iter().map(|t| t.weight).enumerate().collect();
    let first = on_line(&all);
    let chosen = match first {
        Some(i) if is_up(&targets[i].destination) => Some(i),
        _ => {
            let up: Vec<(usize, u32)> = all
                .into_iter()
                .filter(|(i, _)| is_up(&targets[*i].destination))
                .collect();
            on_line(&up)
        }
    };
    chosen
        .and_then(|i| u8::try_from(i).ok())
        .map_or(Pick::Fallback, Pick::Variant)
}

/// The point of a visit of `slug` on the line of the weights: from the click's ad click id
/// (`fbclid`, else the first other one it brought), so a repeat of the same ad click lands
/// on the same target without anything stored; a visit without one gets a random point.
#[must_use]
pub fn sticky_point(slug: &str, click: &NewClick) -> u64 {
    let id = click
        .fbclid
        .as_deref()
        .or_else(|| AD_CLICK_IDS.iter().find_map(|id| click.ids.get(id.name)));
    let Some(id) = id else {
        return getrandom::u64().unwrap_or_default();
    };
    let digest = Sha256::new()
        .chain_update(slug.as_bytes())
        .chain_update([0])
        .chain_update(id.as_bytes())
        .finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(first)
}

/// What a health check watches a target by: a bot's username (lowercase), in its space. A
/// URL target is not checked: it is always up.
#[must_use]
pub fn watched_name(destination: &Destination) -> Option<String> {
    match destination {
        Destination::Bot(bot) => Some(bot.to_ascii_lowercase()),
        Destination::Channel(c) => Some(c.chat.to_ascii_lowercase()),
        Destination::Target(_) => None,
    }
}

/// The targets the health checks hold down, by space and [`watched_name`], each with the time
/// it went down: what a visit reads to pass them by, and the Links page shows. Only the health
/// checks write it (`workers/health.rs`); it lives in memory, so a restart starts every target
/// up until its checks say otherwise.
#[derive(Default, Debug)]
pub struct Health {
    down: RwLock<HashMap<(u32, String), u64>>,
}

impl Health {
    #[must_use]
    pub fn is_up(&self, space: u32, destination: &Destination) -> bool {
        self.down_since(space, destination).is_none()
    }

    /// Since when (Unix ms) the health checks hold `destination` of `space` down; `None` while
    /// it is up (a URL target always is).
    #[must_use]
    pub fn down_since(&self, space: u32, destination: &Destination) -> Option<u64> {
        let name = watched_name(destination)?;
        self.down
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(space, name))
            .copied()
    }

    /// Marks `name` of `space` down since `since_ms`, or up (`None`); whether that changed
    /// anything (a target already down keeps the time it went down).
    pub fn set(&self, space: u32, name: &str, since_ms: Option<u64>) -> bool {
        let mut down = self.down.write().unwrap_or_else(PoisonError::into_inner);
        let key = (space, name.to_ascii_lowercase());
        match since_ms {
            Some(ms) => {
                if down.contains_key(&key) {
                    return false;
                }
                down.insert(key, ms);
                true
            }
            None => down.remove(&key).is_some(),
        }
    }

    /// Brings up every target no longer `watched` (its token removed, its link deleted): no
    /// check holds it down any more.
    pub fn keep_only(&self, watched: impl Fn(u32, &str) -> bool) {
        self.down
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(space, name), _| watched(*space, name));
    }

    /// How many targets are down now.
    #[must_use]
    pub fn down_count(&self) -> usize {
        self.down
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bot(name: &str, weight: u32) -> WeightedTarget {
        WeightedTarget {
            destination: Destination::Bot(name.to_owned()),
            weight,
        }
    }

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn weights_and_counts_are_held_to_their_bounds() {
        let two = |w: &str| {
            Split::from_json(
                &raw(&format!(
                    r#"[{{"bot":"a_bot","weight":{w}}},{{"bot":"b_bot","weight":1}}]"#
                )),
                None,
            )
        };
        assert!(two("1").is_ok());
        assert!(two("10000").is_ok());
        for bad in ["0", "10001", "-1", "1.5", "\"5\""] {
            let e = two(bad).unwrap_err();
            assert_eq!(e.field, Some("targets"), "{bad}");
            assert!(e.message.starts_with("targets[0]"), "{}", e.message);
        }
        let one = Split::from_json(&raw(r#"[{"bot":"a_bot","weight":1}]"#), None);
        assert!(one.unwrap_err().message.contains("2 to 16"));
        let entries = |n: usize| {
            let list: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"target":"https://x{i}.io/?u={{uid}}","weight":1}}"#))
                .collect();
            Split::from_json(&raw(&format!("[{}]", list.join(","))), None)
        };
        assert!(entries(16).is_ok());
        assert!(entries(17).is_err());
    }

    #[test]
    fn an_entry_is_checked_as_a_one_target_link_is() {
        let e = Split::from_json(
            &raw(r#"[{"bot":"a_bot","weight":1},{"bot":"nope","weight":1}]"#),
            None,
        )
        .unwrap_err();
        assert!(
            e.message.starts_with("targets[1]: bot must be"),
            "{}",
            e.message
        );
        let both = Split::from_json(
            &raw(
                r#"[{"bot":"a_bot","target":"https://a.io/{uid}","weight":1},{"bot":"b_bot","weight":1}]"#,
            ),
            None,
        );
        assert!(both.is_err());
        let unknown = Split::from_json(
            &raw(r#"[{"bot":"a_bot","weight":1,"share":2},{"bot":"b_bot","weight":1}]"#),
            None,
        );
        assert!(unknown.unwrap_err().message.contains("share"));
        let list = raw(r#"[{"bot":"a_bot","weight":1},{"bot":"b_bot","weight":1}]"#);
        let fallback = Split::from_json(&list, Some(&raw(r#"{"bot":"spare_bot"}"#))).unwrap();
        assert_eq!(
            fallback.fallback,
            Some(Destination::Bot("spare_bot".into()))
        );
        let weighted = Split::from_json(&list, Some(&raw(r#"{"bot":"spare_bot","weight":1}"#)));
        assert_eq!(weighted.unwrap_err().field, Some("fallback"));
    }

    #[test]
    fn a_point_picks_by_weight_and_skips_a_target_that_is_down() {
        let targets = [bot("a_bot", 1), bot("b_bot", 3)];
        let up = |_: &Destination| true;
        assert_eq!(pick(&targets, 0, up), Pick::Variant(0));
        assert_eq!(pick(&targets, 1, up), Pick::Variant(1));
        assert_eq!(pick(&targets, 4, up), Pick::Variant(0));
        let a_down = |d: &Destination| *d != Destination::Bot("a_bot".into());
        assert_eq!(pick(&targets, 0, a_down), Pick::Variant(1));
        // A visit of a target that is up keeps it when another goes down.
        let b_down = |d: &Destination| *d != Destination::Bot("b_bot".into());
        assert_eq!(pick(&targets, 4, b_down), Pick::Variant(0));
        assert_eq!(pick(&targets, 5, b_down), Pick::Variant(0));
        assert_eq!(pick(&targets, 5, |_: &Destination| false), Pick::Fallback);
    }

    #[test]
    fn the_same_ad_click_gets_the_same_point_and_others_spread() {
        let click = |fbclid: Option<&str>| NewClick {
            link_slug: None,
            fbclid: fbclid.map(str::to_owned),
            campaign_name: None,
            raw_query: None,
            clicked_at_ms: 0,
            ids: crate::domain::click::ClickIds::default(),
            hints: None,
            variant: None,
        };
        let a = sticky_point("s", &click(Some("IwAR-1")));
        assert_eq!(a, sticky_point("s", &click(Some("IwAR-1"))));
        assert_ne!(a, sticky_point("s", &click(Some("IwAR-2"))));
        assert_ne!(a, sticky_point("t", &click(Some("IwAR-1"))));
        assert_ne!(
            sticky_point("s", &click(None)),
            sticky_point("s", &click(None))
        );
    }

    #[test]
    fn health_holds_a_bot_down_in_its_space_only() {
        let health = Health::default();
        let a = Destination::Bot("A_bot".into());
        assert!(health.set(1, "a_bot", Some(5)));
        assert!(!health.set(1, "a_bot", Some(9)));
        assert!(!health.is_up(1, &a));
        assert_eq!(
            health.down_since(1, &a),
            Some(5),
            "the first time it went down"
        );
        assert!(health.is_up(2, &a));
        assert!(health.is_up(1, &Destination::Target("https://a.io/{uid}".into())));
        assert!(health.set(1, "a_bot", None));
        assert!(health.is_up(1, &a));
        assert!(!health.set(1, "a_bot", None));
    }
}
