//! Alerts (`docs/api.md#alerts`): what changed state, handed over by the workers that notice
//! it, once per change and never per check.

use tokio::sync::mpsc;

/// A change of state worth telling a person about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Alert {
    /// A bot or channel failed its health checks twice in a row: its visits go elsewhere.
    TargetDown {
        space: u32,
        target: String,
        why: String,
    },
    /// A target held down passed a check again.
    TargetBack { space: u32, target: String },
}

/// Where the workers hand their alerts; cheap to clone.
#[derive(Clone, Debug)]
pub struct AlertSender(mpsc::UnboundedSender<Alert>);

impl AlertSender {
    /// A sender and the queue it fills.
    #[must_use]
    pub fn new() -> (AlertSender, mpsc::UnboundedReceiver<Alert>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (AlertSender(tx), rx)
    }

    /// Hands `alert` over; dropped when nothing reads the queue (no alert worker runs).
    pub fn send(&self, alert: Alert) {
        let _ = self.0.send(alert);
    }
}
