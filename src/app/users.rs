//! The admin page's users: add one with an invitation, list, remove, change a role, reset a
//! password, take up an invitation, and check a login. The command line (through the control
//! socket or on the file) and the admin page's Users and invitation pages call these same
//! methods; passwords are hashed here and only their hashes and invitations' digests reach
//! storage.

use serde::{Deserialize, Serialize};

use crate::app::App;
use crate::domain::password;
use crate::domain::user::{self, Role, User};
use crate::error::{Code, Error};
use crate::storage::Snapshot;

/// An invitation's address, shown once: where the user sets their own password. `Debug`
/// leaves the address out, so a log line of the answer does not carry its token.
#[derive(Serialize, Deserialize, Clone)]
pub struct Invited {
    pub name: String,
    pub role: Role,
    pub spaces: Vec<String>,
    /// `<public_url>/admin/invite/<token>`.
    pub address: String,
    pub expires_ms: u64,
}

impl std::fmt::Debug for Invited {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Invited")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("spaces", &self.spaces)
            .field("address", &"[redacted]")
            .finish_non_exhaustive()
    }
}

/// A user as the list shows them: never a hash or a digest.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct UserSummary {
    pub name: String,
    pub role: Role,
    pub spaces: Vec<String>,
    /// Whether a password is set (else an invitation waits to be taken up).
    pub password_set: bool,
    /// Whether their second factor is on (absent in an answer of a server from before it).
    #[serde(default)]
    pub second_factor: bool,
}

impl From<&User> for UserSummary {
    fn from(user: &User) -> UserSummary {
        UserSummary {
            name: user.name.clone(),
            role: user.role,
            spaces: user.spaces.clone(),
            password_set: user.password_hash.is_some(),
            second_factor: user.second_factor.is_some(),
        }
    }
}

/// The path of an invitation's page, below `/admin`.
pub const INVITATION_PATH: &str = "/admin/invite/";

impl App {
    fn invited(&self, user: &User, token: &str) -> Invited {
        Invited {
            name: user.name.clone(),
            role: user.role,
            spaces: user.spaces.clone(),
            address: format!(
                "{}{INVITATION_PATH}{token}",
                self.settings.public_url().trim_end_matches('/')
            ),
            expires_ms: user.invitation.as_ref().map_or(0, |i| i.expires_ms),
        }
    }

    /// Adds user `name` with `role` (and, but for an owner, `spaces`), and answers the
    /// invitation where they set their password.
    pub async fn add_user(
        &self,
        name: &str,
        role: Role,
        spaces: Vec<String>,
    ) -> Result<Invited, Error> {
        user::check_name(name)?;
        let (token, invitation) = user::new_invitation(self.now_ms());
        let new = User {
            name: name.to_owned(),
            role,
            spaces: if role == Role::Owner {
                Vec::new()
            } else {
                spaces
            },
            password_hash: None,
            invitation: Some(invitation),
            second_factor: None,
        };
        let stored = new.clone();
        self.store.write(move |t| t.add_user(&stored)).await?;
        Ok(self.invited(&new, &token))
    }

    /// Every user.
    pub async fn users(&self) -> Result<Vec<UserSummary>, Error> {
        let users = self.store.read(Snapshot::users).await?;
        Ok(users.iter().map(UserSummary::from).collect())
    }

    /// User `name` as stored, if there is one.
    pub async fn user(&self, name: &str) -> Result<Option<User>, Error> {
        let name = name.to_owned();
        self.store.read(move |s| s.user(&name)).await
    }

    /// Removes user `name` (never the last owner); their sessions end at their next request.
    pub async fn remove_user(&self, name: &str) -> Result<UserSummary, Error> {
        let name = name.to_owned();
        let removed = self.store.write(move |t| t.remove_user(&name)).await?;
        Ok(UserSummary::from(&removed))
    }

    /// Gives user `name` a new role and spaces (never demoting the last owner); their sessions
    /// end at their next request.
    pub async fn set_role(
        &self,
        name: &str,
        role: Role,
        spaces: Vec<String>,
    ) -> Result<UserSummary, Error> {
        let name = name.to_owned();
        let changed = self
            .store
            .write(move |t| t.set_role(&name, role, spaces))
            .await?;
        Ok(UserSummary::from(&changed))
    }

    /// Ends user `name`'s password and answers a new invitation to set another.
    pub async fn reset_user(&self, name: &str) -> Result<Invited, Error> {
        let (token, invitation) = user::new_invitation(self.now_ms());
        let name = name.to_owned();
        let user = self
            .store
            .write(move |t| t.reset_user(&name, invitation))
            .await?;
        Ok(self.invited(&user, &token))
    }

    /// The user invited with `token`, while the invitation is good.
    pub async fn invitation(&self, token: &str) -> Result<Option<User>, Error> {
        let digest = user::invitation_digest(token);
        let now = self.now_ms();
        self.store.read(move |s| s.invited(&digest, now)).await
    }

    /// Sets the password of the user invited with `token`: the rule is checked and the hash
    /// made here. Answers the user's name.
    pub async fn accept_invitation(
        &self,
        token: &str,
        new_password: String,
    ) -> Result<String, Error> {
        let hash = hash_password(new_password).await?;
        let digest = user::invitation_digest(token);
        let now = self.now_ms();
        let user = self
            .store
            .write(move |t| t.accept_invitation(&digest, &hash, now))
            .await?;
        Ok(user.name)
    }

    /// The user `name` if `password` is theirs (never while they have none). Costs tens of
    /// milliseconds of one core: callers throttle first (`web::session::LoginThrottle`).
    pub async fn check_login(&self, name: &str, password: String) -> Result<Option<User>, Error> {
        let Some(found) = self.user(name).await? else {
            return Ok(None);
        };
        let Some(stored) = found.password_hash.clone() else {
            return Ok(None);
        };
        let matches = tokio::task::spawn_blocking(move || password::verify(&password, &stored))
            .await
            .map_err(|e| {
                Error::new(Code::Internal, format!("checking the password failed: {e}"))
            })?;
        Ok(matches.then_some(found))
    }
}

/// The argon2id hash of a new password that meets the rule, made off the async threads.
pub(crate) async fn hash_password(new_password: String) -> Result<String, Error> {
    tokio::task::spawn_blocking(move || password::hash(&new_password))
        .await
        .map_err(|e| Error::new(Code::Internal, format!("hashing the password failed: {e}")))?
}
