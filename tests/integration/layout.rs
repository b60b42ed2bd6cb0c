//! The crate's modules depend on each other one way only:
//! cluster / server → planner / codec → catalog → table functions / format → table →
//! physical_plan → session → config / name → error → location / progress /
//! cancel. A `use crate::x` against that direction fails this test, naming
//! the file. And the library needs none of the cluster engines, the CLI
//! or its terminal crates unless their features are on.

use std::path::Path;

/// Each top-level module and its layer; a module may use modules of lower
/// layers only.
const LAYERS: &[(&str, u8)] = &[
    ("location", 0),
    ("progress", 0),
    ("cancel", 0),
    ("error", 1),
    ("config", 2),
    ("name", 2),
    ("session", 3),
    ("cloud", 3),
    ("physical_plan", 4),
    ("table", 5),
    ("udtf", 6),
    ("udf", 6),
    ("format", 6),
    ("catalog", 7),
    ("planner", 8),
    ("codec", 8),
    ("cluster", 9),
    ("server", 9),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

/// The top-level module `file` (relative to `src/`) belongs to.
fn module_of(file: &Path) -> String {
    let first = file
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn identifier(text: &str) -> String {
    text.trim_start()
        .chars()
        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
        .collect()
}

/// The top-level modules `text` reaches through `crate::` paths, grouped
/// imports (`use crate::{a::X, b::{Y, Z}};`, over several lines) included.
fn used_modules(text: &str) -> Vec<String> {
    let mut used = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        let Some(group) = rest.strip_prefix('{') else {
            used.push(identifier(rest));
            continue;
        };
        // Each item at depth 1 of the group starts with a module name.
        let mut depth = 1;
        let mut item_start = true;
        for (j, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 1 => break,
                '}' => depth -= 1,
                ',' if depth == 1 => item_start = true,
                c if item_start && !c.is_whitespace() => {
                    used.push(identifier(&group[j..]));
                    item_start = false;
                }
                _ => {}
            }
        }
    }
    used
}

#[test]
fn grouped_imports_are_seen() {
    let text =
        "use crate::{\n    planner::X,\n    table::{a::Y, Z},\n};\nfn f() { crate::session::g() }";
    assert_eq!(used_modules(text), ["planner", "table", "session"]);
}

#[test]
fn modules_depend_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut violations = Vec::new();
    let mut edges = 0;
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let from = module_of(relative);
        let Some(from_layer) = layer(&from) else {
            continue; // lib.rs and the binary sit above everything
        };
        let text: String = std::fs::read_to_string(file)
            .unwrap()
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for used in used_modules(&text) {
            let Some(to_layer) = layer(&used) else {
                continue; // root items (re-exports)
            };
            if used == from {
                continue;
            }
            edges += 1;
            if to_layer >= from_layer {
                violations.push(format!("{}: {from} uses {used}", relative.display()));
            }
        }
    }
    assert!(
        edges > 20,
        "only {edges} cross-module uses found: is the scan broken?"
    );
    assert!(
        violations.is_empty(),
        "dependencies against the layering:\n{}",
        violations.join("\n")
    );
}

/// The dependencies only the cluster engines and the binaries use are
/// optional, each enabled by its feature alone: `default-features = false`
/// builds the library without them (CI checks that it compiles: `make
/// check-lean`).
#[test]
fn integrations_are_behind_features() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let features = manifest
        .split("[features]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [features] table");
    let dependencies = manifest
        .split("\n[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .expect("a [dependencies] table");
    for (dependency, feature) in [
        ("ballista", &["ballista"][..]),
        ("ballista-core", &["ballista"]),
        ("ballista-executor", &["ballista"]),
        ("ballista-scheduler", &["ballista"]),
        ("datafusion-distributed", &["distributed"]),
        ("tonic", &["distributed", "server"]),
        ("tokio-stream", &["distributed", "server"]),
        ("arrow-flight", &["server"]),
        ("base64", &["server"]),
        ("pgwire", &["server"]),
        ("arrow-pg", &["server"]),
        ("datafusion-pg-catalog", &["server"]),
        ("datafusion-cli", &["cli"]),
        ("rustyline", &["cli"]),
        ("clap", &["cli"]),
        ("tracing-subscriber", &["cli"]),
        ("lance-namespace-impls", &["namespaces"]),
        ("datafusion-ffi", &["python-ffi"]),
    ] {
        let line = dependencies
            .lines()
            .find(|l| l.starts_with(&format!("{dependency} = ")))
            .unwrap_or_else(|| panic!("{dependency} is not a dependency"));
        assert!(
            line.contains("optional = true"),
            "{dependency} is not optional: {line}"
        );
        let enabling: Vec<&str> = features
            .lines()
            .filter(|l| l.contains(&format!("\"dep:{dependency}\"")))
            .map(|l| l.split(" = ").next().unwrap_or_default())
            .collect();
        assert_eq!(enabling, feature, "{dependency} is enabled by {enabling:?}");
    }
    // The REST namespace server (only the tests run one) is a feature too.
    let namespaces = dependencies
        .lines()
        .find(|l| l.starts_with("lance-namespace-impls = "))
        .expect("lance-namespace-impls is a dependency");
    assert!(
        !namespaces.contains("rest-adapter"),
        "the REST server is not optional: {namespaces}"
    );
    assert!(
        features.contains("rest-server = [\"namespaces\", \"lance-namespace-impls/rest-adapter\"]"),
        "no rest-server feature"
    );
    for binary in ["lance-sql", "lance-cluster"] {
        let section = manifest
            .split("[[bin]]")
            .find(|s| s.contains(&format!("name = \"{binary}\"")))
            .unwrap_or_else(|| panic!("no [[bin]] {binary}"));
        assert!(
            section.contains("required-features = [\"cli\"]"),
            "{binary} needs the cli feature"
        );
    }
}
