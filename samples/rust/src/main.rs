//! Minimal Rust app on libcacheblend: ingest a folder, answer a question from it with citations.
//!   cacheblend-sample-rust DATA_DIR FOLDER "QUESTION"
//! The model comes from $CBL_MODEL or the default location (scripts/fetch-model.sh puts it there).
use std::io::Write;
use std::process::ExitCode;

use cacheblend::{AskOptions, IngestOptions, Runtime, RuntimeOptions, SessionOptions};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: {} DATA_DIR FOLDER QUESTION", args[0]);
        return ExitCode::from(2);
    }
    if cacheblend::version_number() / 1000000 != cacheblend::sys::CBL_VERSION_MAJOR {
        eprintln!(
            "binding {} but library {}: major versions differ",
            cacheblend::sys::CBL_VERSION_STRING,
            cacheblend::version()
        );
        return ExitCode::FAILURE;
    }
    match run(&args[1], &args[2], &args[3]) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", e);
            ExitCode::FAILURE
        }
    }
}

fn run(data_dir: &str, folder: &str, question: &str) -> Result<(), cacheblend::Error> {
    let rt = Runtime::open(&RuntimeOptions::new().data_dir(data_dir))?;
    let notice = rt.notice();
    if !notice.is_empty() {
        eprintln!("note: {}", notice);
    }

    let mut ingest = IngestOptions::new().progress(|p| {
        if p.phase == "skip" {
            eprintln!("skipped {}: {}", p.current, p.message);
        }
        true
    });
    let report = rt.ingest_path(folder, &mut ingest)?;
    eprintln!(
        "ingested: {} added, {} updated, {} unchanged, {} skipped",
        report.added, report.updated, report.unchanged, report.skipped
    );

    let mut session = rt.session(&SessionOptions::new())?;
    drop(rt); // the session keeps what it needs

    let stdout = std::io::stdout();
    let answer = session.ask(question, &AskOptions::new().max_tokens(64), |text| {
        let mut out = stdout.lock();
        // A closed stdout stops generating.
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .is_ok()
    })?;
    println!("\n\ncitations:");
    for (i, hit) in answer.citations.iter().enumerate() {
        println!("[{}] {}:{}-{}", i + 1, hit.uri, hit.start, hit.end);
    }
    let st = &answer.stats;
    eprintln!(
        "TTFT {:.1} ms, {} prompt tokens ({} reused, {} recomputed)",
        st.ttft_ms, st.prompt_tokens, st.tokens_reused, st.tokens_recomputed
    );
    Ok(())
}
