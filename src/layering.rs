//! The layering rule, checked on the source tree: every module's
//! `crate::` and `super::` paths point only down the layers that
//! ARCHITECTURE.md draws, top-level modules import each other without
//! cycles, and the files of one directory import each other without cycles.
//!
//! The check reads the source text (comments removed) rather than the
//! compiler's view, so it sees exactly what a reader sees: the `use` lines
//! and the paths written in the code.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use modules of its own layer or
/// of a lower one; `main.rs` (the binary) and `lib.rs` may use anything.
/// `cli` is alone on the top layer: nothing in the library uses it.
const LAYERS: &[&[&str]] = &[
    // Pure parts and shared vocabulary: no sockets, no pools.
    &[
        "id", "sync", "clock", "protocol", "topology", "router", "error",
    ],
    // Hosts, operator tooling, counters and the accept loop; nothing of the
    // statement path.
    &["backend", "stats", "ops", "net"],
    // The statement path: executes plans.
    &["engine"],
    // Sessions, the admin port and the control plane.
    &["frontend", "admin", "control"],
    // Wires everything into a running proxy.
    &["server"],
    // The command line; `main.rs` only calls `cli::main`.
    &["cli"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// One source file: its module path under `src/` and its text without
/// comments.
struct Source {
    /// Module path, e.g. `["engine", "execute"]` for `src/engine/execute.rs`
    /// or `src/engine/execute/mod.rs`.
    path: Vec<String>,
    code: String,
}

fn sources(root: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    collect(root, &mut files);
    files
        .into_iter()
        .filter_map(|file| {
            let relative = file.strip_prefix(root).ok()?;
            let mut path: Vec<String> = relative
                .iter()
                .map(|part| part.to_string_lossy().into_owned())
                .collect();
            let last = path.pop()?;
            let stem = last.strip_suffix(".rs")?.to_owned();
            if stem != "mod" {
                path.push(stem);
            }
            if path.is_empty()
                || path == ["main"]
                || path == ["lib"]
                || path == ["layering"]
                || path == ["docs_check"]
                || path == ["test_alloc"]
            {
                return None;
            }
            let text = fs::read_to_string(&file).ok()?;
            Some(Source {
                path,
                code: without_comments(&text),
            })
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// `text` with `//` line comments and `/* */` block comments blanked, and
/// string and char literals kept as they are (so `"http://"` stays).
fn without_comments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < bytes.len() {
                    if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(bytes.len());
                out.push_str(&text[start..i]);
            }
            _ => {
                let start = i;
                i += 1;
                while i < bytes.len() && !text.is_char_boundary(i) {
                    i += 1;
                }
                out.push_str(&text[start..i]);
            }
        }
    }
    out
}

/// The first segment of every path that starts with `prefix` (`crate::`,
/// `super::`), expanding `prefix{a::x, b}` groups to `a`, `b`.
fn first_segments(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let preceded_by_ident = rest[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':');
        rest = &rest[at + prefix.len()..];
        if preceded_by_ident {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut end = 0;
            for (offset, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = offset;
                    break;
                }
            }
            for item in split_top_level(&group[..end]) {
                if let Some(name) = leading_ident(item.trim()) {
                    found.insert(name);
                }
            }
        } else if let Some(name) = leading_ident(rest) {
            found.insert(name);
        }
    }
    found
}

fn split_top_level(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (offset, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&group[start..offset]);
                start = offset + 1;
            }
            _ => {}
        }
    }
    items.push(&group[start..]);
    items
}

fn leading_ident(text: &str) -> Option<String> {
    let name: String = text
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name != "self" && name != "super").then_some(name)
}

