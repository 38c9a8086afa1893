/* tokens.c - token files (strata shards and nanoGPT raw uint16), the shard
 * writer, and resolving a dataset path. docs/FORMATS.md has the layout. */
#include "strata/data.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "strata/checksum.h"
#include "strata/fs.h"

/* Header field offsets (all little-endian). */
enum {
    HDR_MAGIC = 0,          /* 8 bytes */
    HDR_VERSION = 8,        /* u32 */
    HDR_TOKEN_BYTES = 12,   /* u32: 2 or 4 */
    HDR_COUNT = 16,         /* u64 */
    HDR_VOCAB = 24,         /* u32 */
    HDR_DATA_CRC = 28,      /* u32: CRC32C of the token bytes */
    HDR_VOCAB_FP = 32,      /* u64: the vocabulary's fingerprint, 0 = not recorded (version 2 on) */
    HDR_HEADER_CRC = 60,    /* u32: CRC32C of bytes [0, 60) */
};

#define MAGIC_BYTES 8
#define IO_CHUNK (1u << 20)

static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }
static void put_u32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

/* pread all of [off, off+n) or fail. */
static st_status pread_full(int fd, void *buf, size_t n, uint64_t off, const char *path, st_error *err) {
    uint8_t *p = buf;
    while (n) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0) {
            if (errno == EINTR) continue;
            return st_fail_errno(err, errno, "%s: read at byte %" PRIu64, path, off);
        }
        if (r == 0) return st_fail(err, ST_ECORRUPT, "%s: file ends at byte %" PRIu64 " (truncated?)", path, off);
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return ST_OK;
}

static st_status write_full(int fd, const void *buf, size_t n, const char *path, st_error *err) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return st_fail_errno(err, errno, "%s: write", path);
        }
        p += w;
        n -= (size_t)w;
    }
    return ST_OK;
}

/* ---- reading ---------------------------------------------------------------- */

struct token_file {
    int fd;
    int is_shard;
    uint32_t token_bytes;
    uint32_t vocab_size;
    uint64_t vocab_fingerprint;
    uint64_t count;
    uint64_t data_off;
    char path[];
};

static st_status check_shard(token_file *tf, uint64_t size, st_error *err) {
    uint8_t h[TOKEN_SHARD_HEADER_BYTES];
    const char *path = tf->path;
    if (size < TOKEN_SHARD_HEADER_BYTES)
        return st_fail(err, ST_ECORRUPT, "%s: truncated strata shard header (%" PRIu64 " of %d bytes)", path, size,
                       TOKEN_SHARD_HEADER_BYTES);
    st_status st = pread_full(tf->fd, h, sizeof h, 0, path, err);
    if (st) return st;
    uint32_t version = get_u32(h + HDR_VERSION);
    if (version > TOKEN_SHARD_VERSION)
        return st_fail(err, ST_EUNSUPPORTED, "%s: shard format version %u; this build reads version %d", path, version,
                       TOKEN_SHARD_VERSION);
    if (version == 0) return st_fail(err, ST_ECORRUPT, "%s: bad shard format version 0", path);
    uint32_t want = get_u32(h + HDR_HEADER_CRC), got = st_crc32c(0, h, HDR_HEADER_CRC);
    if (want != got)
        return st_fail(err, ST_ECORRUPT, "%s: shard header checksum mismatch (stored 0x%08x, computed 0x%08x)", path,
                       want, got);
    tf->token_bytes = get_u32(h + HDR_TOKEN_BYTES);
    tf->count = get_u64(h + HDR_COUNT);
    tf->vocab_size = get_u32(h + HDR_VOCAB);
    /* Version 1 kept these bytes zero: the same "not recorded". */
    tf->vocab_fingerprint = version >= 2 ? get_u64(h + HDR_VOCAB_FP) : 0;
    tf->data_off = TOKEN_SHARD_HEADER_BYTES;
    if (tf->token_bytes != 2 && tf->token_bytes != 4)
        return st_fail(err, ST_ECORRUPT, "%s: bad token width %u in shard header", path, tf->token_bytes);
    if (tf->count > (size - TOKEN_SHARD_HEADER_BYTES) / tf->token_bytes ||
        TOKEN_SHARD_HEADER_BYTES + tf->count * tf->token_bytes != size)
        return st_fail(err, ST_ECORRUPT, "%s: header says %" PRIu64 " tokens (%" PRIu64 " bytes) but the file has %" PRIu64
                       " bytes (truncated or appended to?)", path, tf->count,
                       (uint64_t)TOKEN_SHARD_HEADER_BYTES + tf->count * tf->token_bytes, size);
    /* One pass over the tokens: catches bit rot and partial copies up front,
     * not halfway through a training run. */
    uint8_t *buf = malloc(IO_CHUNK);
    if (!buf) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    uint32_t crc = 0;
    for (uint64_t off = TOKEN_SHARD_HEADER_BYTES; off < size;) {
        size_t n = size - off < IO_CHUNK ? (size_t)(size - off) : IO_CHUNK;
        st = pread_full(tf->fd, buf, n, off, path, err);
        if (st) {
            free(buf);
            return st;
        }
        crc = st_crc32c(crc, buf, n);
        off += n;
    }
    free(buf);
    want = get_u32(h + HDR_DATA_CRC);
    if (crc != want)
        return st_fail(err, ST_ECORRUPT, "%s: token checksum mismatch (stored 0x%08x, computed 0x%08x): the file is damaged",
                       path, want, crc);
    return ST_OK;
}

