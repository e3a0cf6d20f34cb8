/*
 * Minimal C app on libcacheblend: ingest a folder, answer a question from it with citations.
 *   cacheblend-sample-c DATA_DIR FOLDER "QUESTION"
 * The model comes from $CBL_MODEL or the default location (scripts/fetch-model.sh puts it there).
 * Only the public header and the shared library are used.
 */
#include <stdio.h>
#include <string.h>

#include "cacheblend.h"

static bool print_progress(const cbl_progress *p, void *user) {
    (void)user;
    if (strcmp(p->phase, "skip") == 0) {
        fprintf(stderr, "skipped %s: %s\n", p->current, p->message);
    }
    return true;
}

static bool print_token(const char *piece, size_t len, int32_t token, void *user) {
    (void)token;
    (void)user;
    fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return true;
}

static int fail(const char *what, cbl_status s) {
    fprintf(stderr, "%s failed: %s (%s)\n", what, cbl_last_error(), cbl_status_str(s));
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s DATA_DIR FOLDER QUESTION\n", argv[0]);
        return 2;
    }
    if (cbl_version_number() / 1000000 != CBL_VERSION_MAJOR) {
        fprintf(stderr, "header %s but library %s: major versions differ\n", CBL_VERSION_STRING,
                cbl_version_string());
        return 1;
    }

    cbl_runtime_params rp;
    cbl_runtime_params_init(&rp);
    rp.data_dir = argv[1];
    cbl_runtime *rt = NULL;
    cbl_status s = cbl_runtime_open(&rp, &rt);
    if (s != CBL_OK) return fail("open", s);
    if (*cbl_runtime_notice(rt)) fprintf(stderr, "note: %s\n", cbl_runtime_notice(rt));

    cbl_ingest_params ip;
    cbl_ingest_params_init(&ip);
    ip.progress = print_progress;
    cbl_ingest_report report;
    cbl_ingest_report_init(&report);
    s = cbl_runtime_ingest_path(rt, argv[2], &ip, &report);
    if (s != CBL_OK) {
        cbl_runtime_free(rt);
        return fail("ingest", s);
    }
    fprintf(stderr, "ingested: %lld added, %lld updated, %lld unchanged, %lld skipped\n",
            (long long)report.added, (long long)report.updated, (long long)report.unchanged,
            (long long)report.skipped);

    cbl_session *sess = NULL;
    s = cbl_session_create(rt, NULL, &sess);
    cbl_runtime_free(rt); /* the session keeps what it needs */
    if (s != CBL_OK) return fail("session", s);

    cbl_ask_params ap;
    cbl_ask_params_init(&ap);
    ap.max_tokens = 64;
    ap.on_token = print_token;
    cbl_answer *answer = NULL;
    s = cbl_session_ask(sess, argv[3], &ap, &answer);
    if (s != CBL_OK) {
        cbl_session_free(sess);
        return fail("ask", s);
    }
    printf("\n\ncitations:\n");
    for (size_t i = 0; i < cbl_answer_n_citations(answer); ++i) {
        cbl_hit h;
        cbl_hit_init(&h);
        if (cbl_answer_citation(answer, i, &h) == CBL_OK) {
            printf("[%zu] %s:%lld-%lld\n", i + 1, h.uri, (long long)h.start, (long long)h.end);
        }
    }
    cbl_stats st;
    cbl_stats_init(&st);
    if (cbl_answer_stats(answer, &st) == CBL_OK) {
        fprintf(stderr, "TTFT %.1f ms, %lld prompt tokens (%lld reused, %lld recomputed)\n",
                st.ttft_ms, (long long)st.prompt_tokens, (long long)st.tokens_reused,
                (long long)st.tokens_recomputed);
    }
    cbl_answer_free(answer);
    cbl_session_free(sess);
    return 0;
}
