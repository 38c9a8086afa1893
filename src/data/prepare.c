/* prepare.c - text files and directories to a tokenized dataset
 * (train.tok, val.tok, meta.json); see dataset_prepare in strata/data.h. */
#define _GNU_SOURCE
#include "strata/data.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "data/tokenizer_internal.h"
#include "strata/fs.h"

#define CHUNK_BYTES (1u << 20)      /* text encoded per call (and per progress update) */

typedef struct input_file {
    char *path;
    uint64_t size;
} input_file;

typedef struct file_list {
    input_file *v;
    size_t n, cap;
    uint64_t bytes, skipped;
} file_list;

static st_status list_add(file_list *l, const char *path, uint64_t size, st_error *err) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        input_file *v = realloc(l->v, cap * sizeof *v);
        if (!v) return st_fail(err, ST_ENOMEM, "out of memory listing input files");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].path = strdup(path);
    if (!l->v[l->n].path) return st_fail(err, ST_ENOMEM, "out of memory listing input files");
    l->v[l->n++].size = size;
    l->bytes += size;
    return ST_OK;
}

static void list_free(file_list *l) {
    for (size_t k = 0; k < l->n; k++) free(l->v[k].path);
    free(l->v);
}

int data_sniff_binary(int fd, uint64_t *nul_at) {
    char buf[DATA_SNIFF_BYTES];
    ssize_t n;
    do n = pread(fd, buf, sizeof buf, 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    const char *z = memchr(buf, 0, (size_t)n);
    if (!z) return 0;
    *nul_at = (uint64_t)(z - buf);
    return 1;
}

/* data_sniff_binary of the file at path. */
static int sniff_binary(const char *path, uint64_t *nul_at) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int b = data_sniff_binary(fd, nul_at);
    int e = errno;
    close(fd);
    errno = e;
    return b;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef struct walk_ctx {
    file_list *files;
    dev_t skip_dev;       /* the output directory, when it lies inside an input */
    ino_t skip_ino;
    int have_skip;
} walk_ctx;

/* Adds the text files under dir, in sorted order (byte order: the same on every
 * machine, whatever the locale). */
static st_status walk_dir(walk_ctx *w, const char *dir, int depth, st_error *err) {
    if (depth > 64) return st_fail(err, ST_EINVAL, "%s: directories nested too deep", dir);
    DIR *d = opendir(dir);
    if (!d) return st_fail_errno(err, errno, "%s: cannot read directory", dir);
    char **names = NULL;
    size_t n = 0, cap = 0;
    st_status st = ST_OK;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;   /* ., .., and hidden files (.git, editor swap files) */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **v = realloc(names, cap * sizeof *v);
            if (!v) { st = st_fail(err, ST_ENOMEM, "%s: out of memory", dir); break; }
            names = v;
        }
        if (!(names[n] = strdup(de->d_name))) { st = st_fail(err, ST_ENOMEM, "%s: out of memory", dir); break; }
        n++;
    }
    closedir(d);
    if (!st && n) qsort(names, n, sizeof *names, cmp_names);
    for (size_t k = 0; k < n && !st; k++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[k]) >= (int)sizeof path) {
            st = st_fail(err, ST_EINVAL, "%s/%s: path too long", dir, names[k]);
            break;
        }
        struct stat sb, lsb;
        if (stat(path, &sb) != 0 || lstat(path, &lsb) != 0) { w->files->skipped++; continue; }   /* dangling link */
        if (S_ISDIR(sb.st_mode)) {
            if (S_ISLNK(lsb.st_mode)) continue;   /* no symlinked directories: no loops */
            if (w->have_skip && sb.st_dev == w->skip_dev && sb.st_ino == w->skip_ino) continue;
            st = walk_dir(w, path, depth + 1, err);
        } else if (S_ISREG(sb.st_mode)) {
            uint64_t nul;
            int b = sb.st_size > 0 ? sniff_binary(path, &nul) : 1;
            if (b < 0) st = st_fail_errno(err, errno, "%s: cannot read", path);
            else if (b) w->files->skipped++;
            else st = list_add(w->files, path, (uint64_t)sb.st_size, err);
        }
    }
    for (size_t k = 0; k < n; k++) free(names[k]);
    free(names);
    return st;
}

