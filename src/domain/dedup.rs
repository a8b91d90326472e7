//! Which earlier event a new one duplicates: the rules of `docs/api.md#deduplication`.
//!
//! Without an `eid`, an event is keyed by its `uid`, or, when it names no `uid`, by the
//! Telegram id it names: the same rules (milestone, deposit fingerprint) under rule bytes of
//! their own, so a user's key never meets a click's.
//!
//! [`dedup_key`] is the only place that decides the rule and the key. The writer looks the key up
//! inside its write transaction, so the decision and the insert are one atomic step.

use sha2::{Digest as _, Sha256};

use crate::domain::digest;
use crate::domain::event::{EventKind, ValidEvent};

/// The rule that applied, reported as `dedup` in the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    Eid,
    Milestone,
    Fingerprint,
    None,
}

impl Basis {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Basis::Eid => "eid",
            Basis::Milestone => "milestone",
            Basis::Fingerprint => "fingerprint",
            Basis::None => "none",
        }
    }
}

/// A dedup key: the rule, a 128-bit digest of the rule's fields, and, for the windowed
/// fingerprint, how long an earlier event keeps counting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DedupKey {
    pub basis: Basis,
    /// Stored as part of the table key, so the rules never collide with each other.
    pub rule: u8,
    pub digest: u128,
    /// `Some(window)` for a deposit fingerprint without a supplied time: a duplicate only within
    /// the window.
    pub window_ms: Option<u64>,
}

/// The rule bytes, stored in the `DEDUP` table key: never renumber them.
mod rule {
    pub const EID: u8 = 1;
    pub const UID_MILESTONE: u8 = 2;
    pub const UID_DEPOSIT_TIMED: u8 = 3;
    pub const UID_DEPOSIT_WINDOWED: u8 = 4;
    pub const TG_MILESTONE: u8 = 5;
    pub const TG_DEPOSIT_TIMED: u8 = 6;
    pub const TG_DEPOSIT_WINDOWED: u8 = 7;
}

/// The rule bytes of the windowed deposit fingerprints (by `uid`, by Telegram id): the only
/// rules whose entries stop counting, so the only ones retention prunes.
pub const WINDOWED_RULES: [u8; 2] = [rule::UID_DEPOSIT_WINDOWED, rule::TG_DEPOSIT_WINDOWED];

/// The key of `event` under those rules, or `None` when it can never be a duplicate.
/// The space is not part of the digest: the table key puts the space number in front of it.
#[must_use]
pub fn dedup_key(event: &ValidEvent, dedup_window_ms: u64) -> Option<DedupKey> {
    let kind = [event.kind as u8];
    if let Some(eid) = &event.eid {
        return Some(key(Basis::Eid, rule::EID, &[&kind, eid.as_bytes()], None));
    }
    // Who the event is about: its click, or else the Telegram user it names.
    let tg_bytes;
    let (who, [milestone, timed, windowed]): (&[u8], _) = match (&event.uid, event.tg_id) {
        (Some(uid), _) => (
            uid.as_bytes(),
            [
                rule::UID_MILESTONE,
                rule::UID_DEPOSIT_TIMED,
                rule::UID_DEPOSIT_WINDOWED,
            ],
        ),
        (None, Some(tg_id)) => {
            tg_bytes = tg_id.to_be_bytes();
            (
                &tg_bytes,
                [
                    rule::TG_MILESTONE,
                    rule::TG_DEPOSIT_TIMED,
                    rule::TG_DEPOSIT_WINDOWED,
                ],
            )
        }
        (None, None) => return None,
    };
    if event.kind != EventKind::Deposit {
        return Some(key(Basis::Milestone, milestone, &[&kind, who], None));
    }
    // `7` and `7.00` are one deposit: the value is compared in normalised form.
    let value = event
        .value
        .map(|v| v.normalized().to_string())
        .unwrap_or_default();
    let fields = [who, value.as_bytes(), event.currency.as_bytes()];
    Some(if event.time_supplied {
        let at = event.occurred_at_ms.to_be_bytes();
        key(
            Basis::Fingerprint,
            timed,
            &[&fields[..], &[&at]].concat(),
            None,
        )
    } else {
        key(Basis::Fingerprint, windowed, &fields, Some(dedup_window_ms))
    })
}

