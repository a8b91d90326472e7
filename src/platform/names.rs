//! Settings a destination keeps by event kind (the ad platforms' event names, Google's
//! conversion names, a postback's status words): which kinds they may name, how each is checked,
//! and which one an event takes.

use std::collections::BTreeMap;

use crate::domain::input::quoted;
use crate::error::{Code, Error};

/// The event kinds a destination's setting by kind (an event name, a conversion name, a
/// postback's status word) may be set for: the four kinds, and `first_deposit` (a deposit
/// that is its customer's first; without a name of its own, a deposit's).
pub const NAMED_KINDS: [&str; 5] = [
    "contact",
    "subscribed",
    "registration",
    "deposit",
    "first_deposit",
];

/// Checks a destination's `field` that sets something for event kinds (`{"deposit": ...}`):
/// each key one of [`NAMED_KINDS`], each value `ok`, else an error that says the value is
/// `rule`.
pub(super) fn check_named(
    field: &'static str,
    names: &BTreeMap<String, String>,
    rule: &str,
    ok: impl Fn(&str) -> bool,
) -> Result<(), Error> {
    let invalid = |why: String| Error::field(Code::InvalidField, field, why);
    for (kind, name) in names {
        if !NAMED_KINDS.contains(&kind.as_str()) {
            return Err(invalid(format!(
                "{field} names {}, which is none of {}",
                quoted(kind),
                NAMED_KINDS.join(", ")
            )));
        }
        if !ok(name) {
            return Err(invalid(format!(
                "{field}.{kind} is {rule}, got {}",
                quoted(name)
            )));
        }
    }
    Ok(())
}

/// What `names` (checked by [`check_named`]) sets for an event of kind `event`: for a deposit
/// that was its customer's first, `first_deposit`'s, else `deposit`'s; `None` where it sets
/// nothing.
#[must_use]
pub(super) fn named<'a>(
    names: &'a BTreeMap<String, String>,
    event: &str,
    first_deposit: bool,
) -> Option<&'a str> {
    let set = |kind: &str| names.get(kind).map(String::as_str);
    if event == "deposit" && first_deposit {
        set("first_deposit").or_else(|| set("deposit"))
    } else {
        set(event)
    }
}
