/* store_dirs.c - a store's directories as the command line and run records
 * spell them, and finding or removing a store in them (see strata/store.h). It uses
 * nothing else in the store but its file names. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/fs.h"
#include "store/store_internal.h"

st_status store_dirs_parse(const char *list, store_dirs *d, st_error *err) {
    d->n = 0;
    if (snprintf(d->list, sizeof d->list, "%s", list) >= (int)sizeof d->list)
        return st_fail(err, ST_EINVAL, "the list of store directories is too long");
    for (char *save = NULL, *tok = strtok_r(d->list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (d->n == STORE_MAX_PATHS) return st_fail(err, ST_EINVAL, "at most %d directories", STORE_MAX_PATHS);
        d->paths[d->n++] = tok;
    }
    if (d->n == 0) return st_fail(err, ST_EINVAL, "no directory given");
    return ST_OK;
}

int store_dirs_same(const store_dirs *a, const store_dirs *b) { return st_same_paths(a->paths, a->n, b->paths, b->n); }

st_status store_dirs_of_rank(const store_dirs *in, int rank, int ranks, store_dirs *out, st_error *err) {
    char list[sizeof out->list];
    size_t len = 0;
    for (int i = 0; i < in->n; i++) {
        const char *p = in->paths[i], *mark = ranks > 1 ? strstr(p, "%r") : NULL;
        const int w = ranks < 2 ? snprintf(list + len, sizeof list - len, "%s%s", i ? "," : "", p)
                    : mark      ? snprintf(list + len, sizeof list - len, "%s%.*s%d%s", i ? "," : "",
                                           (int)(mark - p), p, rank, mark + 2)
                                : snprintf(list + len, sizeof list - len, "%s%s/rank-%d", i ? "," : "", p, rank);
        if (w < 0 || (size_t)w >= sizeof list - len)
            return st_fail(err, ST_EINVAL, "store directories too long with the rank in them: %s", in->paths[0]);
        len += (size_t)w;
    }
    return store_dirs_parse(list, out, err);
}

/* The store's files in dir, removed. */
static st_status remove_in(const char *dir, st_error *err) {
    st_status s = st_mkdir_p(dir, err);
    if (s != ST_OK) return s;
    DIR *d = opendir(dir);
    if (!d) return st_fail_errno(err, errno, "%s: cannot list", dir);
    const size_t prefix = strlen(STORE_FILE_PREFIX);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, STORE_FILE_PREFIX, prefix) != 0) continue;
        char f[4400];
        store_path_join(f, sizeof f, dir, e->d_name);
        if (unlink(f) != 0 && errno != ENOENT) {
            s = st_fail_errno(err, errno, "%s: cannot remove the previous run's store file", f);
            break;
        }
    }
    closedir(d);
    return s;
}

st_status store_remove(const store_dirs *d, st_error *err) {
    for (int i = 0; i < d->n; i++) {
        st_status s = remove_in(d->paths[i], err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

st_status store_revert_commit(const store_dirs *d, st_error *err) {
    char prev[4400], final[4400], lock_name[4400];
    store_path_join(prev, sizeof prev, d->paths[0], STORE_MANIFEST_PREV);
    store_path_join(final, sizeof final, d->paths[0], STORE_MANIFEST_NAME);
    store_path_join(lock_name, sizeof lock_name, d->paths[0], STORE_LOCK_NAME);
    int lock = -1;
    long holder = 0;
    st_status s = st_lock_take(lock_name, 1, &lock, &holder, err);   /* no one has it open, not even to look */
    if (s == ST_EEXIST) {
        char who[48] = "another process";
        if (holder) snprintf(who, sizeof who, "another process (PID %ld)", holder);
        return st_fail(err, ST_EEXIST, "the store in %s is in use by %s: it goes back when that has ended",
                       d->paths[0], who);
    }
    if (s != ST_OK) return s;
    if (rename(prev, final) != 0)
        s = errno == ENOENT ? st_fail(err, ST_ENOENT, "the store in %s keeps no commit before its last (no %s)",
                                      d->paths[0], STORE_MANIFEST_PREV)
                            : st_fail_errno(err, errno, "cannot put %s back as %s", prev, final);
    if (s == ST_OK) s = st_fsync_dir(d->paths[0], err);
    st_lock_release(&lock);
    return s;
}

st_status store_move(const store_dirs *from, const store_dirs *to, st_error *err) {
    if (from->n != to->n) return st_fail(err, ST_EINVAL, "store_move: %d directories into %d", from->n, to->n);
    const size_t prefix = strlen(STORE_FILE_PREFIX);
    for (int i = 0; i < from->n; i++) {
        st_status s = st_mkdir_p(to->paths[i], err);
        if (s != ST_OK) return s;
        DIR *d = opendir(from->paths[i]);
        if (!d) {
            if (errno == ENOENT) continue;
            return st_fail_errno(err, errno, "%s: cannot list", from->paths[i]);
        }
        struct dirent *e;
        while (s == ST_OK && (e = readdir(d))) {
            if (strncmp(e->d_name, STORE_FILE_PREFIX, prefix) != 0) continue;
            char a[4400], b[4400];
            store_path_join(a, sizeof a, from->paths[i], e->d_name);
            store_path_join(b, sizeof b, to->paths[i], e->d_name);
            if (rename(a, b) != 0) s = st_fail_errno(err, errno, "%s: cannot move to %s", a, to->paths[i]);
        }
        closedir(d);
        if (s == ST_OK) s = st_fsync_dir(to->paths[i], err);
        if (s == ST_OK) s = st_fsync_dir(from->paths[i], err);
        if (s != ST_OK) return s;
    }
    return ST_OK;
}

uint64_t store_dirs_disk_bytes(const store_dirs *d) {
    const size_t prefix = strlen(STORE_FILE_PREFIX);
    uint64_t bytes = 0;
    for (int i = 0; i < d->n; i++) {
        DIR *dir = opendir(d->paths[i]);
        if (!dir) continue;
        for (struct dirent *e; (e = readdir(dir));) {
            char f[4400];
            struct stat sb;
            if (strncmp(e->d_name, STORE_FILE_PREFIX, prefix) != 0) continue;
            store_path_join(f, sizeof f, d->paths[i], e->d_name);
            if (stat(f, &sb) == 0) bytes += (uint64_t)sb.st_blocks * 512;
        }
        closedir(dir);
    }
    return bytes;
}

int store_dirs_hold_store(const store_dirs *d) {
    int found = 0;
    for (int i = 0; i < d->n && !found; i++) {
        char f[4400];
        struct stat sb;
        store_path_join(f, sizeof f, d->paths[i], STORE_MANIFEST_NAME);
        found = access(f, F_OK) == 0;
        store_path_join(f, sizeof f, d->paths[i], STORE_DATA_NAME);
        found = found || (stat(f, &sb) == 0 && sb.st_size > 0);
    }
    return found;
}
