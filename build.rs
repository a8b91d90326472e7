//! Puts the git commit the binary was built from into `tracker --version`, so a bug report
//! names the exact code. A build outside a git checkout (a source tarball, `cargo install` from
//! a copy) says `unknown` instead of failing. The variable is `BUILT_FROM_COMMIT`, not
//! `TRACKER_*`: cargo also sets it in the environment of `cargo run` and of the tests, where
//! `TRACKER_*` names settings.

use std::path::Path;
use std::process::Command;

fn main() {
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map_or_else(|| "unknown".to_owned(), |s| s.trim().to_owned());
    println!("cargo:rustc-env=BUILT_FROM_COMMIT={commit}");
    // Run again when HEAD moves: a checkout changes `.git/HEAD`, a commit the branch's ref.
    let head = Path::new(".git/HEAD");
    if head.exists() {
        println!("cargo:rerun-if-changed=.git/HEAD");
        if let Some(reference) = std::fs::read_to_string(head)
            .ok()
            .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_owned()))
        {
            // Only files that exist: cargo counts a missing one as changed on every build, which
            // rebuilt the whole crate each time (a checkout without packed refs, say).
            for file in [format!(".git/{reference}"), ".git/packed-refs".to_owned()] {
                if Path::new(&file).exists() {
                    println!("cargo:rerun-if-changed={file}");
                }
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}
