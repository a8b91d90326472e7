//! What the command line asks on a terminal without echo, or reads from the first line of
//! standard input when there is no terminal (for scripts): the new admin password and a Meta
//! access token. Never flags, which `ps` would show.

use std::io::IsTerminal as _;

use crate::domain::password::{self, Password};

/// The new admin password: typed twice without echo on a terminal, else the first line of
/// standard input (for scripts: `echo "$PASSWORD" | tracker admin password`). The rule is
/// checked here too, before anything is asked of a server.
pub(super) fn read_new_password() -> Result<Password, Box<dyn std::error::Error>> {
    use std::io::BufRead;
    let stdin = std::io::stdin();
    let password = if stdin.is_terminal() {
        let first = prompt_hidden("New admin password: ")?;
        password::check_rule(&first)?;
        if prompt_hidden("Again: ")? != first {
            return Err("the two passwords differ; nothing was changed".into());
        }
        first
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line.trim_end_matches(['\n', '\r']).to_owned()
    };
    password::check_rule(&password)?;
    Ok(Password(password))
}

/// An ad platform's access token: asked without echo on a terminal, else the first line of standard
/// input (`tracker destination create ... < token.txt`).
pub(super) fn read_access_token() -> Result<String, Box<dyn std::error::Error>> {
    use std::io::BufRead;
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return prompt_hidden("Access token: ");
    }
    let mut line = String::new();
    stdin.lock().read_line(&mut line)?;
    Ok(line.trim().to_owned())
}

/// Reads a line from the terminal with echo off, restoring the terminal after.
fn prompt_hidden(prompt: &str) -> Result<String, Box<dyn std::error::Error>> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    use std::io::BufRead;
    let stdin = std::io::stdin();
    eprint!("{prompt}");
    let before = tcgetattr(&stdin)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    tcsetattr(&stdin, OptionalActions::Flush, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    tcsetattr(&stdin, OptionalActions::Flush, &before)?;
    eprintln!();
    read?;
    Ok(line.trim_end_matches(['\n', '\r']).to_owned())
}
