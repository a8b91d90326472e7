//! The README and `docs/` as a new user meets them: the README's command lines, taken from the
//! file, run in order against a fresh server, with the answers they say they get; the curl
//! examples of `docs/bots.md` and `docs/api.md` run too; every curl URL with braces or
//! brackets says `-g`; every relative link names a file that exists; the README stays short.
//!
//! Which blocks run (the README says so in a comment at its top): every ```` ```sh ```` block,
//! except one right after a line `<!-- not run: REASON -->`. A `# {...}` comment right after a
//! command is the answer expected of it. `docs/*.md` blocks are not marked: only their `curl`
//! lines are run. `README_TEST_SHOW=1` prints each command with what it printed.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{first_start, stop_cleanly};

/// The README's length a new user is asked to read, at most.
const README_MAX_LINES: usize = 350;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(repo().join(relative))
        .unwrap_or_else(|e| panic!("read {relative}: {e}"))
}

/// A fenced code block of a Markdown file.
#[derive(Debug)]
struct Block {
    /// The word after the opening fence (`sh`, `text`, ...).
    lang: String,
    /// The line of the opening fence, 1-based.
    line: usize,
    /// Its lines, with the indentation of the fence removed.
    lines: Vec<String>,
    /// Marked `<!-- not run: ... -->` on the line before the fence.
    not_run: bool,
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<(Block, usize)> = None;
    let mut previous = "";
    for (i, raw) in markdown.lines().enumerate() {
        let trimmed = raw.trim_start();
        let indent = raw.len() - trimmed.len();
        match open.take() {
            None if trimmed.starts_with("```") => {
                let block = Block {
                    lang: trimmed.trim_start_matches('`').trim().to_owned(),
                    line: i + 1,
                    lines: Vec::new(),
                    not_run: previous.trim().starts_with("<!-- not run:"),
                };
                open = Some((block, indent));
            }
            None => {}
            Some((block, _)) if trimmed.starts_with("```") => found.push(block),
            Some((mut block, fence)) => {
                // Without the fence's indentation (a block in a list item), as far as the line
                // has it.
                block.lines.push(raw[indent.min(fence)..].to_owned());
                open = Some((block, fence));
            }
        }
        previous = raw;
    }
    assert!(open.is_none(), "a code block is not closed");
    found
}

/// One command of a block: its text (continued lines joined) and the answer its `# {...}`
/// comment expects.
#[derive(Debug)]
struct Step {
    /// `FILE:LINE`, for messages.
    at: String,
    text: String,
    expect: Option<String>,
}

fn steps(file: &str, block: &Block) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    let mut lines = block.lines.iter().enumerate();
    while let Some((i, line)) = lines.next() {
        let at = format!("{file}:{}", block.line + 1 + i);
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        if let Some(comment) = trimmed.strip_prefix('#') {
            let comment = comment.trim();
            // `# {...}` right after a command, and the lines that continue it (`#   ...`).
            if let Some(last) = out.last_mut() {
                if comment.starts_with('{') && last.expect.is_none() {
                    last.expect = Some(comment.to_owned());
                } else if let Some(expect) = last.expect.as_mut()
                    && line.starts_with("#  ")
                {
                    expect.push_str(comment);
                }
            }
            continue;
        }
        let mut text = line.clone();
        while text.ends_with('\\') {
            text.pop();
            let Some((_, next)) = lines.next() else { break };
            text.push(' ');
            text.push_str(next.trim_start());
        }
        out.push(Step {
            at,
            text,
            expect: None,
        });
    }
    out
}

