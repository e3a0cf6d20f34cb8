// Lets the binary find libcacheblend without LD_LIBRARY_PATH: cacheblend-sys publishes the
// library directories it linked against (DEP_CACHEBLEND_LIB_DIRS), and an rpath is added for each.
// Not needed when the library is installed in a system directory.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_CACHEBLEND_LIB_DIRS");
    if let Ok(dirs) = std::env::var("DEP_CACHEBLEND_LIB_DIRS") {
        for dir in dirs.split(';').filter(|d| !d.is_empty()) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}