st_status token_format_parse(const char *name, token_format *out, st_error *err) {
    if (!strcmp(name, "auto")) *out = TOKEN_FORMAT_AUTO;
    else if (!strcmp(name, "u16")) *out = TOKEN_FORMAT_U16;
    else return st_fail(err, ST_EINVAL, "data-format must be auto or u16, not '%s'", name);
    return ST_OK;
}

/* Why a file that is not a shard is not read as raw tokens either (format
 * auto, a name other than *.bin): what it looks like and what to do. */
static st_status refuse_unknown_format(int fd, const char *path, st_error *err) {
    uint64_t nul_at;
    const int binary = data_sniff_binary(fd, &nul_at);
    if (binary < 0) return st_fail_errno(err, errno, "%s: cannot read", path);
    if (!binary)
        return st_fail(err, ST_EINVAL,
                       "%s: this is a text file, not token ids; tokenize it first with 'strata prepare %s --out DIR' "
                       "(then strata train --data DIR)",
                       path, path);
    return st_fail(err, ST_EINVAL,
                   "%s: not a token file: it has no strata shard header, and raw uint16 token ids (nanoGPT's format) "
                   "are read only from a file named *.bin; if that is what it holds, rename it to *.bin or pass "
                   "--data-format u16",
                   path);
}

