#!/usr/bin/env bash
# Install the Debian packages libcacheblend needs to build and test. Idempotent: when everything is
# already installed it changes nothing and does not touch the network. Extra package names given as
# arguments are installed too. Uses sudo when not run as root.
set -euo pipefail

pkgs=(
  cmake g++ make pkg-config          # toolchain
  libsqlite3-dev                     # catalog (FTS5, bm25)
  libfaiss-dev libopenblas-dev       # retriever; OpenBLAS also backs FAISS's BLAS calls (and sgemm)
  libmimalloc-dev                    # allocator
  libpoppler-cpp-dev                 # PDF text (retrieval/extract/pdf.cpp; optional at build time)
  libzip-dev libxml2-dev             # DOCX/ODT (zip + XML), HTML (libxml2's HTML parser)
  libmagic-dev                       # content sniffing: extensionless text files, binaries refused
  libhiredis-dev redis-server        # shared chunk KV on Redis (optional at build time; tests start a server)
  libgtest-dev libgmock-dev          # ctest suite
  libbenchmark-dev                   # microbenchmarks
  python3 python3-pip python3-venv   # model fetch, peer scripts
  golang-go                          # Go binding and samples/assistant (standard library only)
  chromium chromium-driver python3-selenium  # samples/assistant's browser test (headless)
  clang-format                       # scripts/check-format.sh (.clang-format), run by the tests
  help2man                           # the cacheblend(1) man page from --help (scripts/gen-manpage.py)
  unzip curl ca-certificates         # model fetch
  "$@"
)

missing=()
for p in "${pkgs[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ "$status" == installed ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#pkgs[@]} packages present" >&2
  exit 0
fi

sudo=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: error: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -y -q)
"${apt[@]}" update
"${apt[@]}" install --no-install-recommends "${missing[@]}"
