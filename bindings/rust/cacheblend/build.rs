// Link arguments from cacheblend-sys's build script do not reach this crate's tests, examples and
// doc tests, so add the same rpath here: the library directories cacheblend-sys found (published
// as DEP_CACHEBLEND_LIB_DIRS because it declares `links = "cacheblend"`). Then `cargo test` runs
// without LD_LIBRARY_PATH. Applications do the same in their own build.rs (see samples/rust).
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_CACHEBLEND_LIB_DIRS");
    if let Ok(dirs) = std::env::var("DEP_CACHEBLEND_LIB_DIRS") {
        for dir in dirs.split(';').filter(|d| !d.is_empty()) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}