st_status token_file_open(token_file **out, const char *path, token_format format, st_error *err) {
    *out = NULL;
    size_t plen = strlen(path);
    token_file *tf = calloc(1, sizeof *tf + plen + 1);
    if (!tf) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    memcpy(tf->path, path, plen + 1);
    tf->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (tf->fd < 0) {
        int e = errno;
        free(tf);
        return st_fail_errno(err, e, "%s: cannot open token file", path);
    }
    st_status st;
    struct stat sb;
    if (fstat(tf->fd, &sb) != 0) {
        st = st_fail_errno(err, errno, "%s: cannot stat", path);
        goto fail;
    }
    if (S_ISDIR(sb.st_mode)) {
        st = st_fail(err, ST_EINVAL,
                     "%s: is a directory, not a token file; name a file in it (for a dataset from 'strata prepare': "
                     "train.tok or val.tok)",
                     path);
        goto fail;
    }
    uint64_t size = (uint64_t)sb.st_size;
    if (size == 0) {
        st = st_fail(err, ST_ECORRUPT, "%s: empty token file", path);
        goto fail;
    }
    uint8_t magic[MAGIC_BYTES] = {0};
    size_t mlen = size < MAGIC_BYTES ? (size_t)size : MAGIC_BYTES;
    if ((st = pread_full(tf->fd, magic, mlen, 0, path, err))) goto fail;
    if (mlen == MAGIC_BYTES && !memcmp(magic, TOKEN_SHARD_MAGIC, MAGIC_BYTES)) {
        tf->is_shard = 1;
        if ((st = check_shard(tf, size, err))) goto fail;
    } else if (ends_with(path, TOKEN_SHARD_EXT) || (mlen >= 2 && magic[0] == 0xff && magic[1] == 0xff)) {
        /* 0xffff cannot be a GPT-2 id, so such a file is a shard whose magic
         * got damaged, not nanoGPT data. */
        st = st_fail(err, ST_ECORRUPT,
                     "%s: not a strata token shard: wrong magic number (first bytes %02x %02x %02x %02x %02x %02x %02x %02x)",
                     path, magic[0], magic[1], magic[2], magic[3], magic[4], magic[5], magic[6], magic[7]);
        goto fail;
    } else if (format == TOKEN_FORMAT_AUTO && !ends_with(path, ".bin")) {
        st = refuse_unknown_format(tf->fd, path, err);
        goto fail;
    } else {
        if (size % 2) {
            st = st_fail(err, ST_ECORRUPT, "%s: %" PRIu64 " bytes is not a whole number of uint16 tokens "
                         "(raw nanoGPT format) and the file has no strata shard header", path, size);
            goto fail;
        }
        tf->token_bytes = 2;
        tf->count = size / 2;
        tf->data_off = 0;
    }
    if (tf->count == 0) {
        st = st_fail(err, ST_ECORRUPT, "%s: holds no tokens", path);
        goto fail;
    }
    *out = tf;
    return ST_OK;
fail:
    close(tf->fd);
    free(tf);
    return st;
}

uint64_t token_file_count(const token_file *tf) { return tf->count; }
uint32_t token_file_vocab_size(const token_file *tf) { return tf->vocab_size; }
uint64_t token_file_vocab_fingerprint(const token_file *tf) { return tf->vocab_fingerprint; }
int token_file_is_shard(const token_file *tf) { return tf->is_shard; }
const char *token_file_path(const token_file *tf) { return tf->path; }

st_status token_file_read(token_file *tf, uint64_t start, size_t n, int32_t *out, int vocab_size, st_error *err) {
    if (start > tf->count || n > tf->count - start)
        return st_fail(err, ST_EINVAL, "%s: reading tokens [%" PRIu64 ", %" PRIu64 ") past the end (%" PRIu64 " tokens)",
                       tf->path, start, start + n, tf->count);
    if (n == 0) return ST_OK;
    /* Read the narrow ids into the front of out, then widen in place from
     * the back (out[k] never overlaps a narrow id not yet widened). */
    st_status st = pread_full(tf->fd, out, n * tf->token_bytes, tf->data_off + start * tf->token_bytes, tf->path, err);
    if (st) return st;
    if (tf->token_bytes == 2) {
        const uint16_t *narrow = (const uint16_t *)out;
        for (size_t k = n; k-- > 0;) out[k] = (int32_t)le16toh(narrow[k]);
    } else {
        for (size_t k = 0; k < n; k++) out[k] = (int32_t)le32toh((uint32_t)out[k]);
    }
    if (vocab_size > 0) {
        for (size_t k = 0; k < n; k++)
            if ((uint32_t)out[k] >= (uint32_t)vocab_size)
                return st_fail(err, ST_ECORRUPT,
                               "%s: token %" PRIu64 " is %" PRIu32 ", past the model's vocabulary of %d; the data "
                               "needs a model with a larger vocabulary (--vocab), or was not tokenized for this one",
                               tf->path, start + k, (uint32_t)out[k], vocab_size);
    }
    return ST_OK;
}