fn key(basis: Basis, rule: u8, fields: &[&[u8]], window_ms: Option<u64>) -> DedupKey {
    let mut h = Sha256::new();
    for f in fields {
        // Length-prefixed, so ("ab","c") and ("a","bc") differ.
        h.update((f.len() as u64).to_be_bytes());
        h.update(f);
    }
    DedupKey {
        basis,
        rule,
        digest: digest::first_128_bits(h),
        window_ms,
    }
}

/// Whether an earlier event received at `earlier_at_ms` still counts for one received at
/// `received_at_ms`, under `window_ms` (`None`: forever). The window is half-open: an event
/// exactly `window_ms` later is new.
fn in_window(window_ms: Option<u64>, earlier_at_ms: u64, received_at_ms: u64) -> bool {
    window_ms.is_none_or(|w| received_at_ms.saturating_sub(earlier_at_ms) < w)
}

/// Whether an event with `key`, received at `received_at_ms`, duplicates the earlier event
/// stored under the same key (`earlier` = its `(inbox_id, received_at_ms)`). Returns the
/// earlier `inbox_id` if so. The writer and `dry_run` both decide with this.
#[must_use]
pub fn duplicate_of(
    key: &DedupKey,
    earlier: Option<(u64, u64)>,
    received_at_ms: u64,
) -> Option<u64> {
    let (inbox_id, at_ms) = earlier?;
    in_window(key.window_ms, at_ms, received_at_ms).then_some(inbox_id)
}

/// From when on stored dedup entries of the windowed rule no longer count: for events received
/// at `now_ms` or later, under `dedup_window` (`window_ms`). Retention prunes by it and
/// `tracker check` forgives a pruned entry by it, both with [`Expiry::expired`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expiry {
    pub now_ms: u64,
    pub window_ms: u64,
}

impl Expiry {
    /// Whether an entry of rule byte `rule` for an event received at `received_at_ms` can
    /// never again make an event a duplicate, once time is at `now_ms`: the rule is windowed and
    /// even an event received now is outside its window. Permanent rules never expire.
    #[must_use]
    pub fn expired(&self, rule: u8, received_at_ms: u64) -> bool {
        WINDOWED_RULES.contains(&rule)
            && !in_window(Some(self.window_ms), received_at_ms, self.now_ms)
    }
}