static st_status collect_inputs(const dataset_prepare_opts *o, file_list *files, st_error *err) {
    walk_ctx w = {files, 0, 0, 0};
    struct stat osb;
    if (stat(o->out_dir, &osb) == 0) {
        w.skip_dev = osb.st_dev;
        w.skip_ino = osb.st_ino;
        w.have_skip = 1;
    }
    for (size_t k = 0; k < o->n_inputs; k++) {
        const char *in = o->inputs[k];
        struct stat sb;
        if (stat(in, &sb) != 0) return st_fail_errno(err, errno, "%s: cannot read input", in);
        if (S_ISDIR(sb.st_mode)) {
            size_t before = files->n;
            uint64_t skipped_before = files->skipped;
            st_status st = walk_dir(&w, in, 0, err);
            if (st) return st;
            if (files->n == before)
                return st_fail(err, ST_EINVAL, "%s: no text files in this directory (%" PRIu64
                               " skipped as empty, hidden or binary)", in, files->skipped - skipped_before);
        } else if (S_ISREG(sb.st_mode)) {
            if (sb.st_size == 0) return st_fail(err, ST_EINVAL, "%s: empty input file", in);
            uint64_t nul = 0;
            int b = sniff_binary(in, &nul);
            if (b < 0) return st_fail_errno(err, errno, "%s: cannot read", in);
            if (b)
                return st_fail(err, ST_EINVAL, "%s: not a text file (NUL byte at offset %" PRIu64 ")", in, nul);
            st_status st = list_add(files, in, (uint64_t)sb.st_size, err);
            if (st) return st;
        } else {
            return st_fail(err, ST_EINVAL, "%s: not a regular file or directory", in);
        }
    }
    return ST_OK;
}

/* Where a chunk of text may end without changing how the whole encodes:
 * right after a "\n" that follows a printable ASCII byte and precedes one.
 * Each pre-split regex (GPT-2's, Llama 3's, Qwen2's) then ends a piece right
 * after that "\n" whether or not the text goes on ("x\n" gives "x", "\n";
 * ".\n" gives ".\n" as one), and, matching only forwards, starts the next
 * piece after it either way. An added token that holds a "\n" could span the
 * cut, so such a vocabulary is encoded a file at a time. Returns the end of
 * the chunk starting at `start`: at least CHUNK_BYTES long unless the text
 * ends. */
static size_t chunk_end(const tokenizer *tok, const char *s, size_t n, size_t start) {
    if (n - start <= CHUNK_BYTES || tok->added_has_newline) return n;
    for (size_t i = start + CHUNK_BYTES; i + 1 < n; i++) {
        if (s[i] != '\n') continue;
        unsigned char before = (unsigned char)s[i - 1], after = (unsigned char)s[i + 1];
        if (before > 0x20 && before < 0x7f && after > 0x20 && after < 0x7f) return i + 1;
    }
    return n;
}

typedef struct splitter {
    token_writer *train, *val;
    uint64_t block;          /* tokens per split block */
    double val_fraction;
    uint64_t pos;            /* tokens routed so far */
} splitter;

/* Block b goes to validation when floor((b+1) f) > floor(b f): exactly a
 * fraction f of the blocks, spread evenly (f = 0.1: blocks 9, 19, 29, ...). */
static int block_is_val(const splitter *sp, uint64_t b) {
    return floor((double)(b + 1) * sp->val_fraction) > floor((double)b * sp->val_fraction);
}

