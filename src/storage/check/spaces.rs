//! The checks of the spaces and what hangs on them: space numbers and `space_seq`, the
//! credentials, each space's settings, and the links with their per-space list
//! (`links` ↔ `links_by_space`).

use std::collections::BTreeSet;

use redb::{ReadTransaction, ReadableTable};

use super::findings::Checker;
use super::fixes::Fix;
use crate::domain::credential::Kind;
use crate::storage::attribution;
use crate::storage::error::StoreError;
use crate::storage::records::{self, CredentialRecord, LinkRecord, SpaceRecord};
use crate::storage::schema::{
    CREDENTIALS, LINKS, LINKS_BY_SPACE, META_SPACE_SEQ, SPACE_SETTINGS, SPACES,
};

pub(super) fn check_spaces(
    txn: &ReadTransaction,
    c: &mut Checker,
    space_seq: u64,
) -> Result<BTreeSet<u32>, StoreError> {
    let mut nos = BTreeSet::new();
    for entry in txn.open_table(SPACES)?.iter()? {
        let (name, bytes) = entry?;
        match records::decode::<SpaceRecord>(bytes.value()) {
            Ok(r) => {
                if !nos.insert(r.no) {
                    c.damaged(
                        "spaces",
                        name.value(),
                        format!("space number {} is used twice", r.no),
                    );
                }
            }
            Err(e) => c.damaged("spaces", name.value(), e.to_string()),
        }
    }
    if let Some(&max) = nos.last()
        && u64::from(max) > space_seq
    {
        c.derivable(
            "meta",
            META_SPACE_SEQ,
            format!("space_seq is {space_seq} but space number {max} exists"),
            Fix::SetMeta(META_SPACE_SEQ, u64::from(max)),
        );
    }
    Ok(nos)
}

pub(super) fn check_credentials(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    for entry in txn.open_table(CREDENTIALS)?.iter()? {
        let (digest, bytes) = entry?;
        let key = hex::encode(digest.value());
        match records::decode::<CredentialRecord>(bytes.value()) {
            Ok(r) => {
                if !spaces.contains(&r.space_no) {
                    c.damaged(
                        "credentials",
                        &key,
                        format!(
                            "credential {} belongs to space number {}, which does not exist",
                            r.public_prefix, r.space_no
                        ),
                    );
                }
                if Kind::from_u8(r.kind).is_none() {
                    c.damaged(
                        "credentials",
                        &key,
                        format!("unknown credential kind {}", r.kind),
                    );
                }
            }
            Err(e) => c.damaged("credentials", &key, e.to_string()),
        }
    }
    Ok(())
}

/// Every space's settings decode, and belong to a space.
pub(super) fn check_settings(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    let table = txn.open_table(SPACE_SETTINGS)?;
    for entry in table.iter()? {
        let (key, _) = entry?;
        let space = key.value();
        let at = format!("space {space}");
        if !spaces.contains(&space) {
            c.damaged(
                "space_settings",
                &at,
                "settings of a space that does not exist",
            );
        }
        if let Err(e) = attribution::settings(&table, space) {
            c.damaged("space_settings", &at, e.to_string());
        }
    }
    Ok(())
}

pub(super) fn check_links(
    txn: &ReadTransaction,
    c: &mut Checker,
    spaces: &BTreeSet<u32>,
) -> Result<(), StoreError> {
    let links = txn.open_table(LINKS)?;
    let by_space = txn.open_table(LINKS_BY_SPACE)?;
    for entry in links.iter()? {
        let (slug, bytes) = entry?;
        let slug = slug.value();
        match records::decode::<LinkRecord>(bytes.value()) {
            Ok(r) => {
                if !spaces.contains(&r.space_no) {
                    c.damaged(
                        "links",
                        slug,
                        format!("link of space number {}, which does not exist", r.space_no),
                    );
                }
                if by_space.get((r.space_no, slug))?.is_none() {
                    c.derivable(
                        "links_by_space",
                        format!("space {}, slug {slug}", r.space_no),
                        format!("link {slug} is missing from its space's list"),
                        Fix::InsertLinkBySpace((r.space_no, slug.to_owned())),
                    );
                }
            }
            Err(e) => c.damaged("links", slug, e.to_string()),
        }
    }
    for entry in by_space.iter()? {
        let (key, _) = entry?;
        let (space, slug) = key.value();
        let owner = match links.get(slug)? {
            None => None,
            Some(bytes) => match records::decode::<LinkRecord>(bytes.value()) {
                Ok(r) => Some(r.space_no),
                // Reported with the links.
                Err(_) => continue,
            },
        };
        if owner != Some(space) {
            c.derivable(
                "links_by_space",
                format!("space {space}, slug {slug}"),
                "lists a link that does not exist in this space",
                Fix::RemoveLinkBySpace((space, slug.to_owned())),
            );
        }
    }
    Ok(())
}
