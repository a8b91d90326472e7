//! The layers point one way. Reads the sources of `src/` and `benches/ingest/` as text and
//! fails on an import that runs from a lower layer up to a higher one (the order is
//! `tracker::LAYERS`), or on a cycle of imports between files.
//!
//! An import is any path that names another file's module: a `use` item (with its braces
//! expanded), an inline `crate::a::b` path, or a `super::` path. Comments, string literals and
//! `#[cfg(test)]` modules are left out: a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file below `root`, in its folders too.
fn rust_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// A source tree: each file's module path (`["http", "routes"]`) and its code.
struct Tree {
    files: BTreeMap<Vec<String>, String>,
}

impl Tree {
    fn read(root: &Path) -> Tree {
        let mut files = BTreeMap::new();
        for path in rust_files(root) {
            let module = module_of(root, &path);
            let text = std::fs::read_to_string(&path).unwrap();
            // `lib.rs` and `main.rs` are both the crate's root.
            files
                .entry(module)
                .or_insert_with(String::new)
                .push_str(&code_of(&text));
        }
        Tree { files }
    }

    /// The file a path names: the longest prefix of it that is a file's module, followed
    /// through that file's `pub use` when it only re-exports the name from another file (a
    /// folder's `mod.rs` that shows its parts' types is not where they live).
    fn file_of(&self, path: &[String]) -> Option<Vec<String>> {
        let file = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| self.files.contains_key(prefix))?;
        let Some(name) = path.get(file.len()) else {
            return Some(file);
        };
        let exported = paths_in_pub_use(&self.files[&file])
            .into_iter()
            .find(|p| p.last() == Some(name))
            .and_then(|p| self.resolve(&file, &p))
            .filter(|target| target.as_slice() != path);
        match exported {
            Some(target) => self.file_of(&target).or(Some(file)),
            None => Some(file),
        }
    }

    /// Every other file each file imports.
    fn edges(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut edges = BTreeMap::new();
        for (module, code) in &self.files {
            let mut to = BTreeSet::new();
            for path in paths_in(code) {
                let Some(absolute) = self.resolve(module, &path) else {
                    continue;
                };
                if let Some(file) = self.file_of(&absolute)
                    && &file != module
                    && !file.is_empty()
                {
                    to.insert(file);
                }
            }
            edges.insert(module.clone(), to);
        }
        edges
    }

    /// A path as written in `module`'s file, made absolute; `None` for another crate's.
    fn resolve(&self, module: &[String], path: &[String]) -> Option<Vec<String>> {
        let first = path.first()?;
        match first.as_str() {
            "crate" | "tracker" => Some(path[1..].to_vec()),
            "self" => Some([module, &path[1..]].concat()),
            "super" => {
                let mut base = module.to_vec();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                Some([base.as_slice(), rest].concat())
            }
            // A child module named by its bare name (`use session::Sessions`).
            _ => {
                let child = [module, &path[..1]].concat();
                self.files
                    .contains_key(&child)
                    .then(|| [module, path].concat())
            }
        }
    }
}