/// The words of a command line as a shell would split them (quotes removed; no expansion).
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                word.extend(chars.next());
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                }
                in_word = false;
            }
            (None, '#') if !in_word => break,
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// The URLs of a `curl` command line that curl would read as a pattern (braces or brackets)
/// when it is not given `-g`; empty when there are none or it has `-g`.
fn globbed_urls(line: &str) -> Vec<String> {
    // Options that take a value, which is never a URL (a JSON body, a header, -w's format).
    const WITH_VALUE: &[&str] = &[
        "-d",
        "--data",
        "--data-raw",
        "--data-binary",
        "--json",
        "-H",
        "--header",
        "-o",
        "--output",
        "-w",
        "--write-out",
        "-X",
        "--request",
        "-u",
        "--user",
        "-m",
        "--max-time",
        "-A",
        "--user-agent",
    ];
    let words = words(line);
    let mut urls = Vec::new();
    let mut globoff = false;
    // Each `curl` of a pipeline or a `$(...)`.
    let mut in_curl = false;
    let mut skip = false;
    for word in &words {
        if skip {
            skip = false;
            continue;
        }
        if word == "curl" || word.ends_with("$(curl") {
            in_curl = true;
            continue;
        }
        if !in_curl {
            continue;
        }
        match word.as_str() {
            "-g" | "--globoff" => globoff = true,
            w if WITH_VALUE.contains(&w) => skip = true,
            // Short options together (`-sg`, `-gs`).
            w if w.starts_with('-') && !w.starts_with("--") && w.contains('g') => globoff = true,
            "|" => in_curl = false,
            w if w.contains(['{', '}', '[', ']']) => urls.push(w.to_owned()),
            _ => {}
        }
    }
    if globoff { Vec::new() } else { urls }
}

/// What an expectation comment says: `"ok"`, and `"status"` and `"matched"` when it has them.
fn expected_fields(comment: &str) -> Vec<(&'static str, String)> {
    let mut fields = Vec::new();
    for (key, pattern) in [
        ("ok", "\"ok\":"),
        ("status", "\"status\":"),
        ("matched", "\"matched\":"),
    ] {
        if let Some(at) = comment.find(pattern) {
            let rest = &comment[at + pattern.len()..];
            let value: String = rest
                .chars()
                .take_while(|c| !matches!(c, ',' | '}'))
                .collect();
            fields.push((key, value.trim().to_owned()));
        }
    }
    fields
}

/// A command's output, judged by its expectation: the same `ok`, `status` and `matched` (the
/// latter only when `check_matched`). Without one, a JSON answer must be `ok`.
fn judge(step: &Step, output: &str, check_matched: bool) -> Result<(), String> {
    let json: Option<Value> = serde_json::from_str(output.trim()).ok();
    match (&step.expect, json) {
        (Some(expect), Some(answer)) => {
            for (key, want) in expected_fields(expect) {
                if key == "matched" && !check_matched {
                    continue;
                }
                let got = answer[key].to_string();
                if got != want {
                    return Err(format!("{key} is {got}, the file says {want}"));
                }
            }
            Ok(())
        }
        (Some(_), None) => Err("the answer is not JSON".to_owned()),
        (None, Some(answer)) if answer.get("ok").is_some() && answer["ok"] != true => {
            Err("a JSON answer that is not ok, and the file expects none".to_owned())
        }
        (None, _) => Ok(()),
    }
}

/// How strictly a file's answers are compared.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Check {
    /// Every expectation, `matched` included: the README's commands build on each other.
    All,
    /// `ok` and `status`: the examples name clicks of their own.
    OkAndStatus,
    /// None: the reference's examples show answers of a data file that has more in it.
    RunsOnly,
}

/// Runs `steps` as one bash script in `dir` (so variables and the alias carry from one to the
/// next), with `env` set, and checks each: exit status 0, and the answer by `check`.
fn run(dir: &Path, env: &[(&str, String)], steps: &[(Check, Step)]) -> Vec<String> {
    let mut script = String::from("shopt -s expand_aliases\n");
    for (i, (_, step)) in steps.iter().enumerate() {
        script.push_str(&step.text);
        let _ = write!(script, "\nprintf '\\n@@step {i} %d\\n' $?\n");
    }
    std::fs::write(dir.join("steps.sh"), &script).unwrap();
    let out = Command::new("bash")
        .arg("steps.sh")
        .current_dir(dir)
        .env_remove("TRACKER_LISTEN")
        .env_remove("TRACKER_DATA")
        .env("TRACKER_LOG_LEVEL", "warn")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .output()
        .expect("run bash");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut failures = Vec::new();
    let mut rest: &str = &stdout;
    for (i, (check, step)) in steps.iter().enumerate() {
        let marker = format!("\n@@step {i} ");
        let Some(at) = rest.find(&marker) else {
            failures.push(format!("{}: never finished: {}", step.at, step.text));
            break;
        };
        let output = &rest[..at];
        let tail = &rest[at + marker.len()..];
        let (status, next) = tail.split_once('\n').unwrap_or((tail, ""));
        rest = next;
        if std::env::var_os("README_TEST_SHOW").is_some() {
            eprintln!("{}: {}\n{output}", step.at, step.text);
        }
        if status != "0" {
            failures.push(format!(
                "{}: exit status {status}: {}\n  output: {output}",
                step.at, step.text
            ));
            continue;
        }
        if *check != Check::RunsOnly
            && let Err(e) = judge(step, output, *check == Check::All)
        {
            failures.push(format!(
                "{}: {e}\n  command: {}\n  output: {output}",
                step.at, step.text
            ));
        }
    }
    if !failures.is_empty() {
        failures.push(format!("stderr of the script:\n{stderr}"));
    }
    failures
}

