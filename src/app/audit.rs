//! The audit log: an entry written for each change and each login by whichever way in made it
//! (the admin page's router, the API's dispatch, the control socket's one dispatch, the login),
//! read back for `tracker audit` and the Audit page, and trimmed after a year by retention.

use std::net::IpAddr;

use crate::app::App;
use crate::domain::audit::{AuditEntry, AuditFilter, SHOWN_AT_MOST};
use crate::error::Error;

/// What a way in says of a change it made.
pub struct Change<'a> {
    pub who: &'a str,
    pub address: Option<IpAddr>,
    pub action: String,
    pub space: Option<&'a str>,
    pub subject: Option<&'a str>,
}

impl App {
    /// Writes an entry for `change`, made now. Called once the change has committed; if the
    /// entry cannot be written the change stands, and the failure is logged.
    pub async fn record_audit(&self, change: Change<'_>) {
        let entry = AuditEntry {
            at_ms: self.now_ms(),
            who: crate::domain::audit::kept_name(change.who),
            address: change.address.map(|a| a.to_string()),
            action: change.action,
            space: change.space.map(str::to_owned),
            subject: change.subject.map(crate::domain::audit::kept_name),
        };
        if let Err(e) = self.store.write(move |t| t.record_audit(entry)).await {
            tracing::warn!(error = %e.message, "writing an audit log entry failed");
        }
    }

    /// The newest entries `filter` admits, newest first.
    pub async fn audit(&self, filter: AuditFilter) -> Result<Vec<AuditEntry>, Error> {
        self.store
            .read(move |s| s.audit(&filter, SHOWN_AT_MOST))
            .await
    }
}
