//! The admin page's users in the data file (`USERS`). For the writer (methods of [`Txn`]):
//! adding, removing and changing a user, with the rule that a data file always keeps an owner
//! with the table's whole view; setting a password, directly or by an invitation's token. For
//! the readers (methods of [`Snapshot`]): one user, every user. The second factor: turned on
//! and off, a code's step taken once (later than the last one taken), a recovery code used
//! once; and the owner's setting that requires it of everyone (`ADMIN`).
//!
//! Only this file opens `USERS`, each time within one method, so the table is never open twice
//! in one transaction.

use redb::ReadableTable;

use crate::domain::totp::SecondFactor;
use crate::domain::user::{FIRST_OWNER, Invitation, Role, User};
use crate::error::{Code, Error};
use crate::storage::error::StoreError;
use crate::storage::ops::Txn;
use crate::storage::read::Snapshot;
use crate::storage::records::{self, UserRecord};
use crate::storage::schema::{ADMIN, ADMIN_REQUIRE_SECOND_FACTOR, SPACES, USERS};

fn refused(code: Code, field: &'static str, message: String) -> StoreError {
    StoreError::Refused(Error::field(code, field, message))
}

/// Every user of `table`, by name.
fn users_in(
    table: &impl ReadableTable<&'static str, &'static [u8]>,
) -> Result<Vec<User>, StoreError> {
    let mut users = Vec::new();
    for entry in table.iter()? {
        let (name, bytes) = entry?;
        users.push(records::decode::<UserRecord>(bytes.value())?.into_user(name.value())?);
    }
    Ok(users)
}

/// The user among `users` whose invitation's token has digest `digest` and is still good at
/// `now_ms`. (The digest of 128 random bits cannot be guessed byte by byte: a plain comparison.)
fn invited_among(users: Vec<User>, digest: &[u8; 32], now_ms: u64) -> Option<User> {
    users.into_iter().find(|u| {
        u.invitation
            .as_ref()
            .is_some_and(|i| i.digest == *digest && now_ms < i.expires_ms)
    })
}

fn no_such_user(name: &str) -> StoreError {
    refused(Code::NotFound, "name", format!("there is no user {name:?}"))
}

impl Txn<'_> {
    /// Every user, by name.
    fn all_users(&self) -> Result<Vec<User>, StoreError> {
        users_in(&self.transaction.open_table(USERS)?)
    }

    fn stored_user(&self, name: &str) -> Result<User, StoreError> {
        let table = self.transaction.open_table(USERS)?;
        let Some(bytes) = table.get(name)? else {
            return Err(no_such_user(name));
        };
        records::decode::<UserRecord>(bytes.value())?.into_user(name)
    }

    fn put_user(&mut self, user: &User) -> Result<(), StoreError> {
        self.transaction.open_table(USERS)?.insert(
            user.name.as_str(),
            records::encode(&UserRecord::of(user)).as_slice(),
        )?;
        Ok(())
    }

    /// Refuses to leave the file without an owner once `name` is no longer one.
    fn keep_an_owner(&self, name: &str) -> Result<(), StoreError> {
        let others = self
            .all_users()?
            .into_iter()
            .filter(|u| u.role == Role::Owner && u.name != name)
            .count();
        if others == 0 {
            return Err(refused(
                Code::Conflict,
                "name",
                format!(
                    "{name:?} is the last owner: a data file always keeps one; make another user \
                     an owner first"
                ),
            ));
        }
        Ok(())
    }

    /// Refuses a space the file does not have.
    fn check_spaces(&self, spaces: &[String]) -> Result<(), StoreError> {
        let table = self.transaction.open_table(SPACES)?;
        for space in spaces {
            if table.get(space.as_str())?.is_none() {
                return Err(refused(
                    Code::InvalidField,
                    "spaces",
                    format!("there is no space {space:?}"),
                ));
            }
        }
        Ok(())
    }

    /// Adds `user`, whose name must be new and whose spaces must exist.
    pub fn add_user(&mut self, user: &User) -> Result<(), StoreError> {
        if self.stored_user(&user.name).is_ok() {
            return Err(refused(
                Code::Conflict,
                "name",
                format!("user {:?} already exists; choose another name", user.name),
            ));
        }
        self.check_spaces(&user.spaces)?;
        self.put_user(user)
    }

    /// Removes user `name`, unless it is the last owner.
    pub fn remove_user(&mut self, name: &str) -> Result<User, StoreError> {
        let user = self.stored_user(name)?;
        if user.role == Role::Owner {
            self.keep_an_owner(name)?;
        }
        self.transaction.open_table(USERS)?.remove(name)?;
        Ok(user)
    }

    /// Gives user `name` role `role` and spaces `spaces`, unless that demotes the last owner.
    pub fn set_role(
        &mut self,
        name: &str,
        role: Role,
        spaces: Vec<String>,
    ) -> Result<User, StoreError> {
        let mut user = self.stored_user(name)?;
        if user.role == Role::Owner && role != Role::Owner {
            self.keep_an_owner(name)?;
        }
        self.check_spaces(&spaces)?;
        user.role = role;
        user.spaces = if role == Role::Owner {
            Vec::new()
        } else {
            spaces
        };
        self.put_user(&user)?;
        Ok(user)
    }

    /// Replaces user `name`'s password with a new invitation, and clears their second factor:
    /// their sessions end, and they set a new password at the invitation's address.
    pub fn reset_user(&mut self, name: &str, invitation: Invitation) -> Result<User, StoreError> {
        let mut user = self.stored_user(name)?;
        user.password_hash = None;
        user.invitation = Some(invitation);
        user.second_factor = None;
        self.put_user(&user)?;
        Ok(user)
    }

    /// Sets the password of the user whose invitation's token has digest `digest`, if it is
    /// still good at `now_ms`; the invitation is used up.
    pub fn accept_invitation(
        &mut self,
        digest: &[u8; 32],
        hash: &str,
        now_ms: u64,
    ) -> Result<User, StoreError> {
        let Some(mut user) = invited_among(self.all_users()?, digest, now_ms) else {
            return Err(refused(
                Code::NotFound,
                "token",
                "this invitation is unknown, used or more than 24 hours old; ask an owner for a \
                 new one"
                    .to_owned(),
            ));
        };
        user.password_hash = Some(hash.to_owned());
        user.invitation = None;
        self.put_user(&user)?;
        Ok(user)
    }

    /// Sets the first owner's password (`tracker admin password`): user `admin`, made an owner
    /// if it is not there.
    pub fn set_admin_password(&mut self, hash: &str) -> Result<(), StoreError> {
        let mut user = self.stored_user(FIRST_OWNER).unwrap_or_else(|_| User {
            name: FIRST_OWNER.to_owned(),
            role: Role::Owner,
            spaces: Vec::new(),
            password_hash: None,
            invitation: None,
            second_factor: None,
        });
        user.password_hash = Some(hash.to_owned());
        user.invitation = None;
        self.put_user(&user)
    }
}