/// The README's set-up block, the one not run: exactly the two commands a new user types.
#[test]
fn the_readme_sets_up_with_two_commands() {
    let readme = read("README.md");
    let blocks = blocks(&readme);
    let sh: Vec<&Block> = blocks.iter().filter(|b| b.lang == "sh").collect();
    let setup = sh.first().expect("the README has sh blocks");
    assert!(
        setup.not_run,
        "the first sh block is the set-up, which the test cannot run"
    );
    let commands: Vec<String> = steps("README.md", setup)
        .into_iter()
        .map(|s| words(&s.text).join(" "))
        .collect();
    assert_eq!(commands, ["cargo run --release -- serve", "cargo test"]);
    assert_eq!(
        sh.iter().filter(|b| b.not_run).count(),
        1,
        "only the set-up block is left out of the run"
    );
    // The first `tracker` command comes after the line that makes `tracker` work.
    let alias = readme
        .find("alias tracker=\"$PWD/target/release/tracker\"")
        .expect("the README says what makes `tracker` work");
    let first_use = sh
        .iter()
        .filter(|b| !b.not_run)
        .flat_map(|b| steps("README.md", b))
        .find(|s| words(&s.text).first().is_some_and(|w| w == "tracker"))
        .expect("the README uses `tracker`");
    let line_of_alias = readme[..alias].lines().count();
    let line_of_use: usize = first_use.at.rsplit(':').next().unwrap().parse().unwrap();
    assert!(line_of_alias < line_of_use, "{first_use:?}");
}

/// The variables the README's commands use are the ones the first start prints (as the
/// README shows it), or set by an earlier command of the README.
#[test]
fn the_readme_uses_only_variables_it_says_where_to_get() {
    let readme = read("README.md");
    let blocks = blocks(&readme);
    let shown: BTreeSet<String> = blocks
        .iter()
        .filter(|b| b.lang == "text")
        .flat_map(|b| b.lines.iter())
        .filter_map(|l| l.trim().strip_prefix("export "))
        .filter_map(|l| l.split_once('=').map(|(name, _)| name.to_owned()))
        .collect();
    assert_eq!(
        shown,
        BTreeSet::from(["INGEST_TOKEN", "SECRET", "TRACKER"].map(String::from)),
        "the first start's lines, as the README shows them"
    );
    let mut known = shown;
    known.insert("PWD".to_owned());
    for block in blocks.iter().filter(|b| b.lang == "sh" && !b.not_run) {
        for step in steps("README.md", block) {
            for name in variables(&step.text) {
                assert!(known.contains(&name), "{}: ${name} is never set", step.at);
            }
            if let Some((name, _)) = step.text.split_once('=')
                && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
            {
                known.insert(name.to_owned());
            }
        }
    }
}

/// `$NAME` and `${NAME}` in a command line.
fn variables(line: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find('$') {
        rest = &rest[at + 1..];
        let name: String = rest
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if name.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) {
            names.push(name);
        }
    }
    names
}

