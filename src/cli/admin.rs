//! The admin page as the command line speaks of it: its address under the public one, the line
//! that names it (with its password when it was made now, the only time it is shown), and what
//! `tracker admin password` answers.

/// The admin page's address under the public base address.
pub(super) fn admin_url(base: &str) -> String {
    format!("{base}/admin/")
}

/// The admin page's line: its address and user, with the password when it was made now.
pub(super) fn admin_page_text(base: &str, password: Option<&str>) -> String {
    let url = admin_url(base);
    match password {
        Some(password) => format!(
            "Admin page: {url}  user admin  password {password}\n  (shown only this once; \
             `tracker admin password` sets another)"
        ),
        None => format!(
            "Admin page: {url}  user admin  (forgot the password? `tracker admin password` \
             sets a new one)"
        ),
    }
}

/// `tracker admin password`'s answer.
pub(super) const PASSWORD_SET: &str = "the admin password is set; log in at /admin/ as user admin";
