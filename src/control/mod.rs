//! The control socket: how the command line reaches a running server.
//!
//! Every command that changes or reads a data file (`tracker space …` (settings too), `keys …`, `link …`,
//! `admin password`, `user …`, `backup`, `check`, `export`) is one [`Request`], answered with one
//! [`Answer`]. [`execute`] runs a request against an [`App`]: the server runs it for a request
//! that came through its socket (`socket.rs`), and the command line runs it on a data file it
//! opened itself when no server has the file open. Either way it is the same call to the same
//! `App` method, so a rotation made either way is the same rotation.

mod answer;
mod audit;
mod request;
mod socket;
mod user;

pub use answer::{
    Answer, CostsFetched, CostsImported, DestinationDeleted, ImportedEvent, LinkDeleted,
    PasswordSet, SpaceSettingsSet, StatsShown,
};
pub use audit::execute;
pub use request::{
    AdminRequest, CostsRequest, DestinationRequest, EventTexts, FileText, KeysRequest, LinkRequest,
    Request, SpaceRequest, UserRequest,
};
pub use socket::{ControlSocket, Reached, listen, peer_allowed, reachable, send, socket_path};
