//! The import rules (ARCHITECTURE.md "Layers"): every top-level module has a rank and
//! imports only lower ranks, so data flows one way and no import cycle forms. Read from the source itself — every `crate::…` path
//! and every `super::…` path that climbs out of its top-level module, in code (comments
//! aside) — so the boundary cannot rot silently.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every top-level module of the crate with its rank, lowest first. A module may import
/// only modules of a strictly lower rank, so no import cycle can form between top-level
/// modules and no lower layer names the request path. ARCHITECTURE.md "Layers" draws this
/// table; `every_module_has_a_rule` checks `src/lib.rs` declares no module missing here.
const RANKS: &[(&str, u8)] = &[
    // Foundations: no crate imports at all.
    ("boxed", 0),
    ("clock", 0),
    ("error", 0),
    ("secret", 0),
    ("lock", 0),
    ("fastmap", 0),
    // The validated configuration and its value types (limits, prices).
    ("config", 1),
    // Pure descriptions over the config: routing tables and policy, metric names and the
    // OTLP exporter, wire formats.
    ("routing", 2),
    ("telemetry", 2),
    ("wire", 2),
    // I/O below the request: the client-facing HTTP server, the durable store.
    ("http", 3),
    ("store", 3),
    // Runtime state and money: balances, channel state and breakers, the upstream client.
    ("billing", 4),
    ("state", 4),
    ("upstream", 4),
    // Per-request admission state: sticky bindings, rate limits.
    ("affinity", 5),
    ("limits", 5),
    // The live state replicas share (R17), over everything it mirrors.
    ("shared", 6),
    // The request path.
    ("relay", 7),
    // The operator's surfaces and the process around everything.
    ("admin_views", 8),
    ("admin", 9),
    ("app", 10),
];

/// Modules held to less than their rank allows: `wire` is the pure wire layer (its own
/// `wire_does_no_io` test), naming nothing but the config types and the error type.
fn narrower(module: &str) -> Option<&'static [&'static str]> {
    match module {
        "wire" => Some(&["config", "error"]),
        _ => None,
    }
}

fn rank(module: &str) -> Option<u8> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

/// The top-level modules `module` must not import: every one of its own rank or above,
/// and for a narrower module everything outside its list.
fn forbidden(module: &str) -> Vec<&'static str> {
    let own = rank(module).unwrap_or(u8::MAX);
    RANKS
        .iter()
        .filter(|(m, r)| {
            *m != module && (*r >= own || narrower(module).is_some_and(|ok| !ok.contains(m)))
        })
        .map(|(m, _)| *m)
        .collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The files of top-level module `m`: `src/m.rs` and everything under `src/m/`.
fn files_of(m: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = src().join(format!("{m}.rs"));
    if file.exists() {
        out.push(file);
    }
    let dir = src().join(m);
    if dir.is_dir() {
        rust_files(&dir, &mut out);
    }
    out
}

/// How many `super::` a file can climb before it leaves its top-level module: `src/m.rs`
/// and `src/m/mod.rs` are the module itself (0), `src/m/x.rs` one below it, and so on. A
/// test file included with `#[path]` (`x_tests.rs`, `tests/…`) sits one level deeper than
/// its place in the tree says, so it is given the larger depth.
fn depth(file: &Path) -> usize {
    let rel = file.strip_prefix(src()).unwrap();
    let parts: Vec<_> = rel
        .iter()
        .map(|c| c.to_string_lossy().to_string())
        .collect();
    let mut depth = parts.len() - 1;
    if parts.last().is_some_and(|f| f == "mod.rs") {
        depth -= 1;
    }
    let name = parts.last().cloned().unwrap_or_default();
    if name.contains("test") || parts.iter().any(|p| p == "tests") {
        depth += 1;
    }
    depth
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> String {
    s.trim()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// The top-level modules named by one line of code (comments and strings stripped roughly).
fn named(line: &str, depth: usize) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + 7..];
        if let Some(group) = after.strip_prefix('{') {
            let inner = group.split('}').next().unwrap_or("");
            out.extend(inner.split(',').map(ident));
        } else {
            out.push(ident(after));
        }
        rest = after;
    }
    // `super::super::x` from a file `depth` levels below its top-level module names the
    // crate root's `x` once it climbs more than `depth` levels.
    let mut rest = code;
    while let Some(i) = rest.find("super::") {
        let mut after = &rest[i..];
        let mut count = 0;
        while let Some(a) = after.strip_prefix("super::") {
            count += 1;
            after = a;
        }
        if count > depth {
            out.push(ident(after));
        }
        rest = after;
    }
    out
}