st_status token_file_check_ids(token_file *tf, int vocab_size, st_error *err) {
    if (tf->is_shard && tf->vocab_size <= (uint32_t)vocab_size) return ST_OK;
    const size_t chunk = IO_CHUNK / sizeof(int32_t);
    int32_t *buf = malloc(chunk * sizeof *buf);
    if (!buf) return st_fail(err, ST_ENOMEM, "%s: out of memory", tf->path);
    st_status st = ST_OK;
    for (uint64_t pos = 0; pos < tf->count && st == ST_OK; pos += chunk) {
        const size_t n = tf->count - pos < chunk ? (size_t)(tf->count - pos) : chunk;
        st = token_file_read(tf, pos, n, buf, vocab_size, err);
    }
    free(buf);
    return st;
}

void token_file_close(token_file *tf) {
    if (!tf) return;
    close(tf->fd);
    free(tf);
}

st_status vocab_fingerprint_check(const char *a_name, uint64_t a_fingerprint, const char *b_name, uint64_t b_fingerprint,
                                  st_error *err) {
    if (!a_fingerprint || !b_fingerprint || a_fingerprint == b_fingerprint) return ST_OK;
    return st_fail(err, ST_EINVAL,
                   "%s and %s were made with different vocabularies (fingerprints %016" PRIx64 " and %016" PRIx64
                   "): the same id means a different token in each; use data tokenized with the model's own tokenizer",
                   a_name, b_name, a_fingerprint, b_fingerprint);
}

/* ---- writing ---------------------------------------------------------------- */

struct token_writer {
    st_atomic_file file;   /* the temporary "<path>.tmp.<pid>", renamed over path at commit */
    uint32_t vocab_size, token_bytes;
    uint64_t vocab_fingerprint;
    uint64_t count;
    uint32_t crc;
    uint8_t *buf;
    size_t used;
};

st_status token_writer_open(token_writer **out, const char *path, uint32_t vocab_size, uint64_t vocab_fingerprint,
                            st_error *err) {
    *out = NULL;
    if (vocab_size == 0) return st_fail(err, ST_EINVAL, "%s: vocabulary size must be positive", path);
    token_writer *w = calloc(1, sizeof *w);
    if (w) w->buf = malloc(IO_CHUNK);
    if (!w || !w->buf) {
        free(w);
        return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    }
    w->vocab_size = vocab_size;
    w->vocab_fingerprint = vocab_fingerprint;
    w->token_bytes = vocab_size <= 65535 ? 2 : 4;
    st_status st = st_atomic_open(&w->file, path, ST_ATOMIC_TMP_PER_PROCESS, err);
    if (st) {
        free(w->buf);
        free(w);
        return st;
    }
    /* the header is written last, once the count and checksum are known */
    memset(w->buf, 0, TOKEN_SHARD_HEADER_BYTES);
    st = write_full(w->file.fd, w->buf, TOKEN_SHARD_HEADER_BYTES, w->file.tmp, err);
    if (st) {
        token_writer_abort(w);
        return st;
    }
    *out = w;
    return ST_OK;
}

static st_status writer_flush(token_writer *w, st_error *err) {
    if (!w->used) return ST_OK;
    w->crc = st_crc32c(w->crc, w->buf, w->used);
    st_status st = write_full(w->file.fd, w->buf, w->used, w->file.tmp, err);
    w->used = 0;
    return st;
}