/// The basis an event is judged by, also for events that have no key.
#[must_use]
pub fn basis_of(key: Option<&DedupKey>) -> Basis {
    key.map_or(Basis::None, |k| k.basis)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::decimal::Decimal;

    /// An event received at 1,800,000,000,000 ms without a supplied time, in `USD`.
    pub(crate) fn ev(
        kind: EventKind,
        uid: Option<&str>,
        eid: Option<&str>,
        value: Option<&str>,
    ) -> ValidEvent {
        ValidEvent {
            kind,
            uid: uid.map(Into::into),
            tg_id: None,
            value: value.map(|v| Decimal::parse(v).unwrap()),
            currency: "USD".into(),
            eid: eid.map(Into::into),
            occurred_at_ms: 1_800_000_000_000,
            time_supplied: false,
            received_at_ms: 1_800_000_000_000,
            source: crate::domain::event::Source::Post,
        }
    }

    /// `ev` naming Telegram user `tg_id` and no uid.
    pub(crate) fn by_tg(kind: EventKind, tg_id: u64, value: Option<&str>) -> ValidEvent {
        ValidEvent {
            tg_id: Some(tg_id),
            ..ev(kind, None, None, value)
        }
    }

    const W: u64 = 86_400_000;

    #[test]
    fn rules_in_order() {
        use EventKind::*;
        let k = |e: &ValidEvent| dedup_key(e, W).map(|k| k.basis);
        assert_eq!(
            k(&ev(Deposit, Some("u"), Some("e"), None)),
            Some(Basis::Eid)
        );
        assert_eq!(
            k(&ev(Contact, Some("u"), None, None)),
            Some(Basis::Milestone)
        );
        assert_eq!(
            k(&ev(Subscribed, Some("u"), None, None)),
            Some(Basis::Milestone)
        );
        assert_eq!(
            k(&ev(Registration, Some("u"), None, None)),
            Some(Basis::Milestone)
        );
        assert_eq!(
            k(&ev(Deposit, Some("u"), None, Some("5"))),
            Some(Basis::Fingerprint)
        );
        assert_eq!(k(&ev(Deposit, None, None, Some("5"))), None);
        assert_eq!(k(&ev(Contact, None, None, None)), None);
        assert_eq!(k(&by_tg(Contact, 7, None)), Some(Basis::Milestone));
        assert_eq!(k(&by_tg(Deposit, 7, Some("5"))), Some(Basis::Fingerprint));
    }

    /// Without a uid the Telegram id keys the event, under rules of its own; with a uid the uid
    /// decides and the Telegram id is no part of the key; with an eid neither is.
    #[test]
    fn a_telegram_id_keys_only_events_without_a_uid() {
        use EventKind::*;
        let key = |e: &ValidEvent| dedup_key(e, W).unwrap();
        let tg = by_tg(Contact, 7, None);
        let with_uid = ValidEvent {
            uid: Some("u".into()),
            ..tg.clone()
        };
        assert_eq!(key(&with_uid), key(&ev(Contact, Some("u"), None, None)));
        assert_ne!(key(&tg).rule, key(&with_uid).rule);
        assert_ne!(key(&tg), key(&by_tg(Contact, 8, None)));
        assert_ne!(key(&tg), key(&by_tg(Registration, 7, None)));
        let eid_given = ValidEvent {
            eid: Some("e".into()),
            ..tg
        };
        assert_eq!(key(&eid_given), key(&ev(Contact, None, Some("e"), None)));
        assert_eq!(
            key(&by_tg(Deposit, 7, Some("7"))),
            key(&by_tg(Deposit, 7, Some("7.00")))
        );
        assert_eq!(key(&by_tg(Deposit, 7, Some("7"))).window_ms, Some(W));
    }

    #[test]
    fn eid_key_is_per_event_kind() {
        let a = dedup_key(&ev(EventKind::Deposit, None, Some("x"), None), W).unwrap();
        let b = dedup_key(&ev(EventKind::Contact, None, Some("x"), None), W).unwrap();
        let c = dedup_key(
            &ev(EventKind::Deposit, Some("other"), Some("x"), Some("9")),
            W,
        )
        .unwrap();
        assert_ne!(a, b);
        assert_eq!(a, c, "with an eid, uid and value do not matter");
    }

    #[test]
    fn deposit_values_compare_by_amount() {
        let seven = dedup_key(&ev(EventKind::Deposit, Some("u"), None, Some("7")), W).unwrap();
        let seven00 = dedup_key(&ev(EventKind::Deposit, Some("u"), None, Some("7.00")), W).unwrap();
        let eight = dedup_key(&ev(EventKind::Deposit, Some("u"), None, Some("8")), W).unwrap();
        assert_eq!(seven, seven00);
        assert_ne!(seven, eight);
        assert_eq!(seven.window_ms, Some(W));
    }

    #[test]
    fn the_window_is_half_open() {
        let key = dedup_key(&ev(EventKind::Deposit, Some("u"), None, Some("7")), W).unwrap();
        assert_eq!(duplicate_of(&key, None, 5), None);
        assert_eq!(duplicate_of(&key, Some((9, 1000)), 1000 + W - 1), Some(9));
        assert_eq!(duplicate_of(&key, Some((9, 1000)), 1000 + W), None);
        let permanent = dedup_key(&ev(EventKind::Contact, Some("u"), None, None), W).unwrap();
        assert_eq!(duplicate_of(&permanent, Some((9, 0)), u64::MAX), Some(9));
    }

    /// An entry expires exactly when `duplicate_of` stops finding it: at the window's edge, not
    /// a millisecond before; and entries of the permanent rules never do.
    #[test]
    fn an_entry_expires_when_it_stops_counting() {
        let at = 1_000;
        for event in [
            ev(EventKind::Deposit, Some("u"), None, Some("7")),
            by_tg(EventKind::Deposit, 7, Some("7")),
        ] {
            let key = dedup_key(&event, W).unwrap();
            assert!(WINDOWED_RULES.contains(&key.rule), "{key:?}");
            for now in [at + W - 1, at + W, at + W + 1] {
                let expiry = Expiry {
                    now_ms: now,
                    window_ms: W,
                };
                let counts = duplicate_of(&key, Some((9, at)), now).is_some();
                assert_eq!(
                    expiry.expired(key.rule, at),
                    !counts,
                    "now = at + {}",
                    now - at
                );
            }
        }
        let expiry = Expiry {
            now_ms: u64::MAX,
            window_ms: W,
        };
        for rule in 1..=7 {
            assert_eq!(
                expiry.expired(rule, at),
                WINDOWED_RULES.contains(&rule),
                "rule {rule}"
            );
        }
    }

    #[test]
    fn supplied_time_makes_the_fingerprint_permanent_and_distinct() {
        let mut timed = ev(EventKind::Deposit, Some("u"), None, Some("7"));
        timed.time_supplied = true;
        let k1 = dedup_key(&timed, W).unwrap();
        assert_eq!(k1.window_ms, None);
        timed.occurred_at_ms += 1;
        assert_ne!(dedup_key(&timed, W).unwrap(), k1);
        let untimed = dedup_key(&ev(EventKind::Deposit, Some("u"), None, Some("7")), W).unwrap();
        assert_ne!(untimed.rule, k1.rule);
    }

    /// Pins every rule's stored key: `rule` and `digest` are part of the `DEDUP` table key, so a
    /// change here (field order, the length prefix, normalising the value, the digest) makes every
    /// stored entry unreachable and old events count as new. Such a change is a schema version.
    /// The expected digests were computed once and are written out, never derived by this code
    /// (the Telegram rules' by an independent SHA-256 of the length-prefixed fields: the id as 8
    /// big-endian bytes).
    #[test]
    fn stored_keys_are_stable() {
        const UID: &str = "3xQ9TbL0mZk7VwR2pYc8Nd";
        let eid = ev(
            EventKind::Deposit,
            Some(UID),
            Some("ord-20260314-88412"),
            Some("12.50"),
        );
        let milestone = ev(EventKind::Registration, Some(UID), None, None);
        let mut timed = ev(EventKind::Deposit, Some(UID), None, Some("12.50"));
        timed.time_supplied = true;
        timed.occurred_at_ms = 1_799_999_000_000;
        let windowed = ev(EventKind::Deposit, Some(UID), None, Some("12.50"));
        let tg = 123_456_789;
        let tg_milestone = by_tg(EventKind::Registration, tg, None);
        let mut tg_timed = by_tg(EventKind::Deposit, tg, Some("12.50"));
        tg_timed.time_supplied = true;
        tg_timed.occurred_at_ms = 1_799_999_000_000;
        let tg_windowed = by_tg(EventKind::Deposit, tg, Some("12.50"));
        // (event, rule byte, digest, window)
        #[rustfmt::skip]
        let cases = [
            (&eid,       1, 0x9188_cedd_af3e_4044_da35_290e_076b_3ccc, None),
            (&milestone, 2, 0xfcb6_f90f_ebda_b973_27b3_d834_a8e7_a1b6, None),
            (&timed,     3, 0x5fad_e22f_1ee1_c91b_4d41_0020_88d9_1b3d, None),
            (&windowed,  4, 0xa5e4_e448_d989_a74e_0cc8_b78d_0470_0db8, Some(W)),
            (&tg_milestone, 5, 0x4387_f785_618b_9332_8e33_a999_61a7_6b38, None),
            (&tg_timed,     6, 0x746b_4d66_3804_aba2_4fc4_1519_2de4_7036, None),
            (&tg_windowed,  7, 0x2085_47fe_2c8c_7cd5_0482_bb4e_a1e2_d856, Some(W)),
        ];
        for (event, rule, digest, window_ms) in cases {
            let key = dedup_key(event, W).unwrap();
            assert_eq!(
                (key.rule, key.digest, key.window_ms),
                (rule, digest, window_ms),
                "rule {rule}: got digest {:#034x}",
                key.digest
            );
        }
    }
}