/// The README's commands, in order, then the curl examples of `docs/bots.md` and
/// `docs/api.md`, against a fresh server; with `SECRET`, `INGEST_TOKEN` and `TRACKER` set from
/// what that server made, as the README says to paste them.
#[test]
fn the_readme_and_the_docs_curl_examples_run_against_a_fresh_server() {
    let dir = tempfile::tempdir().unwrap();
    // A new user's tracker.toml, from `tracker default-config` (the repository's own is the
    // user's to edit), on the test's data file; the `tracker` commands read it from the
    // directory they run in, as the README's do.
    let config =
        tracker::config::EXAMPLE.replace("\ndata = \"tracker.redb\"", "\ndata = \"t.redb\"");
    assert!(
        config.contains("data = \"t.redb\""),
        "the example names its data file"
    );
    let (server, space) = first_start(dir.path());
    std::fs::write(dir.path().join("tracker.toml"), config).unwrap();
    // Where `cargo run --release` leaves the binary, which the README's alias names.
    let release = dir.path().join("target/release");
    std::fs::create_dir_all(&release).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tracker"), release.join("tracker")).unwrap();

    let mut all = Vec::new();
    for block in blocks(&read("README.md")) {
        if block.lang == "sh" && !block.not_run {
            all.extend(
                steps("README.md", &block)
                    .into_iter()
                    .map(|s| (Check::All, s)),
            );
        }
    }
    assert!(all.len() >= 10, "the README's funnel: {all:?}");
    for (file, check) in [
        ("docs/bots.md", Check::OkAndStatus),
        ("docs/api.md", Check::RunsOnly),
    ] {
        let before = all.len();
        for block in blocks(&read(file)).iter().filter(|b| b.lang == "sh") {
            all.extend(
                steps(file, block)
                    .into_iter()
                    .filter(|s| s.text.starts_with("curl "))
                    .map(|s| (check, s)),
            );
        }
        assert!(all.len() > before, "{file} has curl examples");
    }
    let env = [
        ("TRACKER", format!("http://{}", server.addr)),
        ("SECRET", space.secret.clone()),
        ("INGEST_TOKEN", space.ingest_token.clone()),
    ];
    let failures = run(dir.path(), &env, &all);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // What the README's funnel did is what the server holds.
    let csv = std::fs::read_to_string(dir.path().join("events.csv")).expect("the export");
    assert!(csv.contains("spring-sale"), "{csv}");
    stop_cleanly(server);
}

/// A curl line whose URL has braces or brackets says `-g`, in the README and every doc.
#[test]
fn every_curl_with_braces_or_brackets_says_g() {
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(repo()).unwrap().display().to_string();
        for block in blocks(&text) {
            for step in steps(&name, &block) {
                if step.text.contains("curl ") {
                    checked += 1;
                    let urls = globbed_urls(&step.text);
                    assert!(urls.is_empty(), "{}: curl without -g: {urls:?}", step.at);
                }
            }
        }
    }
    assert!(checked > 20, "{checked} curl lines");
}

/// The check itself, just inside and just outside.
#[test]
fn the_curl_check_tells_a_pattern_from_a_body() {
    assert_eq!(
        globbed_urls(r#"curl -s "$T/e?uid={clickid}""#),
        [r"$T/e?uid={clickid}"]
    );
    assert_eq!(globbed_urls(r#"curl -s "$T/e?uid=[clickid]""#).len(), 1);
    assert!(globbed_urls(r#"curl -g -s "$T/e?uid={clickid}""#).is_empty());
    assert!(globbed_urls(r#"curl -sg "$T/e?uid={clickid}""#).is_empty());
    assert!(globbed_urls(r#"curl --globoff "$T/e?uid={clickid}""#).is_empty());
    // Braces in a body, a header or a format are not a URL.
    assert!(globbed_urls(r#"curl -s "$T/events" -d '{"event":"contact"}'"#).is_empty());
    assert!(globbed_urls(r#"curl -s -o /dev/null -w '%{http_code}' "$T/l/a""#).is_empty());
    assert_eq!(
        globbed_urls(r#"X=$(curl -s -w '%{x}' "$T/l/{a}" | sed 's/{b}//')"#),
        [r"$T/l/{a}"]
    );
}

/// README.md, and every Markdown file under docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// Every relative link of README.md and docs/*.md names a file that exists (anchors are not
/// checked: some name sections that other changes write).
#[test]
fn every_relative_link_names_a_file_that_exists() {
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap();
            checked += 1;
            assert!(
                file.parent().unwrap().join(path).exists(),
                "{}: a link to {target}, which does not exist",
                file.display()
            );
        }
    }
    assert!(checked > 20, "{checked} links");
}

/// The README is a new user's path, not the reference.
#[test]
fn the_readme_is_at_most_350_lines() {
    let lines = read("README.md").lines().count();
    assert!(lines <= README_MAX_LINES, "README.md has {lines} lines");
}
