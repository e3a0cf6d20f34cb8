//! Runs the sample as a user would: ingest a small folder (with one unreadable file), ask, and
//! check the streamed answer and the citation, on the suite's model ($CBL_MODEL, else SmolLM2 in
//! the user cache; the library's own default is qwen2.5-coder-1.5b). Skipped without it unless
//! CBL_REQUIRE_MODEL=1.
use std::env;
use std::fs;
use std::path::PathBuf;
use std::process::Command;

/// The suite's model when it is there (the sample gets it as CBL_MODEL).
fn suite_model() -> Option<PathBuf> {
    let path = match env::var_os("CBL_MODEL").filter(|m| !m.is_empty()) {
        Some(m) => PathBuf::from(m),
        None => {
            let cache = env::var_os("XDG_CACHE_HOME")
                .filter(|x| !x.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| {
                    PathBuf::from(env::var_os("HOME").unwrap_or_default()).join(".cache")
                });
            cache.join("cacheblend/models/SmolLM2-135M-Instruct.Q4_1.gguf")
        }
    };
    if path.is_file() {
        return Some(path);
    }
    if env::var("CBL_REQUIRE_MODEL").map_or(false, |v| v == "1") {
        panic!("the suite's model is missing: {}", path.display());
    }
    eprintln!("skipping: the suite's model is missing: {}", path.display());
    None
}

#[test]
fn sample_ingests_a_folder_and_answers_with_citations() {
    let model = match suite_model() {
        Some(m) => m,
        None => return,
    };
    let tmp = env::temp_dir().join(format!("cbl-rust-sample-{}", std::process::id()));
    let docs = tmp.join("docs");
    fs::create_dir_all(&docs).unwrap();
    fs::write(
        docs.join("kilimanjaro.txt"),
        "Mount Kilimanjaro is a dormant volcano in Tanzania.\n",
    )
    .unwrap();
    fs::write(
        docs.join("amazon.md"),
        "The Amazon river flows through Brazil, Peru and Colombia.\n",
    )
    .unwrap();
    fs::write(docs.join("bad.txt"), b"invalid \x81\x9d utf-8\n").unwrap();

    let out = Command::new(env!("CARGO_BIN_EXE_cacheblend-sample-rust"))
        .arg(tmp.join("data"))
        .arg(&docs)
        .arg("Where is Kilimanjaro?")
        .env_remove("LD_LIBRARY_PATH") // the rpath finds the library
        .env("CBL_MODEL", &model)
        .output()
        .expect("run the sample");
    let _ = fs::remove_dir_all(&tmp);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        stdout,
        stderr
    );
    assert!(
        stdout.contains("citations:") && stdout.contains("kilimanjaro.txt"),
        "{}",
        stdout
    );
    assert!(
        stderr.contains("skipped") && stderr.contains("bad.txt"),
        "{}",
        stderr
    );
    assert!(
        stderr.contains("2 added") && stderr.contains("1 skipped"),
        "{}",
        stderr
    );
    assert!(stderr.contains("TTFT"), "{}", stderr);

    // Wrong usage exits 2.
    let usage = Command::new(env!("CARGO_BIN_EXE_cacheblend-sample-rust"))
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
}