st_status token_writer_append(token_writer *w, const int32_t *ids, size_t n, st_error *err) {
    for (size_t k = 0; k < n; k++) {
        if (ids[k] < 0 || (uint32_t)ids[k] >= w->vocab_size)
            return st_fail(err, ST_EINVAL, "%s: token %" PRIu64 " is %d, outside the vocabulary [0, %u)", w->file.path,
                           w->count + k, ids[k], w->vocab_size);
        if (w->used + w->token_bytes > IO_CHUNK) {
            st_status st = writer_flush(w, err);
            if (st) return st;
        }
        if (w->token_bytes == 2) {
            uint16_t v = htole16((uint16_t)ids[k]);
            memcpy(w->buf + w->used, &v, 2);
        } else {
            uint32_t v = htole32((uint32_t)ids[k]);
            memcpy(w->buf + w->used, &v, 4);
        }
        w->used += w->token_bytes;
    }
    w->count += n;
    return ST_OK;
}

uint64_t token_writer_count(const token_writer *w) { return w->count; }

st_status token_writer_commit(token_writer *w, st_error *err) {
    st_status st = writer_flush(w, err);
    if (!st) {
        uint8_t h[TOKEN_SHARD_HEADER_BYTES] = {0};
        memcpy(h + HDR_MAGIC, TOKEN_SHARD_MAGIC, MAGIC_BYTES);
        put_u32(h + HDR_VERSION, TOKEN_SHARD_VERSION);
        put_u32(h + HDR_TOKEN_BYTES, w->token_bytes);
        put_u64(h + HDR_COUNT, w->count);
        put_u32(h + HDR_VOCAB, w->vocab_size);
        put_u32(h + HDR_DATA_CRC, w->crc);
        put_u64(h + HDR_VOCAB_FP, w->vocab_fingerprint);
        put_u32(h + HDR_HEADER_CRC, st_crc32c(0, h, HDR_HEADER_CRC));
        ssize_t r = pwrite(w->file.fd, h, sizeof h, 0);
        if (r != (ssize_t)sizeof h)
            st = r < 0 ? st_fail_errno(err, errno, "%s: writing the header", w->file.tmp)
                       : st_fail(err, ST_EIO, "%s: short header write", w->file.tmp);
    }
    if (!st) st = st_atomic_commit(&w->file, err);
    token_writer_abort(w);   /* after a commit: only frees w */
    return st;
}

void token_writer_abort(token_writer *w) {
    if (!w) return;
    st_atomic_abort(&w->file);
    free(w->buf);
    free(w);
}

/* ---- datasets --------------------------------------------------------------- */

static int is_file(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

st_status dataset_resolve(const char *path, char *train_path, char *val_path, size_t cap, st_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return st_fail_errno(err, errno, "%s: no dataset or token file here", path);
    if (!S_ISDIR(sb.st_mode)) {
        if (strlen(path) >= cap) return st_fail(err, ST_EINVAL, "%s: path too long", path);
        strcpy(train_path, path);
        strcpy(val_path, path);
        return ST_OK;
    }
    static const char *layouts[][2] = {{"train.tok", "val.tok"}, {"train.bin", "val.bin"}};
    for (int k = 0; k < 2; k++) {
        char t[PATH_MAX], v[PATH_MAX];
        if (snprintf(t, sizeof t, "%s/%s", path, layouts[k][0]) >= (int)sizeof t ||
            snprintf(v, sizeof v, "%s/%s", path, layouts[k][1]) >= (int)sizeof v)
            return st_fail(err, ST_EINVAL, "%s: path too long", path);
        if (!is_file(t)) continue;
        if (!is_file(v))
            return st_fail(err, ST_ENOENT, "%s: has %s but no %s (an interrupted or partial dataset?)", path,
                           layouts[k][0], layouts[k][1]);
        if (strlen(t) >= cap || strlen(v) >= cap) return st_fail(err, ST_EINVAL, "%s: path too long", path);
        strcpy(train_path, t);
        strcpy(val_path, v);
        return ST_OK;
    }
    return st_fail(err, ST_ENOENT,
                   "%s: not a dataset: no train.tok/val.tok (made by 'strata prepare') or train.bin/val.bin (nanoGPT)",
                   path);
}