fn module_of(root: &Path, path: &Path) -> Vec<String> {
    let relative: PathBuf = path.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file without comments, string literals and its `#[cfg(test)]` modules. In an
/// inline `mod name { }`, `super::` is the file itself, so it is written `self::` there.
fn code_of(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    // The brace depth of the file, and the depths at which inline modules opened.
    let (mut depth, mut inline_at) = (0isize, Vec::<isize>::new());
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]")
            && lines.peek().is_some_and(|next| {
                next.trim_start()
                    .trim_start_matches("pub(super) ")
                    .starts_with("mod ")
            })
        {
            // A test module runs to the end of its braces; skip it whole.
            let mut depth = 0isize;
            let mut opened = false;
            for line in lines.by_ref() {
                depth += braces(line);
                opened |= line.contains('{');
                if opened && depth <= 0 {
                    break;
                }
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let mut code =
            without_visibility(&without_strings(trimmed.split(" //").next().unwrap_or("")));
        if !inline_at.is_empty() {
            code = code.replace("super::", "self::");
        }
        let opens_module = (code.starts_with("mod ") || code.starts_with("pub mod "))
            && code.trim_end().ends_with('{');
        if opens_module {
            inline_at.push(depth);
        }
        depth += braces(&code);
        while inline_at.last().is_some_and(|&at| depth <= at) {
            inline_at.pop();
        }
        out.push_str(&code);
        out.push('\n');
    }
    out
}

/// A line without its `pub(in path)` visibilities: a path there says who may see an item, not
/// what the item uses.
fn without_visibility(line: &str) -> String {
    let mut out = line.to_owned();
    while let Some(at) = out.find("pub(in ") {
        let close = out[at..].find(')').map_or(out.len(), |c| at + c + 1);
        out.replace_range(at..close, "pub");
    }
    out
}

/// How many more braces a line opens than it closes.
fn braces(line: &str) -> isize {
    let count = |c| isize::try_from(line.matches(c).count()).unwrap_or(isize::MAX);
    count('{') - count('}')
}

/// A line with the insides of its string literals blanked (a message that says `crate::x` is
/// not an import).
fn without_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in line.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                out.push('"');
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

/// Every path the code names through a module: `use` trees expanded, then the inline
/// `crate::`, `super::` and `self::` paths.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        let tail = &rest[at..];
        let end = tail.find(';').unwrap_or(tail.len());
        expand(&tail["use ".len()..end], &[], &mut paths);
        rest = &tail[end..];
    }
    for start in ["crate::", "super::", "self::", "tracker::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let written = code[at..]
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("");
            // `crate::a::{b, c}` is a use tree, read above.
            if written.ends_with("::") {
                continue;
            }
            let path: Vec<String> = written
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            paths.push(path);
        }
    }
    paths
}

/// The paths of a file's `pub use` items, as written.
fn paths_in_pub_use(code: &str) -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("pub use ") {
        let tail = &rest[at + "pub ".len()..];
        let end = tail.find(';').unwrap_or(tail.len());
        expand(&tail["use ".len()..end], &[], &mut paths);
        rest = &tail[end..];
    }
    paths
}

/// Where the next `use` item begins (`use`, `pub use`, `pub(crate) use`), as a word.
fn find_use(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = code[from..].find("use ") {
        let at = from + at;
        let before = code[..at].chars().next_back();
        if before.is_none_or(|c| c.is_whitespace() || c == ')' || c == ';' || c == '{') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// A `use` tree (`a::{b, c::{d, e}}`) into its paths, each after `prefix`.
fn expand(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim().trim_start_matches("::");
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = tree[..open]
            .split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        let base = [prefix, head.as_slice()].concat();
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        for part in split_top(inner) {
            expand(part, &base, out);
        }
        return;
    }
    let name = tree.split(" as ").next().unwrap_or("").trim();
    let mut path = prefix.to_vec();
    path.extend(
        name.split("::")
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "*" && *s != "self")
            .map(str::to_owned),
    );
    out.push(path);
}

/// The parts of a brace group, split at its top-level commas.
fn split_top(inner: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
}

/// The layer of a top-level module: its index in `tracker::LAYERS`, the highest first.
fn layer_of(module: &str) -> Option<usize> {
    tracker::LAYERS
        .iter()
        .position(|layer| layer.contains(&module))
}

/// Every import that runs from a module to one in its own layer or a higher one.
fn upward_imports(tree: &Tree) -> Vec<String> {
    let mut found = Vec::new();
    for (from, targets) in tree.edges() {
        let Some(top) = from.first() else { continue };
        for to in targets {
            let target = &to[0];
            if target == top {
                continue;
            }
            match (layer_of(top), layer_of(target)) {
                (Some(a), Some(b)) if a < b => {}
                (a, b) => found.push(format!(
                    "{} (layer {a:?}) imports {} (layer {b:?})",
                    from.join("/"),
                    to.join("/")
                )),
            }
        }
    }
    found
}

