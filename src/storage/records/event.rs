//! The inbox's records: [`EventRecord`], one per stored event, its version 1 shape, and the
//! packed layout of versions 2 to 6 (`event_v2` below).
//!
//! # `EventRecord` versions 2 to 6
//!
//! The inbox holds one `EventRecord` per stored event, so its size is most of the data file's
//! size. Versions 1 (`postcard`) to 5 are still read; version 6 is written: the version 2
//! layout below, one byte of the event's `source` (1 `POST /events`, 2 `GET /e`; version 3 ends
//! there), then one byte of attribution: bits 0-1 `attributed_by` (0 none, 1 `uid`, 2 `tg_id`),
//! bit 2 set when a varint of the event's own `tg_id` follows, bit 3 set when the event is a
//! first deposit (version 5; version 4 is the same layout with bit 3 always 0), bit 4 set when
//! the 16 bytes of the event's `event_id` (big-endian) follow the `tg_id` (version 6; every
//! event written since has one, and a record that a migration rewrote from an older version
//! may lack it), the other bits 0. A record without an `event_id` has the one
//! `domain::event::EventId::derived` makes from its `inbox_id` and the file's salt.
//! Records before version 5 are no first deposits (the migration to schema 10 rewrote every
//! deposit it found one in as version 5; one from schema 2 keeps its source of 0, which only
//! version 5 allows after version 3).
//! Records of versions 1 and 2 have no source (0: "written before the tracker kept it");
//! records of versions 1 to 3 have no `tg_id`, and were attributed by `uid` exactly when
//! `matched`. A typical deposit (a `random_id` uid, `12.50`, `USD`, an 18-character `eid`, no
//! caller time) takes 71 bytes in version 1 and 48 in version 2. Version 2 packs the forms an
//! event's fields almost always take and keeps every other value as its text, so any
//! `EventRecord` round-trips:
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 1 | version: `2` (or `3`, with the source byte at the end) |
//! | 1 | 1 | flags, below |
//! | 2 | 0 or 1 | `kind`, only when flag bits 0-2 are 0 (it is then 0 or 8..=255) |
//! | | 1..=10 | `received_at_ms`: varint |
//! | | 0 or 1..=10 | time, only when flag `T` is set |
//! | | 16, or text | `uid`: packed when flag `U` is set, else optional text |
//! | | 1..=19, or text | `value`: packed when flag `V` is set, else optional text |
//! | | 2, or text | `currency`: packed when flag `C` is set, else varint length and UTF-8 |
//! | | text | `eid`: optional text |
//!
//! - Flags: bits 0-2 `kind` when it is 1..=7, else 0; bit 3 `matched`; bit 4 `T`; bit 5 `U`;
//!   bit 6 `V`; bit 7 `C`.
//! - Time: with `T` clear, `occurred_at_ms == received_at_ms` and `time_supplied` is false. With
//!   `T` set, a varint `zigzag(occurred_at_ms - received_at_ms) << 1 | time_supplied`, never 0.
//! - Packed `uid`: 16 bytes, the big-endian `u128` whose base62 form (digits `0-9A-Za-z`, most
//!   significant first, zero-padded to 22) is the uid. 62^22 > 2^128, so every `u128` has one.
//!   A uid made since schema 7 (`click::new_uid`: 7 characters of time, then 22) does not take
//!   this form and is kept as text.
//! - Packed `value`: a varint `zigzag(mantissa) << 5 | scale`, where `scale < 32`; the text is
//!   `mantissa / 10^scale` with exactly `scale` decimals and no leading zeros (`-12.50`, `0.05`,
//!   `7`).
//! - Packed `currency`: a big-endian `u16` `0aaaaabbbbbccccc`, three letters, `A` = 0 ... `Z` = 25.
//! - A varint is LEB128 as `postcard` writes it: 7 bits a byte, low group first, the high bit set
//!   on every byte but the last. `zigzag` maps 0, -1, 1, -2, ... to 0, 1, 2, 3, .... Optional
//!   text is a varint tag, 0 for `None` and `n + 1` for the `n` bytes of UTF-8 that follow.
//!
//! A writer packs a field only when unpacking gives back the identical text. A reader refuses
//! what no writer produces: a long-form `kind` of 1..=7, a time field of 0, a varint with a
//! redundant zero byte, bytes after the last field, a source of 0 (before version 5), an `attributed_by` that
//! disagrees with `matched` or names a `uid` or `tg_id` the record lacks, a `tg_id` of 0.

use serde::{Deserialize, Serialize};

use super::codec::{Record, from_postcard, unreadable_version};
use crate::storage::error::StoreError;

/// One inbox entry. Version 1 is the `postcard` encoding of [`EventRecordV1`]; versions 2 and 3
/// are the layout in the module documentation.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// `EventKind` as its stored discriminant.
    pub kind: u8,
    pub uid: Option<String>,
    /// The exact decimal text, as the caller wrote it (leading zeros aside).
    pub value: Option<String>,
    pub currency: String,
    pub eid: Option<String>,
    pub occurred_at_ms: u64,
    pub time_supplied: bool,
    pub received_at_ms: u64,
    /// Whether the event was attributed to a click of the space when it was stored.
    pub matched: bool,
    /// `Source` as its stored discriminant; 0 for records written before version 3.
    pub source: u8,
    /// The Telegram id the event itself named (`tg_id` / `tg`); `None` before version 4.
    pub tg_id: Option<u64>,
    /// `AttributedBy` as its stored discriminant, 0 when no click was found. When 2 (`tg_id`),
    /// `uid` is the click the Telegram id resolved to, not one the sender named.
    pub attributed_by: u8,
    /// Whether this deposit was its user's (or its click's) first, decided when it was written
    /// (`storage/first_deposit.rs`); false for every other kind, and before version 5.
    pub first_deposit: bool,
    /// The event's `event_id` (`domain::event::EventId`), made when it was written (version 6);
    /// `None` for an event stored before, whose id is derived from its `inbox_id` and the
    /// file's `META_EVENT_ID_SALT` (`storage::read::event_id`).
    pub event_id: Option<u128>,
}
impl Record for EventRecord {
    const VERSION: u8 = 6;
    const NAME: &'static str = "event";