static st_status route(splitter *sp, const int32_t *ids, size_t n, st_error *err) {
    while (n) {
        uint64_t b = sp->pos / sp->block, left = (b + 1) * sp->block - sp->pos;
        size_t take = n < left ? n : (size_t)left;
        st_status st = token_writer_append(block_is_val(sp, b) ? sp->val : sp->train, ids, take, err);
        if (st) return st;
        ids += take;
        n -= take;
        sp->pos += take;
    }
    return ST_OK;
}

/* A JSON string literal of s into f. */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* json_str of n bytes (a token's). */
static void json_strn(FILE *f, const char *s, size_t n) {
    char buf[256];
    snprintf(buf, sizeof buf, "%.*s", (int)(n < sizeof buf - 1 ? n : sizeof buf - 1), s);
    json_str(f, buf);
}

static st_status write_meta(const char *path, const tokenizer *tok, const dataset_prepare_opts *o,
                            const file_list *files, const splitter *sp, uint64_t train_tokens, uint64_t val_tokens,
                            st_error *err) {
    FILE *f = fopen(path, "w");
    if (!f) return st_fail_errno(err, errno, "%s: cannot create", path);
    fprintf(f, "{\n  \"format\": \"strata-dataset\",\n  \"version\": 2,\n  \"tokenizer\": ");
    json_str(f, tokenizer_name(tok));
    fprintf(f, ",\n  \"tokenizer_fingerprint\": \"%016" PRIx64 "\",\n  \"tokenizer_source\": ",
            tokenizer_fingerprint(tok));
    json_str(f, tokenizer_source(tok));
    int32_t sep = tokenizer_doc_separator(tok);
    size_t sep_len = 0;
    const char *sep_text = tokenizer_token_bytes(tok, sep, &sep_len);
    fprintf(f, ",\n  \"vocab_size\": %d,\n  \"eot\": %d,\n  \"document_separator\": ", tokenizer_vocab_size(tok), sep);
    json_strn(f, sep_text, sep_len);
    fprintf(f, ",\n");
    fprintf(f, "  \"train\": {\"file\": \"train.tok\", \"tokens\": %" PRIu64 "},\n", train_tokens);
    fprintf(f, "  \"val\": {\"file\": \"val.tok\", \"tokens\": %" PRIu64 "},\n", val_tokens);
    fprintf(f, "  \"val_fraction\": %g,\n  \"split_block_tokens\": %" PRIu64 ",\n", sp->val_fraction, sp->block);
    fprintf(f, "  \"special_tokens_in_text\": %s,\n", (o->encode_flags & TOKENIZER_ALLOW_SPECIAL) ? "true" : "false");
    fprintf(f, "  \"documents\": %zu,\n  \"text_bytes\": %" PRIu64 ",\n  \"inputs\": [", files->n, files->bytes);
    for (size_t k = 0; k < o->n_inputs; k++) {
        fputs(k ? ", " : "", f);
        json_str(f, o->inputs[k]);
    }
    fprintf(f, "]\n}\n");
    int bad = ferror(f);
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    bad |= fclose(f) != 0;
    if (bad) return st_fail_errno(err, e ? e : EIO, "%s: write", path);
    return ST_OK;
}

static st_status encode_file(tokenizer *tok, const dataset_prepare_opts *o, const input_file *in, splitter *sp,
                             uint64_t *bytes_done, uint64_t total, int32_t **ids, size_t *cap, st_error *err) {
    int fd = open(in->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return st_fail_errno(err, errno, "%s: cannot open", in->path);
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return st_fail_errno(err, e, "%s: cannot stat", in->path);
    }
    size_t size = (size_t)sb.st_size;
    const char *text = NULL;
    if (size) {
        text = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (text == MAP_FAILED) {
            int e = errno;
            close(fd);
            return st_fail_errno(err, e, "%s: cannot map", in->path);
        }
        madvise((void *)text, size, MADV_SEQUENTIAL);
    }
    close(fd);
    /* Each file is a document, and its start is marked (GPT-2: EOT; Llama 3:
     * the BOS its template puts first). */
    size_t n = 0;
    (*ids)[n++] = tokenizer_doc_separator(tok);
    st_status st = ST_OK;
    for (size_t start = 0; start < size && !st;) {
        size_t end = chunk_end(tok, text, size, start);
        st = tokenizer_encode_append(tok, text + start, end - start, o->encode_flags, ids, &n, cap, err);
        if (!st) st = route(sp, *ids, n, err);
        n = 0;
        *bytes_done += end - start;
        start = end;
        if (!st && o->progress) o->progress(o->progress_ctx, *bytes_done, total, sp->pos);
    }
    if (!st && n) st = route(sp, *ids, n, err);   /* an empty file still adds its EOT */
    if (text) munmap((void *)text, size);
    if (st && err && !strstr(err->msg, in->path)) {
        char msg[sizeof err->msg + PATH_MAX];
        snprintf(msg, sizeof msg, "%s: %s", in->path, err->msg);
        memcpy(err->msg, msg, sizeof err->msg - 1);
        err->msg[sizeof err->msg - 1] = 0;
    }
    return st;
}

static int dataset_present(const char *dir, char *which, size_t cap) {
    static const char *names[] = {"train.tok", "val.tok", "meta.json"};
    for (int k = 0; k < 3; k++) {
        char p[PATH_MAX];
        struct stat sb;
        if (snprintf(p, sizeof p, "%s/%s", dir, names[k]) < (int)sizeof p && lstat(p, &sb) == 0) {
            snprintf(which, cap, "%s", names[k]);
            return 1;
        }
    }
    return 0;
}

static void remove_staging(const char *stage) {
    static const char *names[] = {"train.tok", "val.tok", "meta.json"};
    for (int k = 0; k < 3; k++) {
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", stage, names[k]) < (int)sizeof p) unlink(p);
    }
    rmdir(stage);
}

st_status dataset_prepare(tokenizer *tok, const dataset_prepare_opts *o, dataset_prepare_result *res,
                          st_error *err) {
    if (res) memset(res, 0, sizeof *res);
    if (!o->n_inputs) return st_fail(err, ST_EINVAL, "prepare: no input files or directories given");
    if (!o->out_dir || !*o->out_dir) return st_fail(err, ST_EINVAL, "prepare: no output directory given");
    double f = o->val_fraction == 0 ? 0.1 : o->val_fraction;
    if (!(f > 0 && f <= 0.5)) return st_fail(err, ST_EINVAL, "prepare: validation fraction %g is not in (0, 0.5]", f);
    if (tokenizer_doc_separator(tok) < 0)
        return st_fail(err, ST_EUNSUPPORTED, "prepare: the tokenizer (%s) has no special token to put before each "
                       "document", tokenizer_source(tok));

    /* Refuse before reading anything, so a mistake costs nothing. */
    char which[32];
    struct stat sb;
    int created_out = 0;
    if (stat(o->out_dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode)) return st_fail(err, ST_EEXIST, "%s: exists and is not a directory", o->out_dir);
        if (!o->overwrite && dataset_present(o->out_dir, which, sizeof which))
            return st_fail(err, ST_EEXIST, "%s: already holds a dataset (%s); pass --overwrite to replace it", o->out_dir,
                           which);
    }

    file_list files = {0};
    st_status st = collect_inputs(o, &files, err);
    if (!st && files.n == 0) st = st_fail(err, ST_EINVAL, "prepare: no text in the inputs");
    if (st) {
        list_free(&files);
        return st;
    }

    if (stat(o->out_dir, &sb) != 0) {
        if (mkdir(o->out_dir, 0755) != 0) {
            st = st_fail_errno(err, errno, "%s: cannot create the output directory", o->out_dir);
            list_free(&files);
            return st;
        }
        created_out = 1;
    }
    /* Everything is written into a staging directory inside out_dir and only
     * renamed into place once complete: an error or a crash leaves whatever
     * dataset was there before untouched. */
    char stage[PATH_MAX], tpath[PATH_MAX + 16], vpath[PATH_MAX + 16], mpath[PATH_MAX + 16];
    if (snprintf(stage, sizeof stage, "%s/.prepare.%ld", o->out_dir, (long)getpid()) >= (int)sizeof stage) {
        list_free(&files);
        return st_fail(err, ST_EINVAL, "%s: path too long", o->out_dir);
    }
    snprintf(tpath, sizeof tpath, "%s/train.tok", stage);
    snprintf(vpath, sizeof vpath, "%s/val.tok", stage);
    snprintf(mpath, sizeof mpath, "%s/meta.json", stage);
    splitter sp = {NULL, NULL, 0, f, 0};
    int32_t *ids = NULL;
    size_t cap = 0;
    uint64_t bytes_done = 0, train_tokens = 0, val_tokens = 0;
    if (mkdir(stage, 0755) != 0) {
        st = st_fail_errno(err, errno, "%s: cannot write in the output directory", o->out_dir);
        goto done;
    }
    const uint32_t vocab = (uint32_t)tokenizer_vocab_size(tok);   /* ids past 65535: uint32 shards */
    const uint64_t fp = tokenizer_fingerprint(tok);                  /* which vocabulary the ids mean */
    if ((st = token_writer_open(&sp.train, tpath, vocab, fp, err))) goto done;
    if ((st = token_writer_open(&sp.val, vpath, vocab, fp, err))) goto done;
    /* Blocks of about 1/200 of the expected tokens (GPT-2 averages about 4
     * bytes of English per token), so validation samples the whole corpus
     * in about 200 f places, not one region. */
    uint64_t est_tokens = files.bytes / 4 + files.n;
    sp.block = est_tokens / 200;
    if (sp.block < 64) sp.block = 64;
    if (sp.block > 65536) sp.block = 65536;
    cap = 2 * CHUNK_BYTES / 3 + 1024;
    ids = malloc(cap * sizeof *ids);
    if (!ids) {
        st = st_fail(err, ST_ENOMEM, "prepare: out of memory");
        goto done;
    }
    for (size_t k = 0; k < files.n && !st; k++)
        st = encode_file(tok, o, &files.v[k], &sp, &bytes_done, files.bytes, &ids, &cap, err);
    if (st) goto done;
    train_tokens = token_writer_count(sp.train);
    val_tokens = token_writer_count(sp.val);
    if (val_tokens == 0 || train_tokens == 0) {
        st = st_fail(err, ST_EINVAL, "prepare: the inputs hold only %" PRIu64 " tokens, too few to split into "
                     "training and validation sets (blocks of %" PRIu64 " tokens)", sp.pos, sp.block);
        goto done;
    }
    st = token_writer_commit(sp.train, err);
    sp.train = NULL;
    if (!st) st = token_writer_commit(sp.val, err);
    sp.val = NULL;
    if (!st) st = write_meta(mpath, tok, o, &files, &sp, train_tokens, val_tokens, err);
    if (st) goto done;
    static const char *names[] = {"train.tok", "val.tok", "meta.json"};
    for (int k = 0; k < 3 && !st; k++) {
        char from[PATH_MAX + 16], to[PATH_MAX + 16];
        snprintf(from, sizeof from, "%s/%s", stage, names[k]);
        snprintf(to, sizeof to, "%s/%s", o->out_dir, names[k]);
        if (rename(from, to) != 0) st = st_fail_errno(err, errno, "%s: cannot rename to %s", from, to);
    }
    if (!st) st = st_fsync_dir(o->out_dir, err);   /* the renames survive a power cut */
    if (!st && res) {
        res->files = files.n;
        res->skipped = files.skipped;
        res->bytes = files.bytes;
        res->train_tokens = train_tokens;
        res->val_tokens = val_tokens;
    }
done:
    token_writer_abort(sp.train);
    token_writer_abort(sp.val);
    free(ids);
    remove_staging(stage);
    if (st && created_out) rmdir(o->out_dir);   /* only if still empty */
    list_free(&files);
    return st;
}