/// Every cycle-forming edge of `graph`, as `a -> b` strings (one per cycle
/// found by a depth-first search).
fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<String>,
    ) {
        if done.contains(node) {
            return;
        }
        if let Some(at) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_owned());
            found.push(cycle.join(" -> "));
            return;
        }
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            visit(next, graph, stack, done, found);
        }
        stack.pop();
        done.insert(node.to_owned());
    }
    let mut found = Vec::new();
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        visit(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

fn src_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_module_has_a_layer() {
    let unplaced: BTreeSet<String> = sources(&src_root())
        .iter()
        .map(|source| source.path[0].clone())
        .filter(|module| layer_of(module).is_none())
        .collect();
    assert!(
        unplaced.is_empty(),
        "modules missing from LAYERS in src/layering.rs (and from ARCHITECTURE.md): {unplaced:?}"
    );
}

#[test]
fn modules_only_use_their_own_or_lower_layers() {
    let mut violations = Vec::new();
    for source in sources(&src_root()) {
        let module = &source.path[0];
        let Some(own) = layer_of(module) else {
            continue;
        };
        for used in first_segments(&source.code, "crate::") {
            match layer_of(&used) {
                Some(layer) if layer > own => violations.push(format!(
                    "src/{}: {module} (layer {own}) uses crate::{used} (layer {layer})",
                    source.path.join("/")
                )),
                _ => {}
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports that point up:\n{}",
        violations.join("\n")
    );
}

#[test]
fn nothing_uses_the_command_line() {
    let users: Vec<String> = sources(&src_root())
        .iter()
        .filter(|source| source.path[0] != "cli")
        .filter(|source| first_segments(&source.code, "crate::").contains("cli"))
        .map(|source| format!("src/{}", source.path.join("/")))
        .collect();
    assert!(users.is_empty(), "modules that use crate::cli: {users:?}");
    let main = fs::read_to_string(src_root().join("main.rs")).unwrap_or_default();
    assert!(
        main.contains("shardgate::cli::main()"),
        "src/main.rs should only call shardgate::cli::main()"
    );
}

#[test]
fn unit_tests_are_a_tests_module_at_its_default_path() {
    // Written in two pieces, so that this file does not match itself.
    let path_attribute = ["#[", "path"].concat();
    let mut files = Vec::new();
    collect(&src_root(), &mut files);
    let odd: Vec<String> = files
        .iter()
        .filter(|file| {
            let name = file.file_name().unwrap_or_default().to_string_lossy();
            let code = without_comments(&fs::read_to_string(file).unwrap_or_default());
            name.ends_with("_tests.rs") || code.contains(&path_attribute)
        })
        .map(|file| file.display().to_string())
        .collect();
    assert!(
        odd.is_empty(),
        "unit tests go in `mod tests` inline or in <module>/tests.rs (docs/testing.md), \
         without a path attribute or *_tests.rs: {odd:?}"
    );
}

#[test]
fn top_level_modules_import_each_other_without_cycles() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for source in sources(&src_root()) {
        let module = source.path[0].clone();
        let used = first_segments(&source.code, "crate::");
        let entry = graph.entry(module.clone()).or_default();
        entry.extend(
            used.into_iter()
                .filter(|u| *u != module && layer_of(u).is_some()),
        );
    }
    let found = cycles(&graph);
    assert!(found.is_empty(), "import cycles: {found:#?}");
}

#[test]
fn files_of_one_directory_import_each_other_without_cycles() {
    let all = sources(&src_root());
    let mut by_dir: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let names: BTreeSet<Vec<String>> = all.iter().map(|s| s.path.clone()).collect();
    for source in &all {
        let Some((name, dir)) = source.path.split_last() else {
            continue;
        };
        if dir.is_empty() || name == "tests" {
            continue;
        }
        let mut used = first_segments(&source.code, "super::");
        let qualified = format!("crate::{}::", dir.join("::"));
        used.extend(first_segments(&source.code, &qualified));
        let siblings: BTreeSet<String> = used
            .into_iter()
            .filter(|u| u != name && u != "tests")
            .filter(|u| {
                let mut path = dir.to_vec();
                path.push(u.clone());
                names.contains(&path)
            })
            .collect();
        by_dir
            .entry(dir.to_vec())
            .or_default()
            .insert(name.clone(), siblings);
    }
    let found: Vec<String> = by_dir
        .iter()
        .flat_map(|(dir, graph)| {
            cycles(graph)
                .into_iter()
                .map(move |cycle| format!("src/{}: {cycle}", dir.join("/")))
        })
        .collect();
    assert!(found.is_empty(), "cycles between sibling files: {found:#?}");
}

#[test]
fn the_scanner_reads_groups_and_skips_comments() {
    let code = without_comments(
        "use crate::{engine::Engine, backend::{a, b}};\n// crate::server\nlet url = \"http://x\"; crate::id::decode(1);",
    );
    let found = first_segments(&code, "crate::");
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["backend", "engine", "id"]
    );
    let graph = BTreeMap::from([
        ("a".to_owned(), BTreeSet::from(["b".to_owned()])),
        ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
    ]);
    assert_eq!(cycles(&graph), ["a -> b -> a"]);
}