#[test]
fn no_module_imports_one_of_its_rank_or_above() {
    let mut broken = Vec::new();
    for (m, _) in RANKS {
        let no = forbidden(m);
        for f in files_of(m) {
            let text = std::fs::read_to_string(&f).unwrap();
            let level = depth(&f);
            for (n, line) in text.lines().enumerate() {
                for name in named(line, level) {
                    if no.contains(&name.as_str()) {
                        broken.push(format!(
                            "{}:{}: `{m}` must not import `{name}`: {}",
                            f.display(),
                            n + 1,
                            line.trim()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "import rules broken (a module imports only lower ranks; see RANKS and \
         ARCHITECTURE.md, Layers):\n{}",
        broken.join("\n")
    );
}

/// `wire` is pure: no I/O, no clock (the caller passes time in).
#[test]
fn wire_does_no_io() {
    let io = [
        "tokio::",
        "hyper::",
        "std::net",
        "std::fs",
        "std::time::Instant",
        "SystemTime",
    ];
    let mut broken = Vec::new();
    // Test modules may read their fixtures from disk; the production code may not.
    let is_test = |f: &std::path::Path| f.components().any(|c| c.as_os_str() == "tests");
    for f in files_of("wire").into_iter().filter(|f| !is_test(f)) {
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if let Some(what) = io.iter().find(|w| code.contains(*w)) {
                broken.push(format!("{}:{}: `{what}` in wire", f.display(), n + 1));
            }
        }
    }
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// Every module declared in `src/lib.rs` is in the table, so a new one gets a rule.
#[test]
fn every_module_has_a_rule() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> = lib
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';'))
        .collect();
    let known: BTreeSet<&str> = RANKS.iter().map(|(m, _)| *m).collect();
    let missing: Vec<&&str> = declared.difference(&known).collect();
    assert!(
        missing.is_empty(),
        "add {missing:?} to RANKS in tests/layers.rs with its rank"
    );
    let gone: Vec<&&str> = known.difference(&declared).collect();
    assert!(
        gone.is_empty(),
        "RANKS names {gone:?}, which src/lib.rs does not declare"
    );
}

/// The mock upstream is not part of the gateway's library: it is the `switchyard-mock` crate
/// (`examples/mock/`), which only tests, examples and benchmarks depend on.
#[test]
fn the_mock_is_not_in_the_production_library() {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    assert!(!lib
        .lines()
        .any(|l| l.trim_start().starts_with("pub mod mock")));
    assert!(!src().join("mock").exists(), "src/mock/ is back");
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|d| d.split("[dev-dependencies]").next())
        .unwrap_or_default();
    assert!(
        !deps.contains("switchyard-mock"),
        "the gateway itself must not depend on the mock"
    );
}

/// The checker itself finds what it must: a path, a group, a climb out of the module.
#[test]
fn the_reader_sees_every_form() {
    assert_eq!(named("use crate::relay::gateway::Gateway;", 1), ["relay"]);
    assert_eq!(
        named("use crate::{http::body, state::Snapshot};", 1),
        ["http", "state"]
    );
    assert_eq!(named("let x = crate::upstream::build(o);", 2), ["upstream"]);
    assert_eq!(named("use super::super::relay::x;", 1), ["relay"]);
    assert!(named("use super::channel::X;", 1).is_empty());
    assert!(named("// see crate::relay::intake::entry", 1).is_empty());
}

/// Every behaviour id cited in the code — a specification id (`R10.2`, a group `R4`) or a
/// `B-…` id — has a heading in docs/behaviour.md, and no heading is there twice: the
/// behaviour contract lives in the repository.
#[test]
fn every_cited_requirement_id_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/behaviour.md")).unwrap();
    let mut headings = BTreeSet::new();
    let mut twice = Vec::new();
    for line in doc.lines().filter(|l| l.starts_with('#')) {
        if let Some(id) = behaviour_ids(line).into_iter().next() {
            if !headings.insert(id.clone()) {
                twice.push(id);
            }
        }
    }
    assert!(
        twice.is_empty(),
        "docs/behaviour.md has these headings twice: {twice:?}"
    );
    let mut files = Vec::new();
    for dir in ["src", "tests", "examples", "scripts"] {
        text_files(&root.join(dir), &mut files);
    }
    let mut missing = std::collections::BTreeMap::<String, String>::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for id in behaviour_ids(line) {
                if !headings.contains(&id) {
                    let at = format!("{}:{}", f.strip_prefix(root).unwrap().display(), n + 1);
                    missing.entry(id).or_insert(at);
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ids cited without a section in docs/behaviour.md (first citation of each):\n{}",
        missing
            .iter()
            .map(|(id, at)| format!("  {id}  ({at})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(headings.len() > 100, "the reader found too few headings");
}

/// The source and documentation files that can cite an id (not fixtures or data).
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            text_files(&path, out);
        } else if path
            .extension()
            .is_some_and(|x| ["rs", "py", "sh", "md"].iter().any(|k| x == *k))
        {
            out.push(path);
        }
    }
}

/// The behaviour ids in one line: `R` and digits with optional `.digits` parts, as a word of
/// its own (`R16.4`, `R4`; not `R2D2`, `xR1`, `R1x`), and `B-` with lowercase words
/// (`B-commit-point`; not `B-tree`, a word of English).
fn behaviour_ids(line: &str) -> Vec<String> {
    let bytes = line.as_bytes();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = i == 0 || !word(bytes[i - 1]);
        if starts && bytes[i] == b'R' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j].is_ascii_digit() {
                j += 1;
            }
            // `.digits` parts; a trailing `.` (end of a sentence) is not part of the id.
            while j + 1 < bytes.len() && bytes[j] == b'.' && bytes[j + 1].is_ascii_digit() {
                j += 1;
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
            }
            if j == bytes.len() || !word(bytes[j]) {
                out.push(line[i..j].to_string());
            }
            i = j;
        } else if starts && bytes[i..].starts_with(b"B-") {
            let mut j = i + 2;
            while j < bytes.len()
                && (bytes[j].is_ascii_lowercase()
                    || bytes[j].is_ascii_digit()
                    || (bytes[j] == b'-'
                        && bytes.get(j + 1).is_some_and(|c| c.is_ascii_lowercase())))
            {
                j += 1;
            }
            let id = &line[i..j];
            if j > i + 2
                && (j == bytes.len() || !word(bytes[j]))
                && id != "B-tree"
                && id != "B-trees"
            {
                out.push(id.to_string());
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

/// The id reader takes what the code cites and nothing else.
#[test]
fn the_id_reader_sees_ids_and_only_ids() {
    assert_eq!(
        behaviour_ids("(R4.1–R4.3, R4.8, R5; R16.4)."),
        ["R4.1", "R4.3", "R4.8", "R5", "R16.4"]
    );
    assert_eq!(behaviour_ids("### R10.2 — key"), ["R10.2"]);
    assert_eq!(
        behaviour_ids("see B-commit-point, B-tree and B-"),
        ["B-commit-point"]
    );
    assert!(behaviour_ids("R2D2 xR1 R1x r1.1 CR2 \"R\"").is_empty());
}

/// The ranked table forbids what it must: an upward import, a sideways one within a rank,
/// and anything outside a narrower module's list; it allows a downward one.
#[test]
fn the_table_forbids_upward_and_sideways_imports() {
    assert!(
        forbidden("config").contains(&"limits"),
        "config -> limits is upward"
    );
    assert!(forbidden("telemetry").contains(&"routing"), "same rank");
    assert!(
        forbidden("admin").contains(&"app"),
        "admin -> app is upward"
    );
    assert!(
        !forbidden("relay").contains(&"state"),
        "relay -> state is downward"
    );
    assert!(!forbidden("app").contains(&"admin"));
    assert!(
        forbidden("wire").contains(&"clock"),
        "wire is narrower than its rank"
    );
    assert!(!forbidden("wire").contains(&"config"));
    assert!(
        forbidden("clock").contains(&"lock"),
        "rank 0 imports nothing"
    );
}

/// Every source or test file that docs/behaviour.md, ARCHITECTURE.md or README.md names
/// (`src/…`, `tests/…`, `examples/…`) exists, so a move cannot leave the contract pointing
/// at nothing.
#[test]
fn every_file_the_docs_name_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = BTreeSet::new();
    let mut seen = 0;
    for doc in ["docs/behaviour.md", "ARCHITECTURE.md", "README.md"] {
        let text = std::fs::read_to_string(root.join(doc)).unwrap();
        for quoted in text.split('`').skip(1).step_by(2) {
            let path = quoted.split("::").next().unwrap_or("");
            let named = ["src/", "tests/", "examples/"]
                .iter()
                .any(|p| path.starts_with(p))
                && [".rs", ".py"].iter().any(|x| path.ends_with(x));
            if named {
                seen += 1;
                if !root.join(path).exists() {
                    missing.insert(format!("{doc}: {path}"));
                }
            }
        }
    }
    assert!(missing.is_empty(), "named but missing:\n{missing:#?}");
    assert!(seen > 100, "the reader found too few file names ({seen})");
}