/// Why a second factor's code or recovery code was not taken.
fn code_refused(message: &str) -> StoreError {
    refused(Code::InvalidField, "code", message.to_owned())
}

impl Txn<'_> {
    /// Turns user `name`'s second factor on with `factor`, unless it is on already.
    pub fn turn_on_second_factor(
        &mut self,
        name: &str,
        factor: SecondFactor,
    ) -> Result<User, StoreError> {
        let mut user = self.stored_user(name)?;
        if user.second_factor.is_some() {
            return Err(refused(
                Code::Conflict,
                "code",
                format!("the second factor of {name:?} is on already; turn it off first"),
            ));
        }
        user.second_factor = Some(factor);
        self.put_user(&user)?;
        Ok(user)
    }

    /// Turns user `name`'s second factor off (its secret and recovery codes are forgotten).
    pub fn turn_off_second_factor(&mut self, name: &str) -> Result<User, StoreError> {
        let mut user = self.stored_user(name)?;
        user.second_factor = None;
        self.put_user(&user)?;
        Ok(user)
    }

    /// Takes step `step` of user `name`'s second factor: only a step later than the last one
    /// taken, so that a code is never accepted twice.
    pub fn take_code_step(&mut self, name: &str, step: u64) -> Result<(), StoreError> {
        let mut user = self.stored_user(name)?;
        let Some(factor) = user.second_factor.as_mut() else {
            return Err(code_refused("the second factor is off"));
        };
        if step <= factor.last_step {
            return Err(code_refused(
                "this code has been used already; wait for the next one",
            ));
        }
        factor.last_step = step;
        self.put_user(&user)
    }

    /// Uses up user `name`'s recovery code of digest `digest`: answers how many are left.
    pub fn use_recovery_code(
        &mut self,
        name: &str,
        digest: &[u8; 32],
    ) -> Result<usize, StoreError> {
        let mut user = self.stored_user(name)?;
        let Some(factor) = user.second_factor.as_mut() else {
            return Err(code_refused("the second factor is off"));
        };
        let Some(at) = factor.recovery.iter().position(|d| d == digest) else {
            return Err(code_refused(
                "this is no recovery code of yours, or it was used",
            ));
        };
        factor.recovery.remove(at);
        let left = factor.recovery.len();
        self.put_user(&user)?;
        Ok(left)
    }

    /// Requires every user's second factor (`true`) or leaves it to each user (`false`).
    pub fn require_second_factor(&mut self, required: bool) -> Result<(), StoreError> {
        self.transaction
            .open_table(ADMIN)?
            .insert(ADMIN_REQUIRE_SECOND_FACTOR, [u8::from(required)].as_slice())?;
        Ok(())
    }
}

impl Snapshot {
    /// Whether an owner requires every user's second factor.
    pub fn second_factor_required(&self) -> Result<bool, StoreError> {
        let table = self.txn().open_table(ADMIN)?;
        Ok(table
            .get(ADMIN_REQUIRE_SECOND_FACTOR)?
            .is_some_and(|v| v.value() == [1]))
    }

    /// User `name`, if there is one.
    pub fn user(&self, name: &str) -> Result<Option<User>, StoreError> {
        let table = self.txn().open_table(USERS)?;
        let Some(bytes) = table.get(name)? else {
            return Ok(None);
        };
        records::decode::<UserRecord>(bytes.value())?
            .into_user(name)
            .map(Some)
    }

    /// The user whose invitation's token has digest `digest`, while it is good at `now_ms`.
    pub fn invited(&self, digest: &[u8; 32], now_ms: u64) -> Result<Option<User>, StoreError> {
        Ok(invited_among(self.users()?, digest, now_ms))
    }

    /// Every user, by name.
    pub fn users(&self) -> Result<Vec<User>, StoreError> {
        users_in(&self.txn().open_table(USERS)?)
    }
}
