//! Puts the git commit the binary was built from into `tracker --version`, so a bug report
//! names the exact code. A build outside a git checkout (a source tarball, `cargo install` from
//! a copy) says `unknown` instead of failing. The variable is `BUILT_FROM_COMMIT`, not
//! `TRACKER_*`: cargo also sets it in the environment of `cargo run` and of the tests, where
//! `TRACKER_*` names settings.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=BUILT_FROM_COMMIT={commit}");
    // Run again when HEAD moves: a checkout changes HEAD, a commit the branch's ref. In a linked
    // worktree `.git` is a file: HEAD is in the worktree's own git directory and the refs are in
    // the common one, so both are asked of git rather than assumed to be under `.git/`.
    if let (Some(git_dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let head = Path::new(&git_dir).join("HEAD");
        let mut watched = vec![head.clone()];
        if let Some(reference) = std::fs::read_to_string(&head)
            .ok()
            .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_owned()))
        {
            watched.push(Path::new(&common).join(reference));
            watched.push(Path::new(&common).join("packed-refs"));
        }
        // Only files that exist: cargo counts a missing one as changed on every build, which
        // rebuilt the whole crate each time (a checkout without packed refs, say).
        for file in watched.iter().filter(|f| f.exists()) {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// What `git ARGS` prints, trimmed; `None` outside a checkout or without git.
fn git(args: &[&str]) -> Option<String> {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
}
