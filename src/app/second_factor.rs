//! The admin page's second factor, as every way in uses it: turning it on (only with a
//! correct code of the new secret, answering the ten recovery codes once), turning it off, the
//! check of a login's code or recovery code (each accepted once), and the owner's setting that
//! requires it of everyone. The account page, the login's second step and `tracker user`
//! call these same methods; the rules are `domain::totp`, their bookkeeping the writer's.

use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::domain::totp::{self, SecondFactor};
use crate::error::{Code, Error};
use crate::storage::Snapshot;

/// How a login's second step was passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Passed {
    /// A code of the authenticator app.
    Code,
    /// A recovery code, with the number of them left.
    Recovery { left: usize },
}

/// Whether an owner requires everyone's second factor, as `tracker user require-totp` answers.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SecondFactorRule {
    pub required: bool,
}

fn wrong_code() -> Error {
    Error::field(
        Code::InvalidField,
        "code",
        "this code is not the one your authenticator app shows now; type the current one",
    )
}

impl App {
    /// Turns user `name`'s second factor on with `secret` once `code` is one of its codes now:
    /// answers the ten recovery codes, to be shown once (only their digests are kept).
    pub async fn turn_on_second_factor(
        &self,
        name: &str,
        secret: Vec<u8>,
        code: &str,
    ) -> Result<Vec<String>, Error> {
        let step = totp::matching_step(&secret, code, self.now_ms()).ok_or_else(wrong_code)?;
        let (codes, recovery) = totp::new_recovery_codes();
        let factor = SecondFactor {
            secret,
            last_step: step,
            recovery,
        };
        let name = name.to_owned();
        self.store
            .write(move |t| t.turn_on_second_factor(&name, factor))
            .await?;
        Ok(codes)
    }

    /// Turns user `name`'s second factor off.
    pub async fn turn_off_second_factor(&self, name: &str) -> Result<(), Error> {
        let name = name.to_owned();
        self.store
            .write(move |t| t.turn_off_second_factor(&name))
            .await?;
        Ok(())
    }

    /// Checks `typed`, a code of user `name`'s authenticator app or one of their recovery
    /// codes: each is accepted once. `None`: not accepted (wrong, used, or no second factor).
    pub async fn check_second_factor(
        &self,
        name: &str,
        typed: &str,
    ) -> Result<Option<Passed>, Error> {
        let Some(user) = self.user(name).await? else {
            return Ok(None);
        };
        let Some(factor) = user.second_factor else {
            return Ok(None);
        };
        let owned = name.to_owned();
        let taken = if totp::looks_like_code(typed) {
            let Some(step) = totp::matching_step(&factor.secret, typed, self.now_ms()) else {
                return Ok(None);
            };
            self.store
                .write(move |t| t.take_code_step(&owned, step))
                .await
                .map(|()| Passed::Code)
        } else {
            let digest = totp::recovery_digest(typed);
            self.store
                .write(move |t| t.use_recovery_code(&owned, &digest))
                .await
                .map(|left| Passed::Recovery { left })
        };
        match taken {
            Ok(passed) => Ok(Some(passed)),
            Err(e) if e.code == Code::InvalidField => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Requires every user's second factor, or leaves it to each user.
    pub async fn require_second_factor(&self, required: bool) -> Result<SecondFactorRule, Error> {
        self.store
            .write(move |t| t.require_second_factor(required))
            .await?;
        Ok(SecondFactorRule { required })
    }

    /// Whether an owner requires every user's second factor.
    pub async fn second_factor_required(&self) -> Result<bool, Error> {
        self.store.read(Snapshot::second_factor_required).await
    }
}
