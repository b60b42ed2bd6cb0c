//! The public API changes only on purpose: the names every public module
//! exports (read from the sources, `pub` items and `pub use` lists) must be
//! those listed in `tests/integration/public_api.txt`. After a deliberate
//! change, run the test with `UPDATE_PUBLIC_API=1` and review the diff of
//! the list. (Methods and fields are not listed: rustdoc shows them.)

use std::path::{Path, PathBuf};

const LIST: &str = "tests/integration/public_api.txt";

/// The file of module `name` declared in `file` (`None`: not a file).
fn module_file(file: &Path, name: &str) -> Option<PathBuf> {
    let dir = match file.file_name()?.to_str()? {
        "lib.rs" | "mod.rs" => file.parent()?.to_path_buf(),
        other => file.parent()?.join(other.trim_end_matches(".rs")),
    };
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.exists())
}

/// The names a `use` tree (`a::{b, c::d as e}`) brings in.
fn use_names(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let leaf = tree.rsplit("::").next().unwrap_or(tree);
        let leaf = leaf.rsplit_once(" as ").map_or(leaf, |(_, alias)| alias);
        return vec![leaf.trim().to_string()];
    };
    let inner = tree[open + 1..].trim_end();
    let inner = inner.strip_suffix('}').unwrap_or(inner);
    let (mut depth, mut start, mut names) = (0, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                names.extend(use_names(&inner[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    if !inner[start..].trim().is_empty() {
        names.extend(use_names(&inner[start..]));
    }
    names
}

/// The public names of the module in `file` (its `pub` lines at the left
/// margin, or indented by `indent` inside an inline module), as `path::name`.
fn public_names(file: &Path, text: &str, prefix: &str, indent: &str, out: &mut Vec<String>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let Some(line) = lines[i].strip_prefix(indent) else {
            i += 1;
            continue;
        };
        i += 1;
        let Some(item) = line.strip_prefix("pub ") else {
            continue;
        };
        let words: Vec<&str> = item.split_whitespace().collect();
        let name = |w: &str| {
            w.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .unwrap_or("")
                .to_string()
        };
        match words.as_slice() {
            ["use", ..] => {
                let mut tree = item["use".len()..].to_string();
                while !tree.contains(';') && i < lines.len() {
                    tree.push_str(lines[i]);
                    i += 1;
                }
                let tree = tree.split(';').next().unwrap_or_default();
                for n in use_names(tree) {
                    out.push(format!("{prefix}{n}"));
                }
            }
            ["mod", m, ..] => {
                let m = name(m);
                out.push(format!("{prefix}{m}"));
                let inner_prefix = format!("{prefix}{m}::");
                if item.trim_end().ends_with('{') {
                    // An inline module: its items are indented once more.
                    let end = lines[i..]
                        .iter()
                        .position(|l| l.strip_prefix(indent) == Some("}"))
                        .map_or(lines.len(), |p| i + p);
                    let body = lines[i..end].join("\n");
                    public_names(file, &body, &inner_prefix, &format!("{indent}    "), out);
                    i = end;
                } else if let Some(sub) = module_file(file, &m) {
                    let text = std::fs::read_to_string(&sub).unwrap();
                    public_names(&sub, &text, &inner_prefix, "", out);
                }
            }
            ["async", "fn", n, ..]
            | [
                "fn" | "struct" | "enum" | "trait" | "const" | "static" | "type",
                n,
                ..,
            ] => {
                out.push(format!("{prefix}{}", name(n)));
            }
            _ => {}
        }
    }
}

#[test]
fn the_public_api_is_the_listed_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = root.join("src/lib.rs");
    let mut names = Vec::new();
    public_names(
        &lib,
        &std::fs::read_to_string(&lib).unwrap(),
        "",
        "",
        &mut names,
    );
    names.sort();
    names.dedup();
    let found = names.join("\n") + "\n";
    let list = root.join(LIST);
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&list, &found).unwrap();
        return;
    }
    let listed = std::fs::read_to_string(&list).unwrap_or_default();
    let added: Vec<&str> = found
        .lines()
        .filter(|n| !listed.lines().any(|l| l == *n))
        .collect();
    let removed: Vec<&str> = listed
        .lines()
        .filter(|n| !found.lines().any(|l| l == *n))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the public API changed: added {added:?}, removed {removed:?}; if on purpose, run \
         UPDATE_PUBLIC_API=1 cargo test --test integration api:: and commit {LIST}"
    );
}

#[test]
fn use_trees_are_read() {
    assert_eq!(use_names("a::{B, c::{D, E as F}, G}"), ["B", "D", "F", "G"]);
    assert_eq!(use_names("crate::x::Y"), ["Y"]);
}
