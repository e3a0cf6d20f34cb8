//! Checks the hand-written declarations in src/lib.rs against capi/include/cacheblend.h:
//!  - every `CBL_API` function and every callback typedef of the header is declared in lib.rs with
//!    the same parameter and return types (C types mapped to Rust ones), and nothing extra;
//!  - every struct's size, alignment, field names and field offsets and sizes match what a C
//!    compiler computes for the header (a generated C program compiled with `$CC`, default `cc`);
//!  - every integer `#define CBL_*` and enum constant has the same value in Rust;
//!  - every `static inline` helper has a Rust version, and it sets struct_size and zeroes the rest.
use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::fs;
use std::mem::{align_of, size_of, MaybeUninit};
use std::path::PathBuf;
use std::process::Command;
use std::ptr::addr_of;

use cacheblend_sys as sys;

const RUST_SRC: &str = include_str!("../src/lib.rs");

fn header_path() -> PathBuf {
    let dir = option_env!("CACHEBLEND_SYS_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../capi/include"
            ))
        });
    dir.join("cacheblend.h")
}

// ---------------------------------------------------------------- header parsing

/// A function or callback signature with C types already mapped to Rust spelling.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Sig {
    ret: String,
    params: Vec<String>,
}

#[derive(Default, Debug)]
struct Header {
    functions: BTreeMap<String, Sig>,
    callbacks: BTreeMap<String, Sig>,
    structs: BTreeMap<String, Vec<(String, String)>>, // name -> [(field, Rust type)]
    opaque: BTreeSet<String>,
    aliases: BTreeMap<String, String>, // typedef int32_t cbl_status -> i32
    enums: BTreeMap<String, Vec<String>>, // enum type -> constants
    defines: Vec<String>,              // integer #define CBL_* names
    inline_helpers: BTreeSet<String>,
}

