//! The audit log in the data file (`AUDIT`): an entry written (a method of [`Txn`]), the entries
//! older than a time deleted a step at a time (retention), and the newest entries a filter
//! admits read (a method of [`Snapshot`]).

use redb::{ReadableTable, ReadableTableMetadata as _};

use crate::domain::audit::{AuditEntry, AuditFilter};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::records::{self, AuditRecord};
use crate::storage::schema::{AUDIT, META_AUDIT_SEQ};

impl Txn<'_> {
    /// Appends `entry` to the audit log.
    pub fn record_audit(&mut self, entry: AuditEntry) -> Result<(), StoreError> {
        let seq = self.meta.get(META_AUDIT_SEQ)?.map_or(0, |v| v.value()) + 1;
        self.meta.insert(META_AUDIT_SEQ, seq)?;
        self.transaction
            .open_table(AUDIT)?
            .insert(seq, records::encode(&AuditRecord(entry)).as_slice())?;
        Ok(())
    }

    /// Deletes up to `at_most` of the oldest entries written before `before_ms`; answers how
    /// many. Entries are numbered in the order they were written, so the old ones come first.
    pub fn prune_audit(&mut self, before_ms: u64, at_most: usize) -> Result<u64, StoreError> {
        let mut table = self.transaction.open_table(AUDIT)?;
        let mut old = Vec::new();
        for entry in table.iter()?.take(at_most) {
            let (seq, bytes) = entry?;
            if records::decode::<AuditRecord>(bytes.value())?.0.at_ms >= before_ms {
                break;
            }
            old.push(seq.value());
        }
        for seq in &old {
            table.remove(seq)?;
        }
        Ok(old.len() as u64)
    }
}

impl Snapshot {
    /// The newest entries `filter` admits, newest first, `at_most` of them.
    pub fn audit(
        &self,
        filter: &AuditFilter,
        at_most: usize,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let table = self.txn().open_table(AUDIT)?;
        let mut shown = Vec::new();
        if table.is_empty()? {
            return Ok(shown);
        }
        for entry in table.iter()?.rev() {
            let entry = records::decode::<AuditRecord>(entry?.1.value())?.0;
            if filter.admits(&entry) {
                shown.push(entry);
                if shown.len() == at_most {
                    break;
                }
            }
        }
        Ok(shown)
    }
}