/// The cycles of the file graph, each as its files in order (Tarjan's strongly connected
/// components with more than one file).
fn cycles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on_stack: BTreeSet<&'a Vec<String>>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.edges.contains_key(w) {
                continue;
            }
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.join("/"));
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.found
}

fn source(dir: &str) -> Tree {
    Tree::read(&Path::new(env!("CARGO_MANIFEST_DIR")).join(dir))
}

#[test]
fn every_import_in_src_points_down() {
    let tree = source("src");
    let upward = upward_imports(&tree);
    assert!(
        upward.is_empty(),
        "imports that run up:\n{}",
        upward.join("\n")
    );
    // Every top-level module has its layer, so a new one cannot slip past the rule.
    for module in tree.files.keys().filter_map(|m| m.first()) {
        assert!(
            layer_of(module).is_some(),
            "src/{module} is in no layer of tracker::LAYERS"
        );
    }
}

/// The most lines a file of `src/` has before its `#[cfg(test)]` module: past it, a file holds
/// more than one thing and wants a room of its own.
const MAX_FILE_LINES: usize = 800;

/// The lines of `text` before its first line that begins `#[cfg(test)]`.
fn lines_outside_tests(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]"))
        .count()
}

#[test]
fn no_file_in_src_has_more_than_800_lines_outside_its_tests() {
    assert_eq!(lines_outside_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (mut long, mut read) = (Vec::new(), 0);
    for path in rust_files(&root) {
        read += 1;
        let n = lines_outside_tests(&std::fs::read_to_string(&path).unwrap());
        if n > MAX_FILE_LINES {
            long.push(format!("{} ({n} lines)", path.display()));
        }
    }
    assert!(read > 50, "only {read} files read");
    assert!(long.is_empty(), "over {MAX_FILE_LINES} lines: {long:?}");
}

#[test]
fn no_file_in_src_or_the_benchmark_imports_itself_through_others() {
    for dir in ["src", "benches/ingest"] {
        let edges = source(dir).edges();
        // `LAYERS_SHOW=domain/destination` prints what the files under that path import.
        if let Ok(show) = std::env::var("LAYERS_SHOW") {
            for (from, to) in edges.iter().filter(|(f, _)| f.join("/").starts_with(&show)) {
                eprintln!("{} -> {:?}", from.join("/"), to);
            }
        }
        let found = cycles(&edges);
        assert!(found.is_empty(), "import cycles in {dir}: {found:?}");
    }
}

#[test]
fn the_reader_sees_the_imports_that_are_there() {
    // The checks above pass on an empty graph too; this one pins that the reader finds a use
    // tree's paths, an inline path and a `super::` path, and that a cycle is seen.
    let code = code_of(
        "use crate::app::{App, spaces::{Rotated, Revoked}};\n\
         // use crate::cli::Commented;\n\
         fn f() { let _ = super::sibling::X; crate::domain::stats::percent(1, 2); \"crate::web\" }\n\
         #[cfg(test)]\nmod tests {\n    use crate::server::Y;\n}\n",
    );
    let paths: BTreeSet<String> = paths_in(&code).iter().map(|p| p.join("::")).collect();
    for expected in [
        "crate::app::App",
        "crate::app::spaces::Rotated",
        "crate::app::spaces::Revoked",
        "super::sibling::X",
        "crate::domain::stats::percent",
    ] {
        assert!(paths.contains(expected), "{expected} not in {paths:?}");
    }
    assert!(
        !paths
            .iter()
            .any(|p| p.contains("cli") || p.contains("web") || p.contains("server"))
    );

    let node = |s: &str| vec![s.to_owned()];
    let edges = BTreeMap::from([
        (node("a"), BTreeSet::from([node("b")])),
        (node("b"), BTreeSet::from([node("c")])),
        (node("c"), BTreeSet::from([node("a")])),
        (node("d"), BTreeSet::from([node("a")])),
    ]);
    assert_eq!(cycles(&edges), vec![vec!["a", "b", "c"]]);
}
