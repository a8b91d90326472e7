//! Enums whose discriminants are stored on disk (a byte in a record), each variant with the name
//! answers, pages and queries use. [`stored_codes!`] declares such an enum from one list of
//! `Variant = code => "name"`, with `ALL` (in the list's order), `as_str` and `from_u8`, so that a
//! code, its variant and its name are written once and cannot drift apart.

/// Declares a `#[repr(u8)]` enum from `Variant = code => "name"` entries, with `ALL`, `as_str`
/// and `from_u8` (`None` for a byte no variant has: a record from a newer version, or damage),
/// deriving `Clone, Copy, Debug, PartialEq, Eq, Hash`. Attributes before `enum` (more derives,
/// serde's renaming, docs) are the enum's; those before an entry are its variant's. The codes
/// are stored: never renumber one.
macro_rules! stored_codes {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $code:literal => $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        $vis enum $name {
            $($(#[$vmeta])* $variant = $code,)+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($code),+].len()] = [$($name::$variant),+];

            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            #[must_use]
            pub fn from_u8(n: u8) -> Option<$name> {
                $name::ALL.into_iter().find(|v| *v as u8 == n)
            }
        }
    };
}

pub(crate) use stored_codes;

#[cfg(test)]
mod tests {
    use crate::domain::event::{AttributedBy, EventKind, Source};
    use crate::platform::{Kind, State};

    /// The stored bytes and names as they are on users' disks and in answers: a change here is
    /// a change of the data file or of the interface.
    #[test]
    fn stored_codes_and_names_stay() {
        let seen = |all: &mut dyn Iterator<Item = (u8, &'static str)>| all.collect::<Vec<_>>();
        assert_eq!(
            seen(&mut EventKind::ALL.into_iter().map(|k| (k as u8, k.as_str()))),
            [
                (1, "contact"),
                (2, "subscribed"),
                (3, "registration"),
                (4, "deposit")
            ]
        );
        assert_eq!(
            seen(&mut Source::ALL.into_iter().map(|s| (s as u8, s.as_str()))),
            [(1, "post"), (2, "get"), (3, "telegram")]
        );
        assert_eq!(
            seen(&mut AttributedBy::ALL.into_iter().map(|a| (a as u8, a.as_str()))),
            [(1, "uid"), (2, "tg_id")]
        );
        assert_eq!(
            seen(&mut State::ALL.into_iter().map(|s| (s as u8, s.as_str()))),
            [
                (0, "pending"),
                (1, "delivered"),
                (2, "retrying"),
                (3, "dead"),
                (4, "cancelled"),
                (5, "paused")
            ]
        );
        // A byte no variant has reads as none, the edges of each list included.
        assert_eq!(EventKind::from_u8(0), None);
        assert_eq!(EventKind::from_u8(4), Some(EventKind::Deposit));
        assert_eq!(EventKind::from_u8(5), None);
        assert_eq!(State::from_u8(5), Some(State::Paused));
        assert_eq!(State::from_u8(6), None);
    }

    /// Where serde names a variant, it is the name `as_str` gives.
    #[test]
    fn serde_names_are_the_stored_names() {
        let json = |v: serde_json::Value| v.as_str().unwrap().to_owned();
        for k in EventKind::ALL {
            assert_eq!(json(serde_json::to_value(k).unwrap()), k.as_str());
        }
        for a in AttributedBy::ALL {
            assert_eq!(json(serde_json::to_value(a).unwrap()), a.as_str());
        }
        for s in State::ALL {
            assert_eq!(json(serde_json::to_value(s).unwrap()), s.as_str());
        }
        for k in Kind::ALL {
            assert_eq!(json(serde_json::to_value(k).unwrap()), k.as_str());
        }
    }
}