    fn encode_body(&self, out: &mut Vec<u8>) {
        event_v2::encode(self, out);
        out.push(self.source);
        out.push(
            self.attributed_by
                | if self.tg_id.is_some() {
                    event_v2::TG_ID
                } else {
                    0
                }
                | if self.first_deposit {
                    event_v2::FIRST_DEPOSIT
                } else {
                    0
                }
                | if self.event_id.is_some() {
                    event_v2::EVENT_ID
                } else {
                    0
                },
        );
        if let Some(tg_id) = self.tg_id {
            event_v2::put_varint(out, u128::from(tg_id));
        }
        if let Some(id) = self.event_id {
            out.extend(id.to_be_bytes());
        }
    }

    fn decode_body(version: u8, body: &[u8]) -> Result<Self, StoreError> {
        let corrupt = |what: String| {
            StoreError::Corrupt(format!(
                "event record (version {version}) does not decode: {what}"
            ))
        };
        match version {
            1 => from_postcard::<EventRecordV1>(body).map(EventRecord::from),
            2 => event_v2::decode(body).map_err(corrupt),
            3 => match body.split_last() {
                Some((&source, fields)) if source != 0 => {
                    let mut record = event_v2::decode(fields).map_err(corrupt)?;
                    record.source = source;
                    Ok(record)
                }
                _ => Err(corrupt("no source byte".into())),
            },
            4..=6 => event_v2::decode_v4(body, version).map_err(corrupt),
            v => Err(unreadable_version::<Self>(v)),
        }
    }
}

/// The shape of an `EventRecord` of version 1, which `postcard` wrote field by field.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct EventRecordV1 {
    pub kind: u8,
    pub uid: Option<String>,
    pub value: Option<String>,
    pub currency: String,
    pub eid: Option<String>,
    pub occurred_at_ms: u64,
    pub time_supplied: bool,
    pub received_at_ms: u64,
    pub matched: bool,
}
impl Record for EventRecordV1 {
    const VERSION: u8 = 1;
    const NAME: &'static str = "event";
}

impl From<EventRecordV1> for EventRecord {
    fn from(r: EventRecordV1) -> Self {
        EventRecord {
            kind: r.kind,
            uid: r.uid,
            value: r.value,
            currency: r.currency,
            eid: r.eid,
            occurred_at_ms: r.occurred_at_ms,
            time_supplied: r.time_supplied,
            received_at_ms: r.received_at_ms,
            matched: r.matched,
            source: 0,
            tg_id: None,
            attributed_by: event_v2::attributed_before_v4(r.matched),
            first_deposit: false,
            event_id: None,
        }
    }
}

/// The version 2 body of an `EventRecord` (module documentation). The base62 alphabet and the
/// decimal notation are spelled out here rather than borrowed from `domain`, because stored bytes
/// must keep decoding to the same text whatever those modules later do.
mod event_v2 {
    use super::EventRecord;

    pub(super) const KIND_BITS: u8 = 0b0000_0111;
    pub(super) const MATCHED: u8 = 1 << 3;
    pub(super) const TIME: u8 = 1 << 4;
    pub(super) const UID_PACKED: u8 = 1 << 5;
    pub(super) const VALUE_PACKED: u8 = 1 << 6;
    pub(super) const CURRENCY_PACKED: u8 = 1 << 7;

    /// In version 4's attribution byte: `attributed_by` in bits 0-1, and whether a `tg_id` follows.
    const ATTRIBUTED_BY: u8 = 0b0000_0011;
    pub(super) const TG_ID: u8 = 1 << 2;
    /// In version 5's attribution byte: the event is a first deposit.
    pub(super) const FIRST_DEPOSIT: u8 = 1 << 3;
    /// In version 6's attribution byte: the 16 bytes of the event's `event_id` follow the
    /// `tg_id` (big-endian). Every event written since has one; a record rewritten by a
    /// migration from an older version (schema 10's first deposits) may have none.
    pub(super) const EVENT_ID: u8 = 1 << 4;
    /// `AttributedBy::Uid`'s stored discriminant: how an event stored before version 4 with a
    /// click was attributed.
    const BY_UID: u8 = 1;
    const BY_TG_ID: u8 = 2;

    /// The `attributed_by` of a record written before version 4, which kept none: by `uid`
    /// exactly when it was matched.
    pub(super) fn attributed_before_v4(matched: bool) -> u8 {
        if matched { BY_UID } else { 0 }
    }

    /// Frozen with the format: the same digits as `domain::base62::DIGITS`, kept here and not
    /// borrowed (see above), so packed uids decode to the same text whatever `domain` does.
    const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    /// 62^22 > 2^128, so every `u128` has a 22-digit form and the packing is a bijection between
    /// `u128` and the 22-digit strings whose value fits.
    const UID_LEN: usize = 22;
    /// The scale shares the value's varint in its low 5 bits.
    const SCALE_BITS: u32 = 5;

    pub(super) fn encode(r: &EventRecord, out: &mut Vec<u8>) {
        let text_len = |s: &Option<String>| s.as_ref().map_or(0, String::len);
        out.reserve(
            24 + text_len(&r.uid) + text_len(&r.value) + r.currency.len() + text_len(&r.eid),
        );
        let flags_at = out.len();
        let mut flags = if (1..=KIND_BITS).contains(&r.kind) {
            out.push(0);
            r.kind
        } else {
            out.extend([0, r.kind]);
            0
        };
        if r.matched {
            flags |= MATCHED;
        }
        put_varint(out, u128::from(r.received_at_ms));
        let delta = i128::from(r.occurred_at_ms) - i128::from(r.received_at_ms);
        if delta != 0 || r.time_supplied {
            flags |= TIME;
            put_varint(out, zigzag(delta) << 1 | u128::from(r.time_supplied));
        }
        match r.uid.as_deref().and_then(pack_uid) {
            Some(n) => {
                flags |= UID_PACKED;
                out.extend(n.to_be_bytes());
            }
            None => put_optional_text(out, r.uid.as_deref()),
        }
        match r.value.as_deref().and_then(pack_value) {
            Some(n) => {
                flags |= VALUE_PACKED;
                put_varint(out, n);
            }
            None => put_optional_text(out, r.value.as_deref()),
        }
        match pack_currency(&r.currency) {
            Some(n) => {
                flags |= CURRENCY_PACKED;
                out.extend(n.to_be_bytes());
            }
            None => put_text(out, &r.currency),
        }
        put_optional_text(out, r.eid.as_deref());
        out[flags_at] = flags;
    }

