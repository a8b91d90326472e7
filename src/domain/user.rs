//! The admin page's users and what each may do: a name, a role (`owner`, `manager`, `viewer`),
//! the spaces a manager or viewer is given, a password hash, and an invitation that lets the
//! user set their own password. The one rule of who may reach a page ([`User::may`]) lives
//! here, so the admin page's router and its tests ask the same question.

use serde::{Deserialize, Serialize};

use crate::error::{Code, Error};

/// How long an invitation (or a reset) may be used to set a password.
pub const INVITATION_MS: u64 = 24 * 60 * 60 * 1000;

/// The name of the first owner, which `tracker admin password` sets.
pub const FIRST_OWNER: &str = "admin";

/// What a user may do. Ordered: each role may do what the ones after it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything: users, keys, destinations, settings, the audit log, every space.
    Owner,
    /// In the spaces given: links, costs, destinations, stats; keys shown, never changed.
    Manager,
    /// In the spaces given: dashboards, stats, events and costs, read only.
    Viewer,
}

impl Role {
    /// The role named `text` (`owner`, `manager`, `viewer`).
    pub fn parse(text: &str) -> Result<Role, Error> {
        match text {
            "owner" => Ok(Role::Owner),
            "manager" => Ok(Role::Manager),
            "viewer" => Ok(Role::Viewer),
            _ => Err(Error::field(
                Code::InvalidField,
                "role",
                format!("a role is owner, manager or viewer; got {text:?}"),
            )),
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Manager => "manager",
            Role::Viewer => "viewer",
        }
    }

    /// The byte it is stored as.
    #[must_use]
    pub fn stored(self) -> u8 {
        match self {
            Role::Owner => 1,
            Role::Manager => 2,
            Role::Viewer => 3,
        }
    }

    /// The role stored as `byte`, if any.
    #[must_use]
    pub fn from_stored(byte: u8) -> Option<Role> {
        match byte {
            1 => Some(Role::Owner),
            2 => Some(Role::Manager),
            3 => Some(Role::Viewer),
            _ => None,
        }
    }
}

/// The least role a page asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Any logged-in user (the spaces list, which shows each user their own spaces; logout).
    Anyone,
    /// A viewer of the page's space, or more.
    View,
    /// A manager of the page's space, or an owner.
    Manage,
    /// An owner only.
    Own,
}

/// An invitation to set a password: the SHA-256 of its token (the token itself is shown once
/// and never stored) and when it stops working.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invitation {
    pub digest: [u8; 32],
    pub expires_ms: u64,
}

/// A user of the admin page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    pub name: String,
    pub role: Role,
    /// The spaces a manager or viewer is given (an owner has every space).
    pub spaces: Vec<String>,
    /// The argon2id PHC string of the password; none until an invitation is taken up.
    pub password_hash: Option<String>,
    pub invitation: Option<Invitation>,
    /// The second factor, once the user has turned it on (`domain::totp`).
    pub second_factor: Option<crate::domain::totp::SecondFactor>,
}

impl User {
    /// Whether this user may reach a page that asks for `access`, of space `space` if the page
    /// belongs to one.
    #[must_use]
    pub fn may(&self, access: Access, space: Option<&str>) -> bool {
        let least = match access {
            Access::Anyone => return true,
            Access::View => Role::Viewer,
            Access::Manage => Role::Manager,
            Access::Own => Role::Owner,
        };
        self.role <= least && space.is_none_or(|s| self.sees_space(s))
    }

    /// Whether space `space` is one of this user's.
    #[must_use]
    pub fn sees_space(&self, space: &str) -> bool {
        self.role == Role::Owner || self.spaces.iter().any(|s| s == space)
    }

    /// A digest of what a session depends on (role, spaces, password): a session logged in
    /// under another one has ended.
    #[must_use]
    pub fn session_tag(&self) -> u128 {
        use sha2::{Digest as _, Sha256};
        let mut hash = Sha256::new_with_prefix(self.name.as_bytes());
        hash.update([0, self.role.stored()]);
        for space in &self.spaces {
            hash.update([0]);
            hash.update(space.as_bytes());
        }
        hash.update([1]);
        hash.update(self.password_hash.as_deref().unwrap_or("").as_bytes());
        crate::domain::digest::first_128_bits(hash)
    }
}

