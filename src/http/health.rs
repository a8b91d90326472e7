//! `GET /healthz`: whether the data file takes writes, for a supervisor or a load balancer.

use warp::reply::Response;

use crate::error::{Code, Error};
use crate::storage::Health;
use crate::surface::Call;
use crate::surface::respond::{self, Auth};

/// `GET /healthz`: `200` while the data file takes writes; `503` while writes fail (a full
/// disk; it turns back by itself), or once storage has failed for good and the process is
/// stopping (a supervisor restarts it).
pub async fn healthz(call: Call) -> Response {
    match call.app.store.health() {
        Health::Serving => respond::ok(),
        Health::Unwritable(_) => respond::error(
            &Error::new(
                Code::Unavailable,
                "storage unwritable: writing the data file fails (a full disk?); requests are \
                 answered 503 until it works again, and the reason is in the server log",
            ),
            Auth::None,
        ),
        Health::Failed(_) => respond::error(
            &Error::new(
                Code::Unavailable,
                "the data file failed and the tracker is stopping; the reason is in the server log",
            ),
            Auth::None,
        ),
    }
}