    /// A version 2 body, which must fill `body`. The error says what is wrong, for
    /// `StoreError::Corrupt`.
    pub(super) fn decode(body: &[u8]) -> Result<EventRecord, String> {
        let mut b = Reader { rest: body };
        let record = decode_fields(&mut b)?;
        b.end()?;
        Ok(record)
    }

    /// A body of version 4, 5 (whose attribution byte may mark a first deposit) or 6 (which
    /// may also announce an `event_id`): the version 2 fields, the source, the attribution byte,
    /// the `tg_id` and the `event_id` it announces.
    pub(super) fn decode_v4(body: &[u8], version: u8) -> Result<EventRecord, String> {
        let mut b = Reader { rest: body };
        let mut record = decode_fields(&mut b)?;
        // Version 5 may say 0: the schema 10 migration marks first deposits of schema 2, which
        // kept no source, and rewrites them as version 5 (6 since).
        record.source = match b.byte("source")? {
            0 if version < 5 => return Err("no source byte".into()),
            source => source,
        };
        let attribution = b.byte("attribution")?;
        let known = ATTRIBUTED_BY
            | TG_ID
            | if version >= 5 { FIRST_DEPOSIT } else { 0 }
            | if version >= 6 { EVENT_ID } else { 0 };
        if attribution & !known != 0 {
            return Err(format!(
                "attribution byte {attribution:#04x} has unknown bits"
            ));
        }
        if attribution & TG_ID != 0 {
            record.tg_id = match b.varint_u64("tg_id")? {
                0 => return Err("tg_id is 0".into()),
                tg_id => Some(tg_id),
            };
        }
        if attribution & EVENT_ID != 0 {
            record.event_id = Some(u128::from_be_bytes(b.array("event_id")?));
        }
        record.attributed_by = attribution & ATTRIBUTED_BY;
        record.first_deposit = attribution & FIRST_DEPOSIT != 0;
        b.end()?;
        let consistent = match record.attributed_by {
            0 => !record.matched,
            BY_UID => record.matched && record.uid.is_some(),
            BY_TG_ID => record.matched && record.uid.is_some() && record.tg_id.is_some(),
            _ => false,
        };
        if !consistent {
            return Err(format!(
                "attributed_by {} disagrees with matched {}, uid and tg_id",
                record.attributed_by, record.matched
            ));
        }
        Ok(record)
    }

    /// The fields of the version 2 layout, from `b`, leaving what follows them.
    fn decode_fields(b: &mut Reader<'_>) -> Result<EventRecord, String> {
        let flags = b.byte("flags")?;
        let kind = match flags & KIND_BITS {
            0 => match b.byte("kind")? {
                k @ 1..=KIND_BITS => return Err(format!("kind {k} is in the long form")),
                k => k,
            },
            k => k,
        };
        let received_at_ms = b.varint_u64("received_at_ms")?;
        let (occurred_at_ms, time_supplied) = if flags & TIME == 0 {
            (received_at_ms, false)
        } else {
            match b.varint("occurred_at_ms")? {
                0 => return Err("occurred_at_ms is present but says nothing".into()),
                t => (
                    add_delta(received_at_ms, t >> 1).ok_or("occurred_at_ms is out of range")?,
                    t & 1 == 1,
                ),
            }
        };
        let uid = if flags & UID_PACKED == 0 {
            b.optional_text("uid")?
        } else {
            Some(unpack_uid(u128::from_be_bytes(b.array("uid")?)))
        };
        let value = if flags & VALUE_PACKED == 0 {
            b.optional_text("value")?
        } else {
            Some(unpack_value(b.varint("value")?))
        };
        let currency = if flags & CURRENCY_PACKED == 0 {
            let len = b.varint("currency")?;
            b.text(len, "currency")?
        } else {
            unpack_currency(u16::from_be_bytes(b.array("currency")?))
                .ok_or("packed currency is not three letters A-Z")?
        };
        let eid = b.optional_text("eid")?;
        let matched = flags & MATCHED != 0;
        Ok(EventRecord {
            kind,
            uid,
            value,
            currency,
            eid,
            occurred_at_ms,
            time_supplied,
            received_at_ms,
            matched,
            source: 0,
            tg_id: None,
            attributed_by: attributed_before_v4(matched),
            first_deposit: false,
            event_id: None,
        })
    }