/// The rule of a user's name: 1 to 32 of a-z, 0-9 and '-', not starting with '-' (as a space's).
pub fn check_name(name: &str) -> Result<(), Error> {
    if crate::domain::input::is_lowercase_name(name) {
        Ok(())
    } else {
        Err(Error::field(
            Code::InvalidField,
            "name",
            format!(
                "a user name is 1 to 32 of a-z, 0-9 and '-', not starting with '-'; got {name:?}"
            ),
        ))
    }
}

/// The spaces of `--spaces a,b` (or a form's field): names, without blanks or repeats.
#[must_use]
pub fn parse_spaces(text: &str) -> Vec<String> {
    let mut spaces: Vec<String> = Vec::new();
    for space in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if !spaces.iter().any(|s| s == space) {
            spaces.push(space.to_owned());
        }
    }
    spaces
}

/// A new invitation token (128 random bits, hex) and its stored [`Invitation`].
///
/// # Panics
/// If the operating system has no random numbers to give.
#[must_use]
pub fn new_invitation(now_ms: u64) -> (String, Invitation) {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the OS random number generator failed");
    let token = hex::encode(bytes);
    let invitation = Invitation {
        digest: invitation_digest(&token),
        expires_ms: now_ms + INVITATION_MS,
    };
    (token, invitation)
}

/// The SHA-256 of an invitation token, as it is stored and looked up.
#[must_use]
pub fn invitation_digest(token: &str) -> [u8; 32] {
    use sha2::{Digest as _, Sha256};
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(role: Role, spaces: &[&str]) -> User {
        User {
            name: "anna".into(),
            role,
            spaces: spaces.iter().map(|s| (*s).to_owned()).collect(),
            password_hash: Some("$argon2id$x".into()),
            invitation: None,
            second_factor: None,
        }
    }

    #[test]
    fn each_role_reaches_its_own_pages_in_its_own_spaces() {
        let owner = user(Role::Owner, &[]);
        let manager = user(Role::Manager, &["a"]);
        let viewer = user(Role::Viewer, &["a"]);
        for access in [Access::Anyone, Access::View, Access::Manage, Access::Own] {
            assert!(owner.may(access, Some("z")), "{access:?}");
        }
        assert!(manager.may(Access::Manage, Some("a")));
        assert!(!manager.may(Access::Manage, Some("b")));
        assert!(!manager.may(Access::Own, Some("a")));
        assert!(!manager.may(Access::Own, None));
        assert!(viewer.may(Access::View, Some("a")));
        assert!(!viewer.may(Access::View, Some("b")));
        assert!(!viewer.may(Access::Manage, Some("a")));
        assert!(viewer.may(Access::Anyone, None));
    }

    #[test]
    fn a_change_of_role_spaces_or_password_changes_the_session_tag() {
        let base = user(Role::Manager, &["a"]);
        let tag = base.session_tag();
        assert_eq!(tag, base.clone().session_tag());
        let mut other = base.clone();
        other.role = Role::Viewer;
        assert_ne!(other.session_tag(), tag);
        let mut other = base.clone();
        other.spaces.push("b".into());
        assert_ne!(other.session_tag(), tag);
        let mut other = base.clone();
        other.password_hash = Some("$argon2id$y".into());
        assert_ne!(other.session_tag(), tag);
    }

    #[test]
    fn roles_and_names_are_read_as_documented() {
        for role in [Role::Owner, Role::Manager, Role::Viewer] {
            assert_eq!(Role::parse(role.as_str()).unwrap(), role);
            assert_eq!(Role::from_stored(role.stored()), Some(role));
        }
        assert!(Role::parse("admin").is_err());
        assert!(Role::parse("Owner").is_err());
        assert_eq!(Role::from_stored(0), None);
        check_name("a").unwrap();
        check_name(&"a".repeat(32)).unwrap();
        assert!(check_name(&"a".repeat(33)).is_err());
        assert!(check_name("").is_err());
        assert!(check_name("Anna").is_err());
        assert_eq!(parse_spaces(" a, b,,a "), vec!["a", "b"]);
    }

    #[test]
    fn an_invitation_is_stored_as_the_digest_of_its_token() {
        let (token, invitation) = new_invitation(1_000);
        assert_eq!(token.len(), 32);
        assert_eq!(invitation.digest, invitation_digest(&token));
        assert_eq!(invitation.expires_ms, 1_000 + INVITATION_MS);
        assert_ne!(new_invitation(1_000).0, token);
    }
}