fn strip_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    loop {
        let block = rest.find("/*");
        let line = rest.find("//");
        match (block, line) {
            (Some(b), l) if l.map_or(true, |l| b < l) => {
                out.push_str(&rest[..b]);
                let end = rest[b..].find("*/").expect("unterminated comment") + b + 2;
                out.push(' ');
                rest = &rest[end..];
            }
            (_, Some(l)) => {
                out.push_str(&rest[..l]);
                rest = &rest[l..];
                rest = &rest[rest.find('\n').unwrap_or(rest.len())..];
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

fn is_ident(t: &str) -> bool {
    !t.is_empty()
        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !t.chars().next().unwrap().is_ascii_digit()
}

fn tokens(s: &str) -> Vec<String> {
    let spaced = s
        .replace('*', " * ")
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace(',', " , ");
    spaced.split_whitespace().map(str::to_string).collect()
}

/// Maps a C type (tokens) to its Rust spelling, e.g. `const char * const *` -> `*const *const c_char`.
fn rust_type(toks: &[String]) -> String {
    let mut base_const = false;
    let mut base = None;
    let mut i = 0;
    while i < toks.len() && toks[i] != "*" {
        match toks[i].as_str() {
            "const" => base_const = true,
            "struct" | "enum" => {}
            t => {
                assert!(base.is_none(), "two base types in {:?}", toks);
                base = Some(t.to_string());
            }
        }
        i += 1;
    }
    let base = base.unwrap_or_else(|| panic!("no base type in {:?}", toks));
    let mut ty = match base.as_str() {
        "char" => "c_char",
        "void" => "c_void",
        "bool" => "bool",
        "float" => "f32",
        "double" => "f64",
        "int" => "c_int",
        "unsigned" => "c_uint",
        "int8_t" => "i8",
        "uint8_t" => "u8",
        "int32_t" => "i32",
        "uint32_t" => "u32",
        "int64_t" => "i64",
        "uint64_t" => "u64",
        "size_t" => "usize",
        other => other,
    }
    .to_string();
    let mut pointee_const = base_const;
    while i < toks.len() {
        assert_eq!(toks[i], "*", "unexpected token in type {:?}", toks);
        let const_after = toks.get(i + 1).map_or(false, |t| t == "const");
        ty = format!("*{} {}", if pointee_const { "const" } else { "mut" }, ty);
        pointee_const = const_after;
        i += if const_after { 2 } else { 1 };
    }
    if ty == "c_void" {
        String::new() // a void return
    } else {
        ty
    }
}

/// Splits a declaration like `const char *name` into (Rust type, name).
fn split_decl(decl: &str) -> (String, String) {
    let toks = tokens(decl);
    let name = toks.last().expect("empty declaration").clone();
    assert!(
        is_ident(&name) && toks.len() >= 2,
        "unnamed declaration {:?}",
        decl
    );
    (rust_type(&toks[..toks.len() - 1]), name)
}

fn split_top(s: &str, sep: char) -> Vec<String> {
    let (mut depth, mut cur, mut out) = (0i32, String::new(), Vec::new());
    let mut prev = ' ';
    for c in s.chars() {
        match c {
            '(' | '{' | '<' => depth += 1,
            '>' if prev == '-' || prev == '=' => {} // `->` and `=>` are not brackets
            ')' | '}' | '>' => depth -= 1,
            _ => {}
        }
        prev = c;
        if c == sep && depth == 0 {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

fn c_params(list: &str) -> Vec<String> {
    let list = list.trim();
    if list == "void" || list.is_empty() {
        return Vec::new();
    }
    split_top(list, ',')
        .iter()
        .map(|p| split_decl(p).0)
        .collect()
}

/// The text between the first `open` at or after `from` and its matching close.
fn group(s: &str, from: usize, open: char, close: char) -> (usize, usize) {
    let start = s[from..].find(open).expect("no group") + from;
    let mut depth = 0;
    for (i, c) in s[start..].char_indices() {
        if c == open {
            depth += 1;
        } else if c == close {
            depth -= 1;
            if depth == 0 {
                return (start + 1, start + i);
            }
        }
    }
    panic!("unbalanced {} in {}", open, s);
}

fn parse_header(text: &str) -> Header {
    let text = strip_comments(text);
    let mut h = Header::default();
    let mut body = String::new();
    let mut in_cplusplus = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') {
            let words: Vec<&str> = t.trim_start_matches('#').split_whitespace().collect();
            match words.as_slice() {
                ["ifdef", "__cplusplus"] => in_cplusplus = true,
                ["endif", ..] => in_cplusplus = false,
                ["define", name, _value, ..]
                    if name.starts_with("CBL_") && *name != "CBL_API" && !name.contains('(') =>
                {
                    h.defines.push(name.to_string())
                }
                _ => {}
            }
        } else if !in_cplusplus {
            body.push_str(line);
            body.push('\n');
        }
    }
    // Top-level statements: split at ';' outside braces; a static inline body ends at its '}'.
    let mut stmts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in body.chars() {
        cur.push(c);
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 && cur.trim_start().starts_with("static") {
                    stmts.push(std::mem::take(&mut cur));
                }
            }
            ';' if depth == 0 => stmts.push(std::mem::take(&mut cur)),
            _ => {}
        }
    }
    assert!(cur.trim().is_empty(), "trailing text in header: {:?}", cur);
    for s in stmts {
        let s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        let s = s.trim_end_matches(';').trim();
        if let Some(rest) = s.strip_prefix("CBL_API ") {
            let open = rest.find('(').unwrap();
            let (ret, name) = split_decl(&rest[..open]);
            let (a, b) = group(rest, open, '(', ')');
            h.functions.insert(
                name,
                Sig {
                    ret,
                    params: c_params(&rest[a..b]),
                },
            );
        } else if s.starts_with("static inline") {
            let open = s.find('(').unwrap();
            h.inline_helpers.insert(tokens(&s[..open]).pop().unwrap());
        } else if let Some(rest) = s.strip_prefix("typedef struct ") {
            let name = rest.split_whitespace().next().unwrap().to_string();
            if let Some(open) = rest.find('{') {
                let (a, b) = group(rest, open, '{', '}');
                let mut fields = Vec::new();
                for decl in split_top(&rest[a..b], ';') {
                    let parts = split_top(&decl, ',');
                    let (ty, first) = split_decl(&parts[0]);
                    fields.push((first, ty.clone()));
                    for p in &parts[1..] {
                        assert!(is_ident(p), "unsupported declarator {:?}", p);
                        fields.push((p.clone(), ty.clone()));
                    }
                }
                h.structs.insert(name, fields);
            } else {
                h.opaque.insert(name);
            }
        } else if let Some(rest) = s.strip_prefix("typedef enum ") {
            let (a, b) = group(rest, 0, '{', '}');
            let names = split_top(&rest[a..b], ',')
                .iter()
                .map(|e| e.split('=').next().unwrap().trim().to_string())
                .collect();
            let name = rest[b + 1..].trim().to_string();
            h.enums.insert(name, names);
        } else if let Some(rest) = s.strip_prefix("typedef ") {
            if let Some(star) = rest.find("(*") {
                let ret = rust_type(&tokens(&rest[..star]));
                let name_end = rest[star..].find(')').unwrap() + star;
                let name = rest[star + 2..name_end].trim().to_string();
                let (a, b) = group(rest, name_end + 1, '(', ')');
                h.callbacks.insert(
                    name,
                    Sig {
                        ret,
                        params: c_params(&rest[a..b]),
                    },
                );
            } else {
                let (ty, name) = split_decl(rest);
                h.aliases.insert(name, ty);
            }
        } else {
            panic!("unrecognised header statement: {:?}", s);
        }
    }
    h
}

// ---------------------------------------------------------------- lib.rs parsing

fn norm_rust_type(t: &str) -> String {
    let t = t.replace("std::os::raw::", "").replace("core::ffi::", "");
    let t = t.split_whitespace().collect::<Vec<_>>().join(" ");
    if t == "()" {
        String::new()
    } else {
        t
    }
}

fn rust_params(list: &str) -> Vec<String> {
    split_top(list, ',')
        .iter()
        .map(|p| norm_rust_type(p.split_once(':').expect("param without type").1))
        .collect()
}

fn rust_ret(after_params: &str) -> String {
    let t = after_params.trim().trim_end_matches(',').trim();
    match t.strip_prefix("->") {
        Some(r) => norm_rust_type(r),
        None => String::new(),
    }
}

struct RustDecls {
    externs: BTreeMap<String, Sig>,
    helpers: BTreeSet<String>,
    callbacks: BTreeMap<String, Sig>,
    aliases: BTreeMap<String, String>,
    structs: BTreeMap<String, Vec<(String, String)>>,
}

fn parse_rust(src: &str) -> RustDecls {
    let src: String = src
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut d = RustDecls {
        externs: BTreeMap::new(),
        helpers: BTreeSet::new(),
        callbacks: BTreeMap::new(),
        aliases: BTreeMap::new(),
        structs: BTreeMap::new(),
    };
    // Functions: `pub fn cbl_x(...) -> R;` (extern) or `pub fn cbl_x_init(...) {` (helper).
    let mut from = 0;
    while let Some(pos) = src[from..].find("pub fn cbl_") {
        let start = from + pos + "pub fn ".len();
        let open = src[start..].find('(').unwrap() + start;
        let name = src[start..open].trim().to_string();
        let (a, b) = group(&src, open, '(', ')');
        let tail_end = src[b..].find(&[';', '{'][..]).unwrap() + b;
        if src[tail_end..].starts_with(';') {
            let sig = Sig {
                ret: rust_ret(&src[b + 1..tail_end]),
                params: rust_params(&src[a..b]),
            };
            assert!(
                d.externs.insert(name.clone(), sig).is_none(),
                "{} declared twice",
                name
            );
        } else {
            d.helpers.insert(name);
        }
        from = tail_end;
    }
    // Init helpers generated by `init_fn!`: `cbl_x_init => cbl_x,`.
    if let Some(pos) = src.find("init_fn! {") {
        let (a, b) = group(&src, pos, '{', '}');
        for entry in split_top(&src[a..b], ',') {
            d.helpers
                .insert(entry.split("=>").next().unwrap().trim().to_string());
        }
    }
    // Type aliases: `pub type cbl_x = T;` and callbacks `Option<unsafe extern "C" fn(...) -> R>`.
    let mut from = 0;
    while let Some(pos) = src[from..].find("pub type cbl_") {
        let start = from + pos + "pub type ".len();
        let eq = src[start..].find('=').unwrap() + start;
        let name = src[start..eq].trim().to_string();
        let end = src[eq..].find(';').unwrap() + eq;
        let ty = src[eq + 1..end].trim();
        if let Some(fpos) = ty.find("extern \"C\" fn") {
            let (a, b) = group(ty, fpos, '(', ')');
            let ret = rust_ret(ty[b + 1..].trim_end().trim_end_matches('>'));
            d.callbacks.insert(
                name,
                Sig {
                    ret,
                    params: rust_params(&ty[a..b]),
                },
            );
        } else {
            d.aliases.insert(name, norm_rust_type(ty));
        }
        from = end;
    }
    // Structs with named fields: `pub struct cbl_x { pub f: T, ... }`.
    let mut from = 0;
    while let Some(pos) = src[from..].find("pub struct cbl_") {
        let start = from + pos + "pub struct ".len();
        let open = src[start..].find('{').unwrap() + start;
        let name = src[start..open].trim().to_string();
        let (a, b) = group(&src, open, '{', '}');
        let fields = split_top(&src[a..b], ',')
            .iter()
            .filter_map(|f| f.strip_prefix("pub "))
            .map(|f| {
                let (n, t) = f.split_once(':').unwrap();
                (n.trim().to_string(), norm_rust_type(t))
            })
            .collect();
        d.structs.insert(name, fields);
        from = b;
    }
    d
}

// ---------------------------------------------------------------- Rust-side layout and values

struct RustLayout {
    size: usize,
    align: usize,
    fields: Vec<(&'static str, usize, usize)>, // name, offset, size
}

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

macro_rules! layouts {
    ($($s:ident { $($f:ident),* $(,)? })*) => {{
        let mut m = BTreeMap::new();
        $(
            let u = MaybeUninit::<sys::$s>::uninit();
            let base = u.as_ptr();
            // SAFETY: addr_of! on fields of an uninitialised value computes addresses only.
            let fields = vec![$(unsafe {
                let p = addr_of!((*base).$f);
                (stringify!($f), p as usize - base as usize, size_of_pointee(p))
            }),*];
            m.insert(stringify!($s).to_string(),
                     RustLayout { size: size_of::<sys::$s>(), align: align_of::<sys::$s>(), fields });
        )*
        m
    }};
}

fn rust_layouts() -> BTreeMap<String, RustLayout> {
    layouts! {
        cbl_model_params { struct_size, vocab_only }
        cbl_runtime_params { struct_size, model_path, embedder_path, data_dir, kv_budget_bytes,
                             n_threads, device, no_embedder, must_exist, kv_remote,
                             max_active_requests, max_queued_requests, session_memory_bytes }
        cbl_progress { struct_size, phase, done, total, current, message }
        cbl_ingest_params { struct_size, collection, metadata_json, format, chunk_tokens,
                            precompute_kv, progress, progress_user_data, follow_symlinks,
                            max_file_bytes, max_file_seconds }
        cbl_ingest_report { struct_size, files_seen, added, updated, unchanged, removed, skipped,
                            chunks_added, chunks_removed, embedded, kv_computed, kv_deleted }
        cbl_corpus_stats { struct_size, documents, chunks, kv_entries, kv_bytes, vectors,
                           catalog_bytes, index_bytes, kv_budget_bytes, disk_free_bytes }
        cbl_search_params { struct_size, k, mode, collection, uri_prefix, metadata_keys,
                            metadata_values, n_metadata }
        cbl_hit { struct_size, chunk_id, uri, start, end, score, text, text_len, n_tokens, page,
                  heading }
        cbl_document_info { struct_size, uri, kind, collection, metadata_json, n_chunks,
                            n_kv_chunks, source_bytes, mtime_ns, ingested_at, kv_bytes }
        cbl_kvstore_params { struct_size, budget_bytes, direct_io, kv_remote }
        cbl_session_params { struct_size, n_threads, n_ctx, mode, recompute_ratio, auto_ratio,
                             kv_format, calibrated_ratio, device }
        cbl_generate_params { struct_size, max_tokens, temperature, seed, on_token, user_data,
                              top_logprobs, ignore_eog, top_k, top_p, min_p, repeat_penalty,
                              repeat_last_n, frequency_penalty, presence_penalty }
        cbl_prompt_params { struct_size, chat, system, parse_special }
        cbl_ask_params { struct_size, k, search_mode, collection, uri_prefix, max_tokens,
                         temperature, seed, on_token, user_data, compare_full, top_logprobs,
                         metadata_keys, metadata_values, n_metadata, top_k, top_p, min_p,
                         repeat_penalty, repeat_last_n, frequency_penalty, presence_penalty }
        cbl_stats { struct_size, mode, ratio, ttft_ms, prefill_ms, load_ms, load_wait_ms,
                    select_ms, compute_ms, search_ms, store_ms, decode_tokens_per_s, full_ttft_ms,
                    prompt_tokens, tokens_reused, tokens_recomputed, tokens_missed, bytes_loaded,
                    chunks_hit, chunks_missed, chunks_used, chunks_dropped, generated_tokens,
                    stop_reason, search_mode, n_ctx, notice, tokens_remote, bytes_remote,
                    dense_ms, relocate_ms, queue_ms }
    }
}

macro_rules! values {
    ($($c:ident),* $(,)?) => {{
        let mut m = BTreeMap::new();
        $( m.insert(stringify!($c).to_string(), sys::$c as i64); )*
        m
    }};
}

fn rust_constants() -> BTreeMap<String, i64> {
    values! {
        CBL_OK, CBL_ERROR, CBL_INVALID_ARG, CBL_MISUSE, CBL_NOMEM, CBL_IO, CBL_CORRUPT, CBL_FORMAT,
        CBL_UNSUPPORTED, CBL_DEVICE, CBL_ABORTED, CBL_RANGE, CBL_CATALOG, CBL_INTERNAL,
        CBL_BUSY,
        CBL_IO_READ, CBL_IO_WRITE, CBL_DEVICE_OOM,
        CBL_VERSION_MAJOR, CBL_VERSION_MINOR, CBL_VERSION_PATCH, CBL_VERSION_NUMBER,
        CBL_LOG_LEVEL_DEBUG, CBL_LOG_LEVEL_INFO, CBL_LOG_LEVEL_WARN, CBL_LOG_LEVEL_ERROR,
        CBL_MODE_DEFAULT, CBL_MODE_FULL, CBL_MODE_PREFIX, CBL_MODE_REUSE, CBL_MODE_BLEND,
        CBL_SEARCH_DEFAULT, CBL_SEARCH_HYBRID, CBL_SEARCH_DENSE, CBL_SEARCH_BM25,
        CBL_KV_DEFAULT, CBL_KV_F16, CBL_KV_Q8, CBL_KV_EXACT,
        CBL_DOC_DEFAULT, CBL_DOC_TEXT, CBL_DOC_MARKDOWN, CBL_DOC_HTML,
        CBL_STOP_NONE, CBL_STOP_EOG, CBL_STOP_LENGTH, CBL_STOP_CONTEXT, CBL_STOP_CALLBACK,
        CBL_NAMES_MODE, CBL_NAMES_SEARCH, CBL_NAMES_KV_FORMAT, CBL_NAMES_DOC, CBL_NAMES_STOP,
        CBL_MAX_STRUCT_SIZE, CBL_DEFAULT_MAX_FILE_BYTES,
    }
}

/// Sizes of the scalar types Rust maps C types to (for aliases and enum types).
fn rust_scalar_size(t: &str) -> usize {
    match t {
        "i32" | "u32" | "c_uint" | "c_int" | "f32" => 4,
        "i64" | "u64" | "f64" => 8,
        "usize" => size_of::<usize>(),
        other => panic!("no size for {}", other),
    }
}

// ---------------------------------------------------------------- the C side

/// Compiles and runs a C program that prints `S name size align`, `F struct field offset size`,
/// `T type size` and `C name value` lines for everything in `h`.
fn c_facts(h: &Header) -> Vec<String> {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"cacheblend.h\"\n\
         #define FIELD(s, f) printf(\"F %s %s %zu %zu\\n\", #s, #f, offsetof(s, f), sizeof(((s *)0)->f))\n\
         int main(void) {\n",
    );
    for (s, fields) in &h.structs {
        c += &format!(
            "  printf(\"S {0} %zu %zu\\n\", sizeof({0}), _Alignof({0}));\n",
            s
        );
        for (f, _) in fields {
            c += &format!("  FIELD({}, {});\n", s, f);
        }
    }
    for t in h.aliases.keys().chain(h.enums.keys()) {
        c += &format!("  printf(\"T {0} %zu\\n\", sizeof({0}));\n", t);
    }
    for name in h
        .defines
        .iter()
        .filter(|n| *n != "CBL_VERSION_STRING")
        .chain(h.enums.values().flatten())
    {
        c += &format!("  printf(\"C {0} %lld\\n\", (long long)({0}));\n", name);
    }
    c += "  printf(\"V %s\\n\", CBL_VERSION_STRING);\n  return 0;\n}\n";

    let dir = env::temp_dir().join(format!("cacheblend-sys-header-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    fs::write(&src, c).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let inc = header_path().parent().unwrap().to_path_buf();
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I"])
        .arg(&inc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} (set CC): {}", cc, e));
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        cc,
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let _ = fs::remove_dir_all(&dir);
    String::from_utf8(run.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

// ---------------------------------------------------------------- the checks

fn load() -> (Header, RustDecls) {
    let path = header_path();
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {}", path.display(), e));
    (parse_header(&text), parse_rust(RUST_SRC))
}

#[test]
fn header_parser_sees_the_whole_api() {
    let (h, _) = load();
    // Guards against a parser that silently finds nothing.
    assert!(
        h.functions.len() >= 40,
        "only {} functions parsed",
        h.functions.len()
    );
    assert!(
        h.structs.len() >= 12 && h.callbacks.len() == 3,
        "{:?}",
        h.structs.keys()
    );
    assert_eq!(
        h.functions["cbl_session_prefill_chunks"].params[1],
        "*const *const c_char"
    );
    assert_eq!(
        h.functions["cbl_model_load"].params[2],
        "*mut *mut cbl_model"
    );
    assert_eq!(h.functions["cbl_session_free"].ret, "");
    assert!(h.structs["cbl_ingest_report"]
        .iter()
        .any(|(f, _)| f == "skipped"));
}

#[test]
fn every_function_is_declared_with_the_header_signature() {
    let (h, r) = load();
    for (name, sig) in &h.functions {
        let rs = r
            .externs
            .get(name)
            .unwrap_or_else(|| panic!("{} is not declared in lib.rs", name));
        assert_eq!(rs, sig, "signature of {}", name);
    }
    for name in r.externs.keys() {
        assert!(
            h.functions.contains_key(name),
            "{} is declared in lib.rs but not in the header",
            name
        );
    }
    for (name, sig) in &h.callbacks {
        let rs = r
            .callbacks
            .get(name)
            .unwrap_or_else(|| panic!("callback type {} missing", name));
        assert_eq!(rs, sig, "callback type {}", name);
    }
    for (name, ty) in &h.aliases {
        assert_eq!(r.aliases.get(name), Some(ty), "typedef {}", name);
    }
    for name in h.enums.keys() {
        assert!(
            r.aliases.contains_key(name),
            "enum type {} has no Rust alias",
            name
        );
    }
    for name in &h.opaque {
        assert!(
            RUST_SRC.contains(&format!("{},", name)) || RUST_SRC.contains(&format!("{})", name)),
            "opaque handle {} missing",
            name
        );
    }
    for name in &h.inline_helpers {
        assert!(
            r.helpers.contains(name),
            "static inline {} has no Rust version",
            name
        );
    }
}

#[test]
fn struct_fields_have_the_header_types() {
    let (h, r) = load();
    for (name, fields) in &h.structs {
        let rs = r
            .structs
            .get(name)
            .unwrap_or_else(|| panic!("struct {} missing", name));
        assert_eq!(rs, fields, "fields of {}", name);
    }
}

#[test]
fn layouts_and_constants_match_the_c_compiler() {
    let (h, r) = load();
    let facts = c_facts(&h);
    let layouts = rust_layouts();
    let consts = rust_constants();
    let mut seen_structs = BTreeSet::new();
    let mut seen_consts = BTreeSet::new();
    let mut checked = 0;
    for line in &facts {
        let w: Vec<&str> = line.split(' ').collect();
        let num = |i: usize| {
            w[i].parse::<i64>()
                .unwrap_or_else(|_| panic!("bad line {:?}", line))
        };
        match w[0] {
            "S" => {
                let l = layouts
                    .get(w[1])
                    .unwrap_or_else(|| panic!("no Rust layout list for {}", w[1]));
                assert_eq!(
                    (l.size as i64, l.align as i64),
                    (num(2), num(3)),
                    "size/align of {}",
                    w[1]
                );
                seen_structs.insert(w[1].to_string());
            }
            "F" => {
                let l = &layouts[w[1]];
                let f = l.fields.iter().find(|f| f.0 == w[2]);
                let f =
                    f.unwrap_or_else(|| panic!("{}.{} missing from the layout list", w[1], w[2]));
                assert_eq!(
                    (f.1 as i64, f.2 as i64),
                    (num(3), num(4)),
                    "offset/size of {}.{}",
                    w[1],
                    w[2]
                );
                checked += 1;
            }
            "T" => {
                let ty = &r.aliases[w[1]];
                assert_eq!(rust_scalar_size(ty) as i64, num(2), "size of {}", w[1]);
            }
            "C" => {
                let v = consts
                    .get(w[1])
                    .unwrap_or_else(|| panic!("constant {} missing from lib.rs", w[1]));
                assert_eq!(*v, num(2), "value of {}", w[1]);
                seen_consts.insert(w[1].to_string());
            }
            "V" => assert_eq!(sys::CBL_VERSION_STRING, w[1]),
            _ => panic!("bad line {:?}", line),
        }
    }
    // Both directions: nothing in the Rust lists that the header lacks.
    assert_eq!(
        seen_structs,
        layouts.keys().cloned().collect::<BTreeSet<_>>()
    );
    assert_eq!(seen_consts, consts.keys().cloned().collect::<BTreeSet<_>>());
    let listed: usize = layouts.values().map(|l| l.fields.len()).sum();
    assert_eq!(
        checked, listed,
        "Rust layout lists name fields the header does not have"
    );
    assert_eq!(
        seen_structs.len(),
        r.structs.len(),
        "lib.rs has structs the header lacks"
    );
}

#[test]
fn init_helpers_zero_the_struct_and_set_its_size() {
    let mut p: sys::cbl_ask_params = unsafe { std::mem::zeroed() };
    p.k = 7;
    p.struct_size = 3;
    sys::cbl_ask_params_init(&mut p);
    assert_eq!(p.struct_size, size_of::<sys::cbl_ask_params>());
    assert_eq!(p.k, 0);
    assert!(p.on_token.is_none() && p.collection.is_null());
    let s = sys::cbl_stats::default();
    assert_eq!(s.struct_size, size_of::<sys::cbl_stats>());
    assert!(s.notice.is_null());
}

#[test]
fn linked_library_matches_the_header_major_version() {
    let n = unsafe { sys::cbl_version_number() };
    assert_eq!(
        n / 1000000,
        sys::CBL_VERSION_MAJOR,
        "library {} vs header {}",
        n,
        sys::CBL_VERSION_NUMBER
    );
}
