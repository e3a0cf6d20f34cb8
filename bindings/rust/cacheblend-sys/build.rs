// Finds libcacheblend and tells rustc how to link it:
//  1. $CBL_BUILD_DIR: a CMake build tree holding libcacheblend.so (the header comes from
//     $CBL_INCLUDE_DIR, else the source tree this crate sits in);
//  2. else `pkg-config --libs --cflags cacheblend` (set PKG_CONFIG_PATH for a non-system prefix;
//     $PKG_CONFIG names another pkg-config binary).
// Every library directory is also added as an rpath so binaries and tests run without
// LD_LIBRARY_PATH. Link arguments do not reach dependent crates, so the directories are published
// as `DEP_CACHEBLEND_LIB_DIRS` (and the header's folder as `DEP_CACHEBLEND_INCLUDE`) for their
// build scripts to add the same rpath (see ../cacheblend/build.rs).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Found {
    lib_dirs: Vec<String>,
    libs: Vec<String>,
    link_args: Vec<String>,
    include_dirs: Vec<String>,
}

fn main() {
    for var in [
        "CBL_BUILD_DIR",
        "CBL_INCLUDE_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
    ] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    let found = match env::var("CBL_BUILD_DIR") {
        Ok(dir) if !dir.is_empty() => from_build_dir(&dir),
        _ => from_pkg_config().unwrap_or_else(|why| {
            panic!(
                "cacheblend-sys: cannot find libcacheblend: {}\n\
                 Set CBL_BUILD_DIR to a CMake build directory of libcacheblend (and \
                 CBL_INCLUDE_DIR to capi/include), or install it so that \
                 `pkg-config cacheblend` works (PKG_CONFIG_PATH for a non-system prefix).",
                why
            )
        }),
    };
    let rpath = env::var("CARGO_CFG_TARGET_OS").map_or(true, |os| os != "windows");
    for dir in &found.lib_dirs {
        println!("cargo:rustc-link-search=native={}", dir);
        if rpath {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
    for arg in &found.link_args {
        println!("cargo:rustc-link-arg={}", arg);
    }
    for lib in &found.libs {
        println!("cargo:rustc-link-lib=dylib={}", lib);
    }
    // Metadata for dependents' build scripts (DEP_CACHEBLEND_*), and for tests/header.rs.
    println!(
        "cargo:lib_dirs={}",
        if rpath {
            found.lib_dirs.join(";")
        } else {
            String::new()
        }
    );
    if let Some(inc) = found.include_dirs.first() {
        println!("cargo:include={}", inc);
        println!("cargo:rustc-env=CACHEBLEND_SYS_INCLUDE_DIR={}", inc);
    }
}

fn from_build_dir(dir: &str) -> Found {
    let dir = absolute(Path::new(dir));
    let lib = dir.join("libcacheblend.so");
    if !lib.exists() && !dir.join("libcacheblend.dylib").exists() {
        println!(
            "cargo:warning=CBL_BUILD_DIR={} has no libcacheblend.so yet",
            dir.display()
        );
    }
    let include = match env::var("CBL_INCLUDE_DIR") {
        Ok(d) if !d.is_empty() => Some(absolute(Path::new(&d))),
        // bindings/rust/cacheblend-sys -> the source tree's capi/include.
        _ => env::var("CARGO_MANIFEST_DIR")
            .ok()
            .map(|m| Path::new(&m).join("../../../capi/include"))
            .filter(|p| p.join("cacheblend.h").exists()),
    };
    Found {
        lib_dirs: vec![dir.display().to_string()],
        libs: vec!["cacheblend".to_string()],
        link_args: Vec::new(),
        include_dirs: include
            .into_iter()
            .map(|p| p.display().to_string())
            .collect(),
    }
}

fn from_pkg_config() -> Result<Found, String> {
    let exe = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&exe)
        .args(["--libs", "--cflags", "cacheblend"])
        .output()
        .map_err(|e| format!("cannot run {}: {}", exe, e))?;
    if !out.status.success() {
        return Err(format!(
            "`{} --libs --cflags cacheblend` failed: {}",
            exe,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let mut f = Found {
        lib_dirs: Vec::new(),
        libs: Vec::new(),
        link_args: Vec::new(),
        include_dirs: Vec::new(),
    };
    for tok in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Some(d) = tok.strip_prefix("-L") {
            f.lib_dirs.push(d.to_string());
        } else if let Some(l) = tok.strip_prefix("-l") {
            f.libs.push(l.to_string());
        } else if let Some(d) = tok.strip_prefix("-I") {
            f.include_dirs.push(d.to_string());
        } else if tok.starts_with("-Wl,") && !tok.starts_with("-Wl,-rpath,") {
            f.link_args.push(tok.to_string()); // rpaths: added for every -L directory above
        }
    }
    if !f.libs.iter().any(|l| l == "cacheblend") {
        f.libs.push("cacheblend".to_string());
    }
    Ok(f)
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        return p.to_path_buf();
    }
    env::current_dir()
        .map(|d| d.join(p))
        .unwrap_or_else(|_| p.to_path_buf())
}
