/* store_testutil.h - the store tests' fixture: a fresh temporary tree under
 * the build directory with three drive-like directories (nvme0..2) whose
 * paths a store_config takes, removed with everything in it afterwards.
 * Header-only; include after cmocka.h. */
#ifndef STRATA_STORE_TESTUTIL_H
#define STRATA_STORE_TESTUTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct fixture {
    char root[512];
    char dirs[3][600];
    const char *paths[3];
} fixture;

static inline int fixture_rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

/* name: the tree's prefix, e.g. "tmp-store-basic" */
static inline int fixture_setup(void **state, const char *name) {
    fixture *f = calloc(1, sizeof *f);
    if (!f) return -1;
    snprintf(f->root, sizeof f->root, "%s/%s-XXXXXX", STRATA_BINARY_DIR, name);
    if (!mkdtemp(f->root)) return -1;
    for (int i = 0; i < 3; i++) {
        snprintf(f->dirs[i], sizeof f->dirs[i], "%s/nvme%d", f->root, i);
        if (mkdir(f->dirs[i], 0755) != 0) return -1;
        f->paths[i] = f->dirs[i];
    }
    *state = f;
    return 0;
}

static inline int fixture_teardown(void **state) {
    fixture *f = *state;
    nftw(f->root, fixture_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(f);
    return 0;
}

#endif
