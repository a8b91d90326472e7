//! Who a request acts for: a credential presented and checked against the keyring, the
//! space's rate limit and the per-address one, the client's address behind a trusted proxy,
//! and the rejection log a refused request is written to.

use std::net::IpAddr;
use std::sync::atomic::Ordering;

use crate::app::App;
use crate::domain::client;
use crate::domain::keyring::{self, SpaceRef};
use crate::domain::rejection::Rejection;
use crate::error::{Code, Error};

/// A credential as a request presents it.
#[derive(Clone, Copy, Debug)]
pub enum Presented<'a> {
    /// The `Authorization` header's value, if any.
    Bearer(Option<&'a str>),
    /// The `token=` query parameter, if any.
    IngestToken(Option<&'a str>),
}

impl App {
    /// The space a credential acts for, counted against that space's rate limit. Checked
    /// before anything else about a request.
    pub fn authenticate(&self, presented: Presented<'_>) -> Result<SpaceRef, Error> {
        let now = self.now_ms();
        let keyring = self.store.keyring();
        let space = match presented {
            Presented::Bearer(header) => keyring.bearer(header, now)?,
            Presented::IngestToken(token) => keyring.ingest_token(token, now)?,
        };
        self.limiter.check(space.no, &space.name, now)?;
        Ok(space)
    }

    /// The address a request comes from: the peer, or what a trusted proxy says it is. The
    /// first `X-Forwarded-For` from a peer that is not a trusted proxy is warned about, once:
    /// behind a proxy left out of `trusted_proxies`, every visitor would share its address.
    #[must_use]
    pub fn client_ip(&self, peer: IpAddr, forwarded_for: Option<&str>) -> IpAddr {
        let trusted = &self.settings.trusted_proxies;
        if forwarded_for.is_some()
            && !self.warned_untrusted_forwarded.load(Ordering::Relaxed)
            && !trusted.iter().any(|c| c.contains(peer))
            && !self
                .warned_untrusted_forwarded
                .swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                %peer,
                "a request carried X-Forwarded-For from a peer that is not in trusted_proxies: \
                 the header is ignored (said once). Behind a reverse proxy, set trusted_proxies \
                 to its address, or every visitor counts as the proxy for the per-address limits"
            );
        }
        client::client_ip(peer, forwarded_for, trusted)
    }

    /// Counts one request of a public path (no credential) from `client` against
    /// `address_rate_limit`.
    pub fn admit_address(&self, client: IpAddr) -> Result<(), Error> {
        self.address_limiter
            .take(client::address_key(client), self.now_ms())
            .map_err(|wait_s| {
                Error::new(
                    Code::RateLimited,
                    format!("too many requests from your address; retry in {wait_s} s"),
                )
                .retry_after(wait_s)
            })
    }

    /// The space of a credential that [`App::authenticate`] refused, if the tracker issued it
    /// (expired, revoked, of the wrong kind): its refusals belong in that space's rejection log.
    #[must_use]
    pub fn issuer_space(&self, presented: Presented<'_>) -> Option<SpaceRef> {
        let text = match presented {
            Presented::Bearer(header) => header.and_then(keyring::bearer_credential)?,
            Presented::IngestToken(token) => token?,
        };
        self.store.keyring().issuer_space(text)
    }

    /// Adds a refused request to `space`'s rejection log (best effort: never delays anything).
    pub fn record_rejection(&self, space: &SpaceRef, rejection: Rejection) {
        self.store.record_rejection(space.no, rejection);
    }

    /// The space named `name`, as a credential would have given it: how the command line and
    /// the admin page, which act for a space by name, reach the same operations.
    pub async fn space_named(&self, name: String) -> Result<SpaceRef, Error> {
        let wanted = name.clone();
        let no = self.store.read(move |s| s.space_no(&wanted)).await?;
        Ok(SpaceRef {
            no,
            name: name.into(),
        })
    }
}
