//! The crate's top-level modules import each other as a DAG: no module reaches itself through
//! its imports (`crate::X` paths outside unit tests), so each can be read, tested and changed
//! with only what lies below it in mind. The command line (`cli`) is the top: nothing imports it.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Top-level module -> the top-level modules its code names through `crate::`.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let relative = path.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap();
        let first = relative.components().next().unwrap().as_os_str().to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        // Unit tests may reach any module: they are no part of the layering.
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap();
        let names = graph.entry(module.clone()).or_default();
        for (at, _) in code.match_indices("crate::") {
            let rest = &code[at + "crate::".len()..];
            let named: Vec<&str> = match rest.strip_prefix('{') {
                Some(group) => group.split('}').next().unwrap().split(',').map(|p| p.trim()).collect(),
                None => vec![rest],
            };
            for path in named {
                let name: String = path.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                if !name.is_empty() && name != module {
                    names.insert(name);
                }
            }
        }
    }
    graph
}

/// A cycle through `from`, as the modules met on the way, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    fn walk(
        graph: &BTreeMap<String, BTreeSet<String>>,
        start: &str,
        at: &str,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in graph.get(at).into_iter().flatten() {
            if next == start {
                return true;
            }
            if seen.insert(next.clone()) {
                path.push(next.clone());
                if walk(graph, start, next, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    let mut path = vec![from.to_string()];
    walk(graph, from, from, &mut path, &mut BTreeSet::new()).then(|| {
        path.push(from.to_string());
        path
    })
}

#[test]
fn the_modules_import_each_other_as_a_dag() {
    let graph = imports();
    assert!(graph.contains_key("cli") && graph.contains_key("load"), "src/ was not read: {graph:?}");
    let cycles: Vec<String> = graph.keys().filter_map(|m| cycle_from(&graph, m)).map(|c| c.join(" -> ")).collect();
    assert!(cycles.is_empty(), "import cycles between modules:\n{}", cycles.join("\n"));
}

#[test]
fn only_main_imports_the_command_line() {
    let graph = imports();
    let importers: Vec<&String> =
        graph.iter().filter(|(m, names)| *m != "cli" && names.contains("cli")).map(|(m, _)| m).collect();
    assert!(importers.is_empty(), "these modules import cli (flags are read there, and only there): {importers:?}");
}

/// Reports render a result (`result::Run`): they know nothing of how it was measured, so
/// that a run, a merge and a file read back render alike (issue 38).
#[test]
fn reports_import_neither_the_engine_nor_its_recording() {
    let graph = imports();
    let report = graph.get("report").expect("src/report was read");
    let below: Vec<&str> = ["load", "record"].into_iter().filter(|m| report.contains(*m)).collect();
    assert!(below.is_empty(), "report imports {below:?}: it renders result::Run alone");
}