    pub(super) fn put_varint(out: &mut Vec<u8>, mut n: u128) {
        while n >= 0x80 {
            out.push(n as u8 | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
    }

    fn put_text(out: &mut Vec<u8>, text: &str) {
        put_varint(out, text.len() as u128);
        out.extend_from_slice(text.as_bytes());
    }

    fn put_optional_text(out: &mut Vec<u8>, text: Option<&str>) {
        match text {
            None => out.push(0),
            Some(t) => {
                put_varint(out, t.len() as u128 + 1);
                out.extend_from_slice(t.as_bytes());
            }
        }
    }

    fn zigzag(n: i128) -> u128 {
        let m = n.unsigned_abs() << 1;
        if n < 0 { m - 1 } else { m }
    }

    /// `base + unzigzag(z)`, if it is a `u64`.
    fn add_delta(base: u64, z: u128) -> Option<u64> {
        let magnitude = u64::try_from((z >> 1) + (z & 1)).ok()?;
        if z & 1 == 0 {
            base.checked_add(magnitude)
        } else {
            base.checked_sub(magnitude)
        }
    }

    fn pack_uid(uid: &str) -> Option<u128> {
        if uid.len() != UID_LEN {
            return None;
        }
        uid.bytes().try_fold(0u128, |n, b| {
            let digit = match b {
                b'0'..=b'9' => b - b'0',
                b'A'..=b'Z' => b - b'A' + 10,
                b'a'..=b'z' => b - b'a' + 36,
                _ => return None,
            };
            n.checked_mul(62)?.checked_add(u128::from(digit))
        })
    }

    pub(super) fn unpack_uid(mut n: u128) -> String {
        let mut digits = [0u8; UID_LEN];
        for slot in digits.iter_mut().rev() {
            *slot = BASE62[(n % 62) as usize];
            n /= 62;
        }
        digits.into_iter().map(char::from).collect()
    }

    /// The packed form of `text` if `unpack_value` gives `text` back from it.
    fn pack_value(text: &str) -> Option<u128> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
        let scale = u8::try_from(frac.len())
            .ok()
            .filter(|&s| s < 1 << SCALE_BITS)?;
        let magnitude = int.bytes().chain(frac.bytes()).try_fold(0u128, |n, b| {
            if !b.is_ascii_digit() {
                return None;
            }
            n.checked_mul(10)?.checked_add(u128::from(b - b'0'))
        })?;
        // The zigzag form of a magnitude below 2^122 leaves room for the scale bits.
        if magnitude >> (127 - SCALE_BITS) != 0 {
            return None;
        }
        let zigzag = if negative {
            (magnitude << 1).checked_sub(1)?
        } else {
            magnitude << 1
        };
        let packed = zigzag << SCALE_BITS | u128::from(scale);
        // Leading zeros, `-0`, `12.` and the like are not how the value is written back.
        (unpack_value(packed) == text).then_some(packed)
    }

    pub(super) fn unpack_value(packed: u128) -> String {
        let scale = (packed & ((1 << SCALE_BITS) - 1)) as usize;
        let zigzag = packed >> SCALE_BITS;
        let magnitude = (zigzag >> 1) + (zigzag & 1);
        let sign = if zigzag & 1 == 1 { "-" } else { "" };
        let digits = format!("{magnitude:0>width$}", width = scale + 1);
        if scale == 0 {
            format!("{sign}{digits}")
        } else {
            let (int, frac) = digits.split_at(digits.len() - scale);
            format!("{sign}{int}.{frac}")
        }
    }

    fn pack_currency(currency: &str) -> Option<u16> {
        let &[a, b, c] = currency.as_bytes() else {
            return None;
        };
        [a, b, c]
            .iter()
            .all(u8::is_ascii_uppercase)
            .then(|| u16::from(a - b'A') << 10 | u16::from(b - b'A') << 5 | u16::from(c - b'A'))
    }

    fn unpack_currency(n: u16) -> Option<String> {
        if n >> 15 != 0 {
            return None;
        }
        [n >> 10, n >> 5, n]
            .into_iter()
            .map(|letter| {
                let letter = (letter & 0b1_1111) as u8;
                (letter < 26).then(|| char::from(b'A' + letter))
            })
            .collect()
    }

    /// The unread part of a body; every read names the field, for the error.
    struct Reader<'a> {
        rest: &'a [u8],
    }

    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], String> {
            if self.rest.len() < n {
                return Err(format!("the record ends inside {field}"));
            }
            let (head, tail) = self.rest.split_at(n);
            self.rest = tail;
            Ok(head)
        }

        fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], String> {
            let mut array = [0; N];
            array.copy_from_slice(self.take(N, field)?);
            Ok(array)
        }

        fn byte(&mut self, field: &str) -> Result<u8, String> {
            let [byte] = self.array(field)?;
            Ok(byte)
        }

        fn varint(&mut self, field: &str) -> Result<u128, String> {
            let mut n = 0u128;
            for shift in (0..128u32).step_by(7) {
                let byte = self.byte(field)?;
                let group = u128::from(byte & 0x7f);
                if shift > 0 && byte == 0 {
                    return Err(format!("{field} is a varint with a redundant zero byte"));
                }
                if group >> (128 - shift).min(7) != 0 {
                    return Err(format!("{field} is a varint over 128 bits"));
                }
                n |= group << shift;
                if byte & 0x80 == 0 {
                    return Ok(n);
                }
            }
            Err(format!("{field} is a varint over 128 bits"))
        }

        fn varint_u64(&mut self, field: &str) -> Result<u64, String> {
            u64::try_from(self.varint(field)?).map_err(|_| format!("{field} is over 64 bits"))
        }

        fn text(&mut self, len: u128, field: &str) -> Result<String, String> {
            let len =
                usize::try_from(len).map_err(|_| format!("the record ends inside {field}"))?;
            let bytes = self.take(len, field)?;
            String::from_utf8(bytes.to_vec()).map_err(|_| format!("{field} is not UTF-8"))
        }

        fn optional_text(&mut self, field: &str) -> Result<Option<String>, String> {
            match self.varint(field)? {
                0 => Ok(None),
                tag => self.text(tag - 1, field).map(Some),
            }
        }

        /// Nothing may follow the record's last field.
        fn end(&self) -> Result<(), String> {
            if self.rest.is_empty() {
                Ok(())
            } else {
                Err(format!("{} bytes after its end", self.rest.len()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::event_v2::{CURRENCY_PACKED, TIME, UID_PACKED, VALUE_PACKED};
    use crate::storage::records::codec::tests::T;
    use crate::storage::records::{decode, encode};

    /// A deposit as the writer stores it when the caller gave no time: a `random_id` uid, a
    /// two-decimal value, the default currency, an order number as `eid`.
    fn typical() -> EventRecord {
        EventRecord {
            kind: 4,
            uid: Some("3xQ9TbL0mZk7VwR2pYc8Nd".into()),
            value: Some("12.50".into()),
            currency: "USD".into(),
            eid: Some("ord-20260314-88412".into()),
            occurred_at_ms: T,
            time_supplied: false,
            received_at_ms: T,
            matched: true,
            source: 1,
            tg_id: None,
            attributed_by: 1,
            first_deposit: false,
            event_id: None,
        }
    }

    /// `r` as a reader sees it in a record of version 1 or 2, which kept no source.
    fn without_source(r: EventRecord) -> EventRecord {
        EventRecord { source: 0, ..r }
    }

    /// `typical()` as version 1 (`postcard`) wrote it, before version 2 existed.
    const TYPICAL_V1: [u8; 71] = [
        1, 4, 1, 22, 51, 120, 81, 57, 84, 98, 76, 48, 109, 90, 107, 55, 86, 119, 82, 50, 112, 89,
        99, 56, 78, 100, 1, 5, 49, 50, 46, 53, 48, 3, 85, 83, 68, 1, 18, 111, 114, 100, 45, 50, 48,
        50, 54, 48, 51, 49, 52, 45, 56, 56, 52, 49, 50, 128, 206, 217, 230, 206, 51, 0, 128, 206,
        217, 230, 206, 51, 1,
    ];

    /// `typical()` in version 2, as the builds of schema 2 wrote it.
    #[rustfmt::skip]
    const TYPICAL_V2: [u8; 48] = [
        2, // version
        0b1110_1100, // flags: C V U, matched, kind 4
        128, 206, 217, 230, 206, 51, // received_at_ms
        130, 15, 165, 112, 78, 203, 77, 47, 177, 145, 25, 99, 244, 151, 17, 105, // uid
        130, 241, 4, // value: zigzag(1250) << 5 | 2
        0x52, 0x43, // currency: U = 20, S = 18, D = 3
        19, b'o', b'r', b'd', b'-', b'2', b'0', b'2', b'6', b'0', b'3', b'1', b'4', b'-', b'8',
        b'8', b'4', b'1', b'2', // eid: tag 18 + 1, then its bytes
    ];

    /// `typical()` in version 3, as the builds of schemas 3 to 7 wrote it (version 2's bytes,
    /// and the source).
    fn typical_v3() -> Vec<u8> {
        let mut v3 = TYPICAL_V2.to_vec();
        v3[0] = 3;
        v3.push(1);
        v3
    }

    /// `typical()` in version 4: the bytes this build writes (version 3's, and the attribution
    /// byte: by `uid`, no Telegram id).
    fn typical_v4() -> Vec<u8> {
        let mut v4 = typical_v3();
        v4[0] = 4;
        v4.push(0b0000_0001);
        v4
    }

    fn round_trip(r: &EventRecord) -> Vec<u8> {
        let bytes = encode(r);
        assert_eq!(bytes[0], 6);
        assert_eq!(
            &decode::<EventRecord>(&bytes).unwrap(),
            r,
            "bytes {bytes:?}"
        );
        bytes
    }

    /// Which of uid, value and currency took the packed form.
    fn packed(bytes: &[u8]) -> (bool, bool, bool) {
        let flags = bytes[1];
        (
            flags & UID_PACKED != 0,
            flags & VALUE_PACKED != 0,
            flags & CURRENCY_PACKED != 0,
        )
    }

    fn corrupt_message(bytes: &[u8]) -> String {
        match decode::<EventRecord>(bytes) {
            Err(StoreError::Corrupt(what)) => what,
            other => panic!("{bytes:?} should be corrupt, got {other:?}"),
        }
    }

    #[test]
    fn typical_event_round_trips_packed() {
        let bytes = round_trip(&typical());
        assert_eq!(packed(&bytes), (true, true, true));
    }

    /// Pins the version 3 wire format, which inbox entries of schemas 3 to 7 hold: they must
    /// keep reading as they were written.
    #[test]
    fn typical_event_v3_bytes_are_stable() {
        assert_eq!(decode::<EventRecord>(&typical_v3()).unwrap(), typical());
    }

    /// `typical()` in version 5, a first deposit: the bytes this build writes (version 4's, with
    /// bit 3 of the attribution byte set).
    fn typical_v5() -> Vec<u8> {
        let mut v5 = typical_v4();
        v5[0] = 5;
        *v5.last_mut().unwrap() = 0b0000_1001;
        v5
    }

    /// Pins the version 4 wire format, which inbox entries of schema 8 hold.
    #[test]
    fn typical_event_v4_bytes_are_stable() {
        assert_eq!(decode::<EventRecord>(&typical_v4()).unwrap(), typical());
    }

    /// Pins the version 5 wire format, which inbox entries of schemas 10 to 12 hold.
    #[test]
    fn typical_event_v5_bytes_are_stable() {
        let first = EventRecord {
            first_deposit: true,
            ..typical()
        };
        assert_eq!(decode::<EventRecord>(&typical_v5()).unwrap(), first);
        let mut not_first = typical_v4();
        not_first[0] = 5;
        assert_eq!(decode::<EventRecord>(&not_first).unwrap(), typical());
        // Version 4 never marks a first deposit; version 5 knows no bit above it.
        let mut v4_marked = typical_v5();
        v4_marked[0] = 4;
        assert!(corrupt_message(&v4_marked).contains("unknown bits"));
        let mut unknown = typical_v5();
        *unknown.last_mut().unwrap() |= 0b0001_0000;
        assert!(corrupt_message(&unknown).contains("unknown bits"));
    }

    /// Pins the version 6 wire format: if this fails, the change needs a new version. An event
    /// written now has its `event_id`, 16 bytes after the attribution byte, whose bit 4 says so;
    /// a record a migration rewrote from an older version may have none.
    #[test]
    fn typical_event_v6_bytes_are_stable() {
        let record = EventRecord {
            first_deposit: true,
            event_id: Some(0x0102_0304_0506_4708_8900_0000_0000_00ff),
            ..typical()
        };
        let mut v6 = typical_v5();
        v6[0] = 6;
        *v6.last_mut().unwrap() = 0b0001_1001;
        v6.extend([1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 0, 0, 0, 0, 0, 0, 0xff]);
        assert_eq!(encode(&record), v6);
        assert_eq!(decode::<EventRecord>(&v6).unwrap(), record);
        assert_eq!(v6.len(), typical_v5().len() + 16);
        // Without an id: version 5's bytes under version 6.
        let mut no_id = typical_v5();
        no_id[0] = 6;
        let without = EventRecord {
            event_id: None,
            ..record.clone()
        };
        assert_eq!(encode(&without), no_id);
        // Cut inside the id, or announced by a version 5 record.
        assert!(corrupt_message(&v6[..v6.len() - 1]).contains("inside event_id"));
        let mut v5_with_id = v6.clone();
        v5_with_id[0] = 5;
        assert!(corrupt_message(&v5_with_id).contains("unknown bits"));
        let mut unknown = v6;
        let at = unknown.len() - 17;
        unknown[at] |= 0b0010_0000;
        assert!(corrupt_message(&unknown).contains("unknown bits"));
    }

    /// Inbox entries written by schema 2 keep reading, without a source.
    #[test]
    fn version_2_events_still_decode() {
        assert_eq!(
            decode::<EventRecord>(&TYPICAL_V2).unwrap(),
            without_source(typical())
        );
        let mut no_source = typical_v3();
        no_source.pop();
        assert!(corrupt_message(&no_source).contains("version 3"));
        let mut zero_source = typical_v3();
        *zero_source.last_mut().unwrap() = 0;
        assert!(corrupt_message(&zero_source).contains("no source"));
    }

    /// Inbox entries written before version 2 must keep reading.
    #[test]
    fn version_1_events_still_decode() {
        assert_eq!(
            decode::<EventRecord>(&TYPICAL_V1).unwrap(),
            without_source(typical())
        );
        let v1 = [
            1, 2, 0, 0, 4, 85, 83, 68, 84, 0, 192, 201, 156, 230, 206, 51, 1, 128, 206, 217, 230,
            206, 51, 0,
        ];
        let expected = EventRecord {
            kind: 2,
            uid: None,
            value: None,
            currency: "USDT".into(),
            eid: None,
            occurred_at_ms: T - 1_000_000,
            time_supplied: true,
            received_at_ms: T,
            matched: false,
            source: 0,
            tg_id: None,
            attributed_by: 0,
            first_deposit: false,
            event_id: None,
        };
        assert_eq!(decode::<EventRecord>(&v1).unwrap(), expected);
        let mut longer = TYPICAL_V1.to_vec();
        longer.push(0);
        assert!(corrupt_message(&longer).contains("after its end"));
    }

    /// Version 1 took 71 bytes for `typical()`, version 2 48, version 3 one more for the source,
    /// version 4 one more for the attribution.
    #[test]
    fn typical_event_shrinks_from_71_to_50_bytes() {
        let r = typical();
        let v1 = [
            &[1][..],
            &postcard::to_stdvec(&EventRecordV1 {
                kind: r.kind,
                uid: r.uid.clone(),
                value: r.value.clone(),
                currency: r.currency.clone(),
                eid: r.eid.clone(),
                occurred_at_ms: r.occurred_at_ms,
                time_supplied: r.time_supplied,
                received_at_ms: r.received_at_ms,
                matched: r.matched,
            })
            .unwrap(),
        ]
        .concat();
        assert_eq!(v1, TYPICAL_V1);
        let v4 = encode(&r);
        assert!(v4.len() <= 50, "{} bytes", v4.len());
    }

    #[test]
    fn uids_from_random_id_are_packed() {
        for _ in 0..200 {
            let r = EventRecord {
                uid: Some(crate::domain::credential::random_id()),
                ..typical()
            };
            assert!(packed(&round_trip(&r)).0, "{:?}", r.uid);
        }
    }

    #[test]
    fn uid_forms_round_trip() {
        let max = super::event_v2::unpack_uid(u128::MAX);
        let cases: [(Option<&str>, bool); 11] = [
            (Some("0000000000000000000000"), true),
            (Some("0000000000000000000001"), true),
            (Some(&max), true),
            // u128::MAX + 1: the first 22-digit string that does not fit.
            (Some("7n42DGM5Tflk9n8mt7Fhc8"), false),
            (Some("zzzzzzzzzzzzzzzzzzzzzz"), false),
            (Some("3xQ9TbL0mZk7VwR2pYc8N"), false),
            (Some("3xQ9TbL0mZk7VwR2pYc8Nd0"), false),
            (Some("3xQ9TbL0mZk7VwR2pYc8N-"), false),
            (Some("ééééééééééé"), false),
            (Some(""), false),
            (None, false),
        ];
        assert_eq!(max, "7n42DGM5Tflk9n8mt7Fhc7");
        for (uid, expect_packed) in cases {
            // Without a uid, no click: a writer stores it unmatched.
            let r = EventRecord {
                uid: uid.map(str::to_owned),
                matched: uid.is_some(),
                attributed_by: u8::from(uid.is_some()),
                ..typical()
            };
            assert_eq!(packed(&round_trip(&r)).0, expect_packed, "{uid:?}");
        }
    }

    #[test]
    fn value_forms_round_trip() {
        let packs = [
            "0",
            "7",
            "-7",
            "12.50",
            "-12.50",
            "0.05",
            "0.00",
            "-0.5",
            "100",
            "1234567890123456789012345678",
            "-0.1234567890123456789012345678",
            "0.0000000000000000000000000000001", // scale 31
        ];
        let text = [
            "012.5",
            "00",
            "-0",
            "-0.00",
            "12.",
            ".5",
            "+5",
            "1e3",
            "1E3",
            "",
            "-",
            "abc",
            "1.2.3",
            " 1",
            "١٢",
            "0.00000000000000000000000000000001",     // scale 32
            "10000000000000000000000000000000000000", // over 2^122
        ];
        for (value, expect_packed) in packs
            .iter()
            .map(|v| (Some(*v), true))
            .chain(text.iter().map(|v| (Some(*v), false)))
            .chain([(None, false)])
        {
            let r = EventRecord {
                value: value.map(str::to_owned),
                ..typical()
            };
            assert_eq!(packed(&round_trip(&r)).1, expect_packed, "{value:?}");
        }
    }

    #[test]
    fn currency_forms_round_trip() {
        for (currency, expect_packed) in [
            ("USD", true),
            ("AAA", true),
            ("ZZZ", true),
            ("usd", false),
            ("USDT", false),
            ("US", false),
            ("", false),
            ("ÜSD", false),
            ("U1D", false),
        ] {
            let r = EventRecord {
                currency: currency.into(),
                ..typical()
            };
            assert_eq!(packed(&round_trip(&r)).2, expect_packed, "{currency:?}");
        }
    }

    #[test]
    fn times_kinds_and_flags_round_trip() {
        // (occurred_at_ms, time_supplied, received_at_ms)
        let times = [
            (T, false, T),
            (T, true, T),
            (T - 60_000, true, T),
            (T + 600_000, true, T),
            (T - 1, false, T),
            (0, true, u64::MAX),
            (u64::MAX, false, 0),
            (u64::MAX, true, u64::MAX),
            (0, false, 0),
        ];
        for (occurred_at_ms, time_supplied, received_at_ms) in times {
            round_trip(&EventRecord {
                occurred_at_ms,
                time_supplied,
                received_at_ms,
                ..typical()
            });
        }
        for kind in [0, 1, 2, 3, 4, 7, 8, 200, 255] {
            for matched in [false, true] {
                round_trip(&EventRecord {
                    kind,
                    matched,
                    attributed_by: u8::from(matched),
                    ..typical()
                });
            }
        }
        let bare = EventRecord {
            kind: 1,
            uid: None,
            value: None,
            currency: String::new(),
            eid: None,
            occurred_at_ms: 0,
            time_supplied: false,
            received_at_ms: 0,
            matched: false,
            source: 2,
            tg_id: None,
            attributed_by: 0,
            first_deposit: false,
            event_id: None,
        };
        assert_eq!(round_trip(&bare), [6, 1, 0, 0, 0, 0, 0, 2, 0]);
    }

    #[test]
    fn other_versions_are_refused() {
        let mut bytes = encode(&typical());
        for version in [0, 7, 255] {
            bytes[0] = version;
            let what = corrupt_message(&bytes);
            assert!(what.contains(&format!("version {version}")), "{what}");
        }
        assert!(corrupt_message(&[]).contains("empty"));
    }

    #[test]
    fn every_truncation_is_an_error() {
        let records = [
            typical(),
            EventRecord {
                kind: 200,
                uid: Some("not-a-click-id".into()),
                value: Some("012.5".into()),
                currency: "usdt".into(),
                occurred_at_ms: 0,
                time_supplied: true,
                ..typical()
            },
        ];
        for r in &records {
            let bytes = round_trip(r);
            for len in 0..bytes.len() {
                assert!(decode::<EventRecord>(&bytes[..len]).is_err(), "{len}");
            }
            // A byte after the last field.
            let mut longer = bytes;
            longer.push(1);
            assert!(corrupt_message(&longer).contains("after its end"));
        }
    }

    #[test]
    fn malformed_bodies_are_corrupt() {
        let v2 = |parts: &[&[u8]]| [&[2][..], &parts.concat()].concat();
        // Kind 1, received 0, then uid, value, currency and eid as empty text.
        let fields = [0, 0, 0, 0, 0];
        assert!(decode::<EventRecord>(&v2(&[&[1], &fields])).is_ok());
        let cases: [(&[&[u8]], &str); 10] = [
            (&[&[0, 4], &fields], "long form"),
            (
                &[&[1 | TIME], &fields[..1], &[0], &fields[1..]],
                "says nothing",
            ),
            (
                &[&[1 | TIME], &fields[..1], &[3], &fields[1..]],
                "out of range",
            ),
            (&[&[1, 0x80], &fields], "redundant"),
            (&[&[1], &[0x80; 9], &[2], &fields[1..]], "over 64 bits"),
            (&[&[1], &fields[..4], &[2, 0xff]], "not UTF-8"),
            (&[&[1, 0, 9, b'a'], &fields[2..]], "ends inside uid"),
            (
                &[&[1 | CURRENCY_PACKED, 0, 0, 0, 0x80, 0, 0]],
                "three letters",
            ),
            // The third letter is 26.
            (
                &[&[1 | CURRENCY_PACKED, 0, 0, 0, 0x00, 26, 0]],
                "three letters",
            ),
            (
                &[&[1 | VALUE_PACKED, 0, 0], &[0xff; 18], &[0x7f, 0, 0]],
                "over 128 bits",
            ),
        ];
        for (parts, expect) in cases {
            let bytes = v2(parts);
            let what = corrupt_message(&bytes);
            assert!(what.contains(expect), "{bytes:?}: {what}");
        }
    }

    /// xorshift64: a fixed seed gives the same records on every run, without a dependency.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn u128(&mut self) -> u128 {
            u128::from(self.next()) << 64 | u128::from(self.next())
        }

        fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len() as u64) as usize]
        }

        /// Text that is sometimes in a packed form and often near one.
        fn text(&mut self) -> String {
            let alphabet = [
                "0", "1", "9", "-", ".", "A", "Z", "a", "z", "e", "é", "€", "😀", " ",
            ];
            match self.below(4) {
                0 => super::event_v2::unpack_uid(self.u128()),
                1 => super::event_v2::unpack_value(self.u128() >> self.below(128)),
                2 => (0..22).map(|_| self.pick(&alphabet[..9])).collect(),
                _ => (0..self.below(30)).map(|_| self.pick(&alphabet)).collect(),
            }
        }

        fn optional_text(&mut self) -> Option<String> {
            (self.below(5) != 0).then(|| self.text())
        }

        fn time(&mut self) -> u64 {
            match self.below(3) {
                0 => T + self.below(1 << 20),
                1 => self.next(),
                _ => [0, 1, u64::MAX][self.below(3) as usize],
            }
        }

        fn record(&mut self) -> EventRecord {
            let received_at_ms = self.time();
            let occurred_at_ms = match self.below(3) {
                0 => received_at_ms,
                1 => received_at_ms
                    .wrapping_add(self.below(1 << 24))
                    .wrapping_sub(1 << 23),
                _ => self.time(),
            };
            let currency = if self.below(2) == 0 {
                (0..3)
                    .map(|_| char::from(b'A' + self.below(26) as u8))
                    .collect()
            } else {
                self.text()
            };
            let uid = self.optional_text();
            let tg_id = match self.below(3) {
                0 => None,
                1 => Some(1 + self.below(1 << 53)),
                _ => Some(self.next().max(1)),
            };
            // Only what a writer stores: by uid needs a uid, by tg_id a uid and a tg_id.
            let attributed_by = match (self.below(3) as u8, &uid, tg_id) {
                (2, Some(_), Some(_)) => 2,
                (1 | 2, Some(_), _) => 1,
                _ => 0,
            };
            EventRecord {
                kind: if self.below(2) == 0 {
                    4
                } else {
                    self.next() as u8
                },
                uid,
                value: self.optional_text(),
                currency,
                eid: self.optional_text(),
                occurred_at_ms,
                time_supplied: self.below(2) == 0,
                received_at_ms,
                matched: attributed_by != 0,
                source: 1 + self.below(2) as u8,
                tg_id,
                attributed_by,
                first_deposit: self.below(2) == 0,
                event_id: (self.below(2) == 0).then(|| self.u128()),
            }
        }
    }

    #[test]
    fn pseudo_random_records_round_trip() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut packed_seen = [0; 3];
        for _ in 0..5000 {
            let bytes = round_trip(&rng.record());
            let (uid, value, currency) = packed(&bytes);
            for (seen, was) in packed_seen.iter_mut().zip([uid, value, currency]) {
                *seen += usize::from(was);
            }
        }
        // The generator reaches the packed forms as well as the fallbacks.
        assert!(packed_seen.iter().all(|&n| n > 200), "{packed_seen:?}");
    }

    /// Damaged records: decoding never panics, and whatever it accepts encodes and decodes
    /// to the same record.
    #[test]
    fn damaged_records_never_panic() {
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for _ in 0..5000 {
            let mut bytes = encode(&rng.record());
            for _ in 0..=rng.below(3) {
                let at = rng.below(bytes.len() as u64) as usize;
                match rng.below(3) {
                    0 => bytes[at] = rng.next() as u8,
                    1 => bytes.truncate(at.max(1)),
                    _ => bytes.insert(at.max(1), rng.next() as u8),
                }
            }
            if let Ok(r) = decode::<EventRecord>(&bytes) {
                round_trip(&r);
            }
        }
    }

    /// Pins version 3 with every field in its text form: a long-form `kind`, a supplied time
    /// before receipt, and a uid, value, currency and eid that do not pack. The same body
    /// without the source byte, under version 2, still reads (with no source).
    #[test]
    fn text_form_event_v3_bytes_are_stable() {
        let record = EventRecord {
            kind: 200,
            uid: Some("click-42".into()),
            value: Some("012.5".into()),
            currency: "usdt".into(),
            eid: Some("e-1".into()),
            occurred_at_ms: T - 60_000,
            time_supplied: true,
            received_at_ms: T,
            matched: false,
            source: 2,
            tg_id: None,
            attributed_by: 0,
            first_deposit: false,
            event_id: None,
        };
        #[rustfmt::skip]
        let bytes = [
            3, // version
            0b0001_0000, // flags: T; kind in the long form
            200, // kind
            128, 206, 217, 230, 206, 51, // received_at_ms
            255, 210, 14, // time: zigzag(-60000) << 1 | 1 = 239999
            9, b'c', b'l', b'i', b'c', b'k', b'-', b'4', b'2', // uid: tag 8 + 1
            6, b'0', b'1', b'2', b'.', b'5', // value: tag 5 + 1
            4, b'u', b's', b'd', b't', // currency: length 4
            4, b'e', b'-', b'1', // eid: tag 3 + 1
            2, // source: GET /e
        ];
        assert_eq!(decode::<EventRecord>(&bytes).unwrap(), record);
        assert_eq!(packed(&bytes), (false, false, false));
        let mut v2 = bytes.to_vec();
        v2[0] = 2;
        v2.pop();
        assert_eq!(
            decode::<EventRecord>(&v2).unwrap(),
            EventRecord {
                source: 0,
                ..record
            }
        );
    }

    /// Pins version 4 with the fields in their text forms, and an event that named a Telegram
    /// user: attributed by its `tg_id` to the click `uid` it resolved to, and one for which no
    /// bound click was found.
    #[test]
    fn text_form_event_v4_bytes_are_stable() {
        let record = EventRecord {
            kind: 200,
            uid: Some("click-42".into()),
            value: Some("012.5".into()),
            currency: "usdt".into(),
            eid: Some("e-1".into()),
            occurred_at_ms: T - 60_000,
            time_supplied: true,
            received_at_ms: T,
            matched: true,
            source: 1,
            tg_id: Some(crate::domain::click::MAX_TG_ID),
            attributed_by: 2,
            first_deposit: false,
            event_id: None,
        };
        #[rustfmt::skip]
        let bytes = [
            4, // version
            0b0001_1000, // flags: T, matched; kind in the long form
            200, // kind
            128, 206, 217, 230, 206, 51, // received_at_ms
            255, 210, 14, // time: zigzag(-60000) << 1 | 1 = 239999
            9, b'c', b'l', b'i', b'c', b'k', b'-', b'4', b'2', // uid: tag 8 + 1
            6, b'0', b'1', b'2', b'.', b'5', // value: tag 5 + 1
            4, b'u', b's', b'd', b't', // currency: length 4
            4, b'e', b'-', b'1', // eid: tag 3 + 1
            1, // source: POST /events
            0b0000_0110, // attribution: by tg_id (2), and a tg_id follows
            255, 255, 255, 255, 255, 255, 255, 15, // tg_id: 2^53 - 1
        ];
        assert_eq!(decode::<EventRecord>(&bytes).unwrap(), record);
        #[rustfmt::skip]
        let unmatched = [
            4, // version
            0b0000_0100, // flags: kind 4 (deposit)
            128, 206, 217, 230, 206, 51, // received_at_ms
            0, // uid: None
            0, // value: None
            3, b'U', b'S', b'D', // currency: length 3 (text, as a writer never stores it)
            0, // eid: None
            1, // source: POST /events
            0b0000_0100, // attribution: none, and a tg_id follows
            149, 154, 239, 58, // tg_id: 123456789
        ];
        let record = EventRecord {
            kind: 4,
            uid: None,
            value: None,
            currency: "USD".into(),
            eid: None,
            occurred_at_ms: T,
            time_supplied: false,
            received_at_ms: T,
            matched: false,
            source: 1,
            tg_id: Some(123_456_789),
            attributed_by: 0,
            first_deposit: false,
            event_id: None,
        };
        assert_eq!(decode::<EventRecord>(&unmatched).unwrap(), record);
        // What a writer stores for it: the currency packed.
        assert_eq!(encode(&record).len(), unmatched.len() - 2);
    }

    /// Version 4 refuses an attribution no writer stores.
    #[test]
    fn inconsistent_attribution_is_corrupt() {
        let with = |attribution: &[u8], matched: bool| {
            let mut bytes = typical_v4();
            if !matched {
                bytes[1] &= !super::event_v2::MATCHED;
            }
            bytes.pop();
            bytes.extend_from_slice(attribution);
            bytes
        };
        assert!(decode::<EventRecord>(&with(&[1], true)).is_ok());
        for (attribution, matched, says) in [
            (&[0][..], true, "disagrees"),
            (&[1], false, "disagrees"),
            (&[2], true, "disagrees"),
            (&[3], true, "disagrees"),
            (&[0b1000], true, "unknown bits"),
            (&[0b0100, 0], true, "tg_id is 0"),
            (&[0b0100], true, "ends inside tg_id"),
        ] {
            let what = corrupt_message(&with(attribution, matched));
            assert!(what.contains(says), "{attribution:?}: {what}");
        }
        let mut zero_source = typical_v4();
        let source_at = zero_source.len() - 2;
        zero_source[source_at] = 0;
        assert!(corrupt_message(&zero_source).contains("no source"));
    }
}
