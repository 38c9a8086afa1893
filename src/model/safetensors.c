/* safetensors.c - validated reading and atomic writing of .safetensors files.
 *
 * The header is untrusted input: every length is checked against the file
 * size before anything is allocated from it, every integer is checked before
 * it is used in arithmetic, and all arithmetic on sizes is 64-bit with
 * explicit overflow checks. */
#include "strata/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "strata/fs.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host (the format is little-endian)"
#endif

struct safetensors_file {
    char *path;
    int fd;                         /* -1 when parsed from memory */
    uint64_t file_size;
    uint64_t data_start;            /* 8 + header length */
    size_t count;
    safetensors_tensor *tensors;    /* header order */
    size_t *by_name;                /* indices into tensors, sorted by name */
    size_t meta_count;
    char **meta_keys, **meta_values;
};

/* ------------------------------------------------------------------------- */
/* dtypes                                                                     */

static const struct { const char *name; size_t size; } dtype_info[SAFETENSORS_DTYPE_COUNT] = {
    [SAFETENSORS_F64] = {"F64", 8},  [SAFETENSORS_F32] = {"F32", 4},  [SAFETENSORS_F16] = {"F16", 2},
    [SAFETENSORS_BF16] = {"BF16", 2}, [SAFETENSORS_I64] = {"I64", 8}, [SAFETENSORS_I32] = {"I32", 4},
    [SAFETENSORS_I16] = {"I16", 2},  [SAFETENSORS_I8] = {"I8", 1},   [SAFETENSORS_U8] = {"U8", 1},
    [SAFETENSORS_BOOL] = {"BOOL", 1}, [SAFETENSORS_U16] = {"U16", 2}, [SAFETENSORS_U32] = {"U32", 4},
    [SAFETENSORS_U64] = {"U64", 8},
};

/* Defined by the format, but not something we convert. */
static const char *const unsupported_dtypes[] = {
    "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "C64",
};

const char *safetensors_dtype_name(safetensors_dtype d) {
    return (unsigned)d < SAFETENSORS_DTYPE_COUNT ? dtype_info[d].name : "?";
}

size_t safetensors_dtype_size(safetensors_dtype d) {
    return (unsigned)d < SAFETENSORS_DTYPE_COUNT ? dtype_info[d].size : 0;
}

static int dtype_is_float(safetensors_dtype d) {
    return d == SAFETENSORS_F64 || d == SAFETENSORS_F32 || d == SAFETENSORS_F16 || d == SAFETENSORS_BF16;
}

/* ------------------------------------------------------------------------- */
/* small helpers                                                              */

/* A name from an untrusted header, fit for a one-line message: control
 * characters become '?', and long names are cut with "...". */
typedef struct { char s[96]; } shown_name;
static const char *show(shown_name *b, const char *name) {
    if (!name) return "(no name)";
    size_t i = 0, max = sizeof b->s - 4;
    for (; name[i] && i < max; i++) {
        unsigned char c = (unsigned char)name[i];
        b->s[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    if (name[i]) memcpy(b->s + i, "...", 4);
    else b->s[i] = 0;
    return b->s;
}

/* Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF),
 * and no NUL bytes. Returns the offset of the first bad byte, or len. */
static size_t utf8_invalid_at(const uint8_t *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        uint8_t c = s[i];
        if (c == 0) return i;
        if (c < 0x80) { i++; continue; }
        size_t n;
        uint32_t cp, min;
        if ((c & 0xe0) == 0xc0) { n = 2; cp = c & 0x1f; min = 0x80; }
        else if ((c & 0xf0) == 0xe0) { n = 3; cp = c & 0x0f; min = 0x800; }
        else if ((c & 0xf8) == 0xf0) { n = 4; cp = c & 0x07; min = 0x10000; }
        else return i;
        if (len - i < n) return i;
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
        i += n;
    }
    return len;
}

/* The header as JSON text, before cJSON sees it: valid UTF-8, no control
 * bytes except the whitespace JSON allows (cJSON would take any byte below
 * 0x20 as whitespace, and raw control characters inside strings), and no
 * "\u0000" escape in a string (it would cut a C string short, so "wte\u0000x"
 * would read as "wte"). Returns the offset of the first bad byte, or len. */
static size_t header_text_invalid_at(const uint8_t *s, size_t len) {
    size_t bad = utf8_invalid_at(s, len);
    int in_string = 0;
    for (size_t i = 0; i < bad; i++) {
        uint8_t c = s[i];
        if (c < 0x20 && (in_string || (c != '\t' && c != '\n' && c != '\r'))) return i;
        if (!in_string) {
            in_string = c == '"';
        } else if (c == '"') {
            in_string = 0;
        } else if (c == '\\' && i + 1 < len) {
            if (s[i + 1] == 'u' && len - i >= 6 && memcmp(s + i + 2, "0000", 4) == 0) return i;
            i++;   /* the escaped character cannot end the string */
        }
    }
    return bad;
}

static uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* A JSON number that is an integer in [0, 2^53). */
static int json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return 0;
    double d = item->valuedouble;
    if (!(d >= 0) || d >= (double)SAFETENSORS_MAX_INTEGER || d != floor(d)) return 0;
    *out = (uint64_t)d;
    return 1;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* Reads exactly n bytes at off, retrying on EINTR and partial reads. Returns
 * the bytes read (less than n only at end of file), or -1 with errno set. */
static int64_t pread_full(int fd, void *buf, uint64_t n, uint64_t off) {
    uint64_t done = 0;
    while (done < n) {
        size_t want = n - done > (1u << 30) ? (1u << 30) : (size_t)(n - done);
        ssize_t r = pread(fd, (uint8_t *)buf + done, want, (off_t)(off + done));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        done += (uint64_t)r;
    }
    return (int64_t)done;
}

static int write_full(int fd, const void *buf, uint64_t n) {
    uint64_t done = 0;
    while (done < n) {
        size_t want = n - done > (1u << 30) ? (1u << 30) : (size_t)(n - done);
        ssize_t w = write(fd, (const uint8_t *)buf + done, want);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (w == 0) { errno = EIO; return -1; }
        done += (uint64_t)w;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* header validation                                                          */

static st_status parse_dtype(const char *path, const char *name, const cJSON *item, safetensors_dtype *out,
                             st_error *err) {
    shown_name a, b;
    if (!item) return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': missing \"dtype\"", path, show(&a, name));
    if (!cJSON_IsString(item))
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': \"dtype\" is not a string", path, show(&a, name));
    for (int d = 0; d < SAFETENSORS_DTYPE_COUNT; d++)
        if (strcmp(item->valuestring, dtype_info[d].name) == 0) {
            *out = (safetensors_dtype)d;
            return ST_OK;
        }
    for (size_t i = 0; i < sizeof unsupported_dtypes / sizeof *unsupported_dtypes; i++)
        if (strcmp(item->valuestring, unsupported_dtypes[i]) == 0)
            return st_fail(err, ST_EUNSUPPORTED, "%s: tensor '%s': dtype %s is not supported", path,
                           show(&a, name), unsupported_dtypes[i]);
    return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': unknown dtype \"%s\"", path, show(&a, name),
                   show(&b, item->valuestring));
}

static st_status parse_shape(const char *path, const char *name, const cJSON *item, safetensors_tensor *t,
                             st_error *err) {
    shown_name a;
    if (!item) return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': missing \"shape\"", path, show(&a, name));
    if (!cJSON_IsArray(item))
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': \"shape\" is not an array", path, show(&a, name));
    int ndim = cJSON_GetArraySize(item);
    if (ndim > SAFETENSORS_MAX_DIMS)
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': shape has %d dimensions, more than %d", path,
                       show(&a, name), ndim, SAFETENSORS_MAX_DIMS);
    uint64_t numel = 1;
    int overflow = 0, k = 0;
    for (const cJSON *d = item->child; d; d = d->next, k++) {
        uint64_t v;
        if (!json_uint(d, &v)) {
            if (cJSON_IsNumber(d) && d->valuedouble < 0)
                return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': shape dimension %d is negative (%g)", path,
                               show(&a, name), k, d->valuedouble);
            return st_fail(err, ST_ECORRUPT,
                           "%s: tensor '%s': shape dimension %d is not an integer in [0, 2^53)", path,
                           show(&a, name), k);
        }
        t->shape[k] = (int64_t)v;
        overflow |= __builtin_mul_overflow(numel, v, &numel);
    }
    uint64_t nbytes;
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)dtype_info[t->dtype].size, &nbytes))
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': shape's element count times %s size overflows 64 bits",
                       path, show(&a, name), dtype_info[t->dtype].name);
    t->ndim = ndim;
    t->numel = numel;
    t->nbytes = nbytes;
    return ST_OK;
}

static st_status parse_offsets(const char *path, const char *name, const cJSON *item, uint64_t data_size,
                               uint64_t data_start, safetensors_tensor *t, st_error *err) {
    shown_name a;
    uint64_t begin, end;
    if (!item)
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': missing \"data_offsets\"", path, show(&a, name));
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2 || !json_uint(item->child, &begin) ||
        !json_uint(item->child->next, &end))
        return st_fail(err, ST_ECORRUPT,
                       "%s: tensor '%s': \"data_offsets\" is not two non-negative integers below 2^53", path,
                       show(&a, name));
    if (begin > end)
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': data_offsets begin %" PRIu64 " > end %" PRIu64, path,
                       show(&a, name), begin, end);
    if (end > data_size)
        return st_fail(err, ST_ECORRUPT,
                       "%s: tensor '%s': data_offsets end %" PRIu64 " is past the end of the data (%" PRIu64
                       " bytes): file truncated?",
                       path, show(&a, name), end, data_size);
    if (end - begin != t->nbytes)
        return st_fail(err, ST_ECORRUPT,
                       "%s: tensor '%s': data_offsets span %" PRIu64 " bytes, but %" PRIu64 " %s elements need %" PRIu64,
                       path, show(&a, name), end - begin, t->numel, dtype_info[t->dtype].name, t->nbytes);
    t->offset = data_start + begin;
    return ST_OK;
}

/* Finds "dtype", "shape" and "data_offsets" in a tensor entry, rejecting
 * repeated keys (parsers that keep the first and the last would disagree
 * about the tensor). Other keys are ignored, as other readers do. */
static st_status parse_tensor(const char *path, const cJSON *entry, uint64_t data_size, uint64_t data_start,
                              safetensors_tensor *t, st_error *err) {
    shown_name a;
    const char *name = entry->string;
    if (!cJSON_IsObject(entry))
        return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': entry is not a JSON object", path, show(&a, name));
    static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
    const cJSON *found[3] = {NULL, NULL, NULL};
    for (const cJSON *c = entry->child; c; c = c->next)
        for (int k = 0; k < 3; k++)
            if (strcmp(c->string, keys[k]) == 0) {
                if (found[k])
                    return st_fail(err, ST_ECORRUPT, "%s: tensor '%s': key \"%s\" appears twice", path,
                                   show(&a, name), keys[k]);
                found[k] = c;
            }
    st_status s = parse_dtype(path, name, found[0], &t->dtype, err);
    if (s == ST_OK) s = parse_shape(path, name, found[1], t, err);
    if (s == ST_OK) s = parse_offsets(path, name, found[2], data_size, data_start, t, err);
    return s;
}

typedef struct { const char *const *names; size_t idx; } name_ref;
static int cmp_name_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    return strcmp(x->names[x->idx], y->names[y->idx]);
}

/* Sorts idx[0..n) by names[idx[i]]; returns the index of one of two equal
 * names, or -1 when all are distinct. Uses a scratch array so that the
 * comparison needs no global state. */
static st_status sort_names(const char *const *names, size_t n, size_t *idx, int64_t *dup) {
    name_ref *refs = malloc((n ? n : 1) * sizeof *refs);
    if (!refs) return ST_ENOMEM;
    for (size_t i = 0; i < n; i++) refs[i] = (name_ref){names, i};
    qsort(refs, n, sizeof *refs, cmp_name_ref);
    *dup = -1;
    for (size_t i = 0; i < n; i++) {
        if (idx) idx[i] = refs[i].idx;
        if (i && *dup < 0 && strcmp(names[refs[i].idx], names[refs[i - 1].idx]) == 0) *dup = (int64_t)refs[i].idx;
    }
    free(refs);
    return ST_OK;
}

typedef struct { uint64_t begin, end; size_t idx; } span;
static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* The format forbids tensors sharing bytes. Sorted by begin, a non-empty
 * tensor overlaps an earlier one iff it begins before the furthest end seen. */
static st_status check_overlaps(safetensors_file *f, st_error *err) {
    span *s = malloc((f->count ? f->count : 1) * sizeof *s);
    if (!s) return st_fail(err, ST_ENOMEM, "%s: out of memory checking %zu tensors", f->path, f->count);
    size_t n = 0;
    for (size_t i = 0; i < f->count; i++)
        if (f->tensors[i].nbytes)
            s[n++] = (span){f->tensors[i].offset, f->tensors[i].offset + f->tensors[i].nbytes, i};
    qsort(s, n, sizeof *s, cmp_span);
    st_status st = ST_OK;
    size_t far = 0;   /* the span with the furthest end so far */
    for (size_t i = 1; i < n; i++) {
        if (s[i].begin < s[far].end) {
            shown_name a, b;
            st = st_fail(err, ST_ECORRUPT,
                         "%s: tensors '%s' and '%s' overlap (bytes [%" PRIu64 ", %" PRIu64 ") and [%" PRIu64
                         ", %" PRIu64 ") of the data)",
                         f->path, show(&a, f->tensors[s[far].idx].name), show(&b, f->tensors[s[i].idx].name),
                         s[far].begin - f->data_start, s[far].end - f->data_start, s[i].begin - f->data_start,
                         s[i].end - f->data_start);
            break;
        }
        if (s[i].end > s[far].end) far = i;
    }
    free(s);
    return st;
}

static st_status parse_metadata(safetensors_file *f, const cJSON *meta, st_error *err) {
    shown_name a;
    if (!cJSON_IsObject(meta))
        return st_fail(err, ST_ECORRUPT, "%s: \"__metadata__\" is not a JSON object", f->path);
    size_t n = 0;
    for (const cJSON *c = meta->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return st_fail(err, ST_ECORRUPT, "%s: \"__metadata__\" value of '%s' is not a string", f->path,
                           show(&a, c->string));
        n++;
    }
    f->meta_keys = calloc(n ? n : 1, sizeof *f->meta_keys);
    f->meta_values = calloc(n ? n : 1, sizeof *f->meta_values);
    if (!f->meta_keys || !f->meta_values) return st_fail(err, ST_ENOMEM, "%s: out of memory for metadata", f->path);
    for (const cJSON *c = meta->child; c; c = c->next) {
        f->meta_keys[f->meta_count] = dup_string(c->string);
        f->meta_values[f->meta_count] = dup_string(c->valuestring);
        f->meta_count++;
        if (!f->meta_keys[f->meta_count - 1] || !f->meta_values[f->meta_count - 1])
            return st_fail(err, ST_ENOMEM, "%s: out of memory for metadata", f->path);
    }
    int64_t dup;
    if (sort_names((const char *const *)f->meta_keys, n, NULL, &dup) != ST_OK)
        return st_fail(err, ST_ENOMEM, "%s: out of memory for metadata", f->path);
    if (dup >= 0)
        return st_fail(err, ST_ECORRUPT, "%s: \"__metadata__\" key '%s' appears twice", f->path,
                       show(&a, f->meta_keys[dup]));
    return ST_OK;
}

static st_status parse_json(safetensors_file *f, const char *hdr, size_t hlen, st_error *err) {
    /* As the reference reader requires; also rules out a byte-order mark,
     * which cJSON would skip. */
    if (hdr[0] != '{')
        return st_fail(err, ST_ECORRUPT, "%s: header is not a JSON object (does not start with '{')", f->path);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, hlen, &end, 0);
    if (!root) {
        size_t at = end && end >= hdr && end <= hdr + hlen ? (size_t)(end - hdr) : 0;
        return st_fail(err, ST_ECORRUPT, "%s: header is not valid JSON (error near byte %zu of %zu)", f->path, at,
                       hlen);
    }
    st_status s = ST_OK;
    /* The format pads the header with spaces; anything else after the JSON
     * value is garbage another reader might interpret differently. */
    for (const char *p = end; p < hdr + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            s = st_fail(err, ST_ECORRUPT, "%s: header has bytes after the JSON object (at byte %zu of %zu)",
                        f->path, (size_t)(p - hdr), hlen);
            goto done;
        }
    if (!cJSON_IsObject(root)) {
        s = st_fail(err, ST_ECORRUPT, "%s: header is not a JSON object", f->path);
        goto done;
    }
    size_t n = 0;
    const cJSON *meta = NULL;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (strcmp(c->string, "__metadata__") == 0) {
            if (meta) {
                s = st_fail(err, ST_ECORRUPT, "%s: \"__metadata__\" appears twice", f->path);
                goto done;
            }
            meta = c;
        } else {
            n++;
        }
    }
    if (meta && (s = parse_metadata(f, meta, err)) != ST_OK) goto done;
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    f->by_name = calloc(n ? n : 1, sizeof *f->by_name);
    if (!f->tensors || !f->by_name) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory for %zu tensors", f->path, n);
        goto done;
    }
    uint64_t data_size = f->file_size - f->data_start;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (c == meta) continue;
        safetensors_tensor *t = &f->tensors[f->count];
        if ((s = parse_tensor(f->path, c, data_size, f->data_start, t, err)) != ST_OK) goto done;
        if (!(t->name = dup_string(c->string))) {
            s = st_fail(err, ST_ENOMEM, "%s: out of memory for tensor names", f->path);
            goto done;
        }
        f->count++;
    }
    const char **names = malloc((n ? n : 1) * sizeof *names);
    if (!names) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory for tensor names", f->path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) names[i] = f->tensors[i].name;
    int64_t dup;
    s = sort_names(names, n, f->by_name, &dup);
    free(names);
    if (s != ST_OK) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory for tensor names", f->path);
        goto done;
    }
    if (dup >= 0) {
        shown_name a;
        s = st_fail(err, ST_ECORRUPT, "%s: tensor '%s' appears twice in the header", f->path,
                    show(&a, f->tensors[dup].name));
        goto done;
    }
    s = check_overlaps(f, err);
done:
    cJSON_Delete(root);
    return s;
}

/* Checks the 8-byte length against the file; on success *hlen is the header
 * length. Needs only the first 8 bytes of buf (or fewer if the file is). */
static st_status check_length(const char *path, const uint8_t *buf, size_t len, uint64_t file_size,
                              uint64_t *hlen, st_error *err) {
    if (file_size < 8)
        return st_fail(err, ST_ECORRUPT, "%s: file is %" PRIu64 " bytes, too short for the 8-byte header length",
                       path, file_size);
    if (len < 8) return st_fail(err, ST_EINVAL, "%s: only %zu bytes given, need the 8-byte header length", path, len);
    uint64_t n = load_le64(buf);
    if (n == 0) return st_fail(err, ST_ECORRUPT, "%s: header length is 0", path);
    if (n > SAFETENSORS_MAX_HEADER)
        return st_fail(err, ST_ECORRUPT, "%s: header length %" PRIu64 " is above the %u-byte limit: not a safetensors file?",
                       path, n, SAFETENSORS_MAX_HEADER);
    if (n > file_size - 8)
        return st_fail(err, ST_ECORRUPT,
                       "%s: header length %" PRIu64 " runs past the end of the file (%" PRIu64 " bytes): file truncated?",
                       path, n, file_size);
    *hlen = n;
    return ST_OK;
}

static st_status parse_into(safetensors_file *f, const uint8_t *buf, size_t len, uint64_t file_size, st_error *err) {
    uint64_t hlen = 0;
    st_status s = check_length(f->path, buf, len, file_size, &hlen, err);
    if (s != ST_OK) return s;
    if (len - 8 < hlen)
        return st_fail(err, ST_EINVAL, "%s: only %zu bytes given, the header needs %" PRIu64, f->path, len, 8 + hlen);
    f->file_size = file_size;
    f->data_start = 8 + hlen;
    size_t bad = header_text_invalid_at(buf + 8, (size_t)hlen);
    if (bad < hlen)
        return st_fail(err, ST_ECORRUPT,
                       "%s: header is not valid UTF-8 JSON text (byte %zu of %" PRIu64 " is 0x%02x%s)", f->path, bad,
                       hlen, buf[8 + bad], buf[8 + bad] == '\\' ? ", a \\u0000 escape" : "");
    return parse_json(f, (const char *)buf + 8, (size_t)hlen, err);
}

static safetensors_file *new_file(const char *path) {
    safetensors_file *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    f->fd = -1;
    if (!(f->path = dup_string(path))) {
        free(f);
        return NULL;
    }
    return f;
}

st_status safetensors_parse(safetensors_file **out, const uint8_t *buf, size_t len, uint64_t file_size,
                            const char *name_for_errors, st_error *err) {
    const char *path = name_for_errors ? name_for_errors : "<memory>";
    if (!out) return st_fail(err, ST_EINVAL, "%s: safetensors_parse needs an output pointer", path);
    *out = NULL;
    if (!buf && len) return st_fail(err, ST_EINVAL, "%s: NULL buffer", path);
    if (len > file_size)
        return st_fail(err, ST_EINVAL, "%s: %zu bytes given, more than the file size %" PRIu64, path, len, file_size);
    safetensors_file *f = new_file(path);
    if (!f) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    st_status s = parse_into(f, buf, len, file_size, err);
    if (s != ST_OK) {
        safetensors_close(f);
        return s;
    }
    *out = f;
    return ST_OK;
}

st_status safetensors_open(safetensors_file **out, const char *path, st_error *err) {
    if (!out || !path) return st_fail(err, ST_EINVAL, "safetensors_open: NULL argument");
    *out = NULL;
    safetensors_file *f = new_file(path);
    if (!f) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    st_status s = ST_OK;
    uint8_t *hdr = NULL;
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        s = st_fail_errno(err, errno, "%s: cannot open", path);
        goto fail;
    }
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        s = st_fail_errno(err, errno, "%s: cannot stat", path);
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        s = st_fail(err, ST_EINVAL, "%s: not a regular file", path);
        goto fail;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t prefix[8];
    int64_t got = pread_full(f->fd, prefix, size < 8 ? size : 8, 0);
    if (got < 0) {
        s = st_fail_errno(err, errno, "%s: cannot read the header length", path);
        goto fail;
    }
    uint64_t hlen = 0;
    /* Validate the length before allocating anything from it. */
    if ((s = check_length(path, prefix, (size_t)got, size, &hlen, err)) != ST_OK) goto fail;
    if (!(hdr = malloc((size_t)(8 + hlen)))) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory for a %" PRIu64 "-byte header", path, hlen);
        goto fail;
    }
    got = pread_full(f->fd, hdr, 8 + hlen, 0);
    if (got < 0) {
        s = st_fail_errno(err, errno, "%s: cannot read the %" PRIu64 "-byte header", path, hlen);
        goto fail;
    }
    if ((uint64_t)got < 8 + hlen) {
        s = st_fail(err, ST_EIO, "%s: short read of the header (%" PRId64 " of %" PRIu64 " bytes): file changed?",
                    path, got, 8 + hlen);
        goto fail;
    }
    if ((s = parse_into(f, hdr, (size_t)(8 + hlen), size, err)) != ST_OK) goto fail;
    free(hdr);
    *out = f;
    return ST_OK;
fail:
    free(hdr);
    safetensors_close(f);
    return s;
}

void safetensors_close(safetensors_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (size_t i = 0; i < f->count; i++) free(f->tensors[i].name);
    for (size_t i = 0; i < f->meta_count; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->tensors);
    free(f->by_name);
    free(f->meta_keys);
    free(f->meta_values);
    free(f->path);
    free(f);
}

size_t safetensors_count(const safetensors_file *f) { return f ? f->count : 0; }

const safetensors_tensor *safetensors_at(const safetensors_file *f, size_t i) {
    return f && i < f->count ? &f->tensors[i] : NULL;
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name) {
    if (!f || !name) return NULL;
    size_t lo = 0, hi = f->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const safetensors_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid;
        else lo = mid + 1;
    }
    return NULL;
}

const char *safetensors_metadata(const safetensors_file *f, const char *key) {
    if (!f || !key) return NULL;
    for (size_t i = 0; i < f->meta_count; i++)
        if (strcmp(f->meta_keys[i], key) == 0) return f->meta_values[i];
    return NULL;
}

size_t safetensors_metadata_count(const safetensors_file *f) { return f ? f->meta_count : 0; }

const char *safetensors_metadata_at(const safetensors_file *f, size_t i, const char **value) {
    if (!f || i >= f->meta_count) return NULL;
    if (value) *value = f->meta_values[i];
    return f->meta_keys[i];
}

const char *safetensors_path(const safetensors_file *f) { return f ? f->path : NULL; }

/* ------------------------------------------------------------------------- */
/* reading tensor data                                                        */

typedef enum { OUT_F32, OUT_F64, OUT_I32, OUT_I64 } out_kind;
static const size_t out_size[] = {4, 8, 4, 8};
static const char *const out_name[] = {"float", "double", "int32", "int64"};

/* One integer element of dtype d at p; *too_big is set for U64 values above
 * INT64_MAX. */
static int64_t load_int(safetensors_dtype d, const uint8_t *p, int *too_big) {
    switch (d) {
    case SAFETENSORS_I64: { int64_t v; memcpy(&v, p, 8); return v; }
    case SAFETENSORS_I32: { int32_t v; memcpy(&v, p, 4); return v; }
    case SAFETENSORS_I16: { int16_t v; memcpy(&v, p, 2); return v; }
    case SAFETENSORS_I8: return (int8_t)p[0];
    case SAFETENSORS_U8: return p[0];
    case SAFETENSORS_BOOL: return p[0] != 0;
    case SAFETENSORS_U16: { uint16_t v; memcpy(&v, p, 2); return v; }
    case SAFETENSORS_U32: { uint32_t v; memcpy(&v, p, 4); return v; }
    case SAFETENSORS_U64: {
        uint64_t v;
        memcpy(&v, p, 8);
        if (v > (uint64_t)INT64_MAX) { *too_big = 1; return 0; }
        return (int64_t)v;
    }
    default: return 0;
    }
}

/* Converts k integer elements from src (dtype d) to dst (int32 or int64),
 * front to back, checking that each fits. src may lie inside dst's bytes at
 * or after dst, as long as element i of src starts no earlier than element i
 * of dst: then element i is loaded before anything at or after it is stored
 * (the in-place widening in read_tensor). Returns the index of the first
 * element that does not fit, or k. */
static uint64_t convert_ints(safetensors_dtype d, out_kind o, const uint8_t *src, uint8_t *dst, uint64_t k,
                             int64_t *bad_value, int *bad_unsigned) {
    size_t s = dtype_info[d].size, ds = out_size[o];
    for (uint64_t i = 0; i < k; i++) {
        int too_big = 0;
        int64_t v = load_int(d, src + i * s, &too_big);
        if (too_big || (o == OUT_I32 && (v < INT32_MIN || v > INT32_MAX))) {
            *bad_value = v;
            *bad_unsigned = too_big;
            return i;
        }
        if (o == OUT_I32) {
            int32_t w = (int32_t)v;
            memcpy(dst + i * ds, &w, 4);
        } else {
            memcpy(dst + i * ds, &v, 8);
        }
    }
    return k;
}

/* Float conversions, the hot path when loading weights: tight loops over
 * non-overlapping blocks, which the compiler can vectorize. f16 goes through
 * a table of all 65536 values when one is given (built by the caller from
 * st_f16_to_f32, once per large read). */
static void convert_floats(safetensors_dtype d, out_kind o, const void *restrict src, void *restrict dst, size_t k,
                           const float *f16_table) {
    if (o == OUT_F32) {
        float *restrict q = dst;
        if (d == SAFETENSORS_BF16) {
            const uint16_t *p = src;
            for (size_t i = 0; i < k; i++) {
                uint32_t u = (uint32_t)p[i] << 16;
                memcpy(&q[i], &u, 4);
            }
        } else if (d == SAFETENSORS_F16) {
            const uint16_t *p = src;
            if (f16_table) for (size_t i = 0; i < k; i++) q[i] = f16_table[p[i]];
            else for (size_t i = 0; i < k; i++) q[i] = st_f16_to_f32(p[i]);
        } else if (d == SAFETENSORS_F64) {
            const double *p = src;
            for (size_t i = 0; i < k; i++) q[i] = (float)p[i];
        } else {
            memcpy(q, src, k * 4);
        }
    } else {
        double *restrict q = dst;
        if (d == SAFETENSORS_BF16) {
            const uint16_t *p = src;
            for (size_t i = 0; i < k; i++) q[i] = st_bf16_to_f32(p[i]);
        } else if (d == SAFETENSORS_F16) {
            const uint16_t *p = src;
            if (f16_table) for (size_t i = 0; i < k; i++) q[i] = f16_table[p[i]];
            else for (size_t i = 0; i < k; i++) q[i] = st_f16_to_f32(p[i]);
        } else if (d == SAFETENSORS_F32) {
            const float *p = src;
            for (size_t i = 0; i < k; i++) q[i] = p[i];
        } else {
            memcpy(q, src, k * 8);
        }
    }
}

/* Converts k float elements from src to dst, which may overlap as described
 * at convert_ints(): each block of source elements is copied to the stack before
 * its destination is written, and a block's destination never reaches the
 * source of a later block. */
static void convert_floats_in_place(safetensors_dtype d, out_kind o, const uint8_t *src, uint8_t *dst, uint64_t k,
                                    const float *f16_table) {
    enum { BLOCK = 1024 };
    _Alignas(64) uint8_t tmp[BLOCK * 8];
    size_t ss = dtype_info[d].size, ds = out_size[o];
    for (uint64_t i = 0; i < k; i += BLOCK) {
        size_t b = k - i < BLOCK ? (size_t)(k - i) : BLOCK;
        memcpy(tmp, src + i * ss, b * ss);
        convert_floats(d, o, tmp, dst + i * ds, b, f16_table);
    }
}

static int same_representation(safetensors_dtype d, out_kind o) {
    return (d == SAFETENSORS_F32 && o == OUT_F32) || (d == SAFETENSORS_F64 && o == OUT_F64) ||
           (d == SAFETENSORS_I32 && o == OUT_I32) || (d == SAFETENSORS_I64 && o == OUT_I64);
}

static st_status check_read(safetensors_file *f, const safetensors_tensor *t, const void *out, st_error *err) {
    if (!f || !t) return st_fail(err, ST_EINVAL, "safetensors read: NULL file or tensor");
    shown_name a;
    if ((uintptr_t)t < (uintptr_t)f->tensors || (uintptr_t)t >= (uintptr_t)(f->tensors + f->count))
        return st_fail(err, ST_EINVAL, "%s: tensor '%s' does not belong to this file", f->path, show(&a, t->name));
    if (f->fd < 0)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': parsed from memory, no data to read", f->path,
                       show(&a, t->name));
    if (!out && t->nbytes)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': NULL output buffer", f->path, show(&a, t->name));
    return ST_OK;
}

static st_status read_bytes(safetensors_file *f, const safetensors_tensor *t, void *buf, uint64_t n, uint64_t off,
                            st_error *err) {
    shown_name a;
    int64_t got = pread_full(f->fd, buf, n, off);
    if (got < 0)
        return st_fail_errno(err, errno, "%s: tensor '%s': read of %" PRIu64 " bytes at offset %" PRIu64 " failed",
                             f->path, show(&a, t->name), n, off);
    if ((uint64_t)got < n)
        return st_fail(err, ST_EIO,
                       "%s: tensor '%s': short read at offset %" PRIu64 " (%" PRId64 " of %" PRIu64
                       " bytes): file truncated?",
                       f->path, show(&a, t->name), off, got, n);
    return ST_OK;
}

/* Elements [first, first + n) of t; whole: n must be all of them. */
static st_status read_tensor(safetensors_file *f, const safetensors_tensor *t, uint64_t first, void *out, uint64_t n,
                             out_kind o, int whole, st_error *err) {
    st_status s = check_read(f, t, out, err);
    if (s != ST_OK) return s;
    shown_name a;
    if (whole && n != t->numel)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': asked for %" PRIu64 " elements, it has %" PRIu64, f->path,
                       show(&a, t->name), n, t->numel);
    if (first > t->numel || n > t->numel - first)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': elements [%" PRIu64 ", +%" PRIu64 ") are past its %" PRIu64,
                       f->path, show(&a, t->name), first, n, t->numel);
    int want_float = o == OUT_F32 || o == OUT_F64;
    if (want_float != dtype_is_float(t->dtype))
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': dtype %s cannot be read as %s", f->path, show(&a, t->name),
                       dtype_info[t->dtype].name, out_name[o]);
    size_t ss = dtype_info[t->dtype].size, ds = out_size[o];
    const uint64_t base = t->offset + first * ss;
    if (same_representation(t->dtype, o)) return read_bytes(f, t, out, n * ss, base, err);

    uint64_t per_chunk = SAFETENSORS_IO_CHUNK / (ss > ds ? ss : ds);
    /* Widening (BF16 -> float, ...) converts in place: each chunk's source
     * bytes are read into the tail of the chunk's destination. Narrowing
     * (F64 -> float, I64 -> int32) goes through a bounce buffer. */
    uint8_t *bounce = NULL;
    float *f16_table = NULL;
    if (ss > ds) {
        uint64_t b = n * ss < SAFETENSORS_IO_CHUNK ? n * ss : SAFETENSORS_IO_CHUNK;
        if (!(bounce = malloc((size_t)b)))
            return st_fail(err, ST_ENOMEM, "%s: tensor '%s': out of memory for a read buffer", f->path,
                           show(&a, t->name));
    }
    if (t->dtype == SAFETENSORS_F16 && n >= (1u << 18) && (f16_table = malloc(65536 * sizeof *f16_table)))
        for (uint32_t h = 0; h < 65536; h++) f16_table[h] = st_f16_to_f32((uint16_t)h);
    for (uint64_t i0 = 0; i0 < n; i0 += per_chunk) {
        uint64_t k = n - i0 < per_chunk ? n - i0 : per_chunk;
        uint8_t *dst = (uint8_t *)out + i0 * ds;
        uint8_t *src = bounce ? bounce : dst + k * (ds - ss);
        if ((s = read_bytes(f, t, src, k * ss, base + i0 * ss, err)) != ST_OK) break;
        if (want_float) {
            convert_floats_in_place(t->dtype, o, src, dst, k, f16_table);
            continue;
        }
        int64_t bad_value = 0;
        int bad_unsigned = 0;
        uint64_t bad = convert_ints(t->dtype, o, src, dst, k, &bad_value, &bad_unsigned);
        if (bad < k) {
            if (bad_unsigned)
                s = st_fail(err, ST_ECORRUPT, "%s: tensor '%s': element %" PRIu64 " is above %" PRId64 ", does not fit in %s",
                            f->path, show(&a, t->name), i0 + bad, INT64_MAX, out_name[o]);
            else
                s = st_fail(err, ST_ECORRUPT, "%s: tensor '%s': element %" PRIu64 " = %" PRId64 " does not fit in %s",
                            f->path, show(&a, t->name), i0 + bad, bad_value, out_name[o]);
            break;
        }
    }
    free(bounce);
    free(f16_table);
    return s;
}

st_status safetensors_read_f32(safetensors_file *f, const safetensors_tensor *t, float *out, uint64_t n, st_error *err) {
    return read_tensor(f, t, 0, out, n, OUT_F32, 1, err);
}
st_status safetensors_read_f32_range(safetensors_file *f, const safetensors_tensor *t, uint64_t first, float *out,
                                     uint64_t n, st_error *err) {
    return read_tensor(f, t, first, out, n, OUT_F32, 0, err);
}
st_status safetensors_read_f64(safetensors_file *f, const safetensors_tensor *t, double *out, uint64_t n, st_error *err) {
    return read_tensor(f, t, 0, out, n, OUT_F64, 1, err);
}
st_status safetensors_read_i32(safetensors_file *f, const safetensors_tensor *t, int32_t *out, uint64_t n, st_error *err) {
    return read_tensor(f, t, 0, out, n, OUT_I32, 1, err);
}
st_status safetensors_read_i64(safetensors_file *f, const safetensors_tensor *t, int64_t *out, uint64_t n, st_error *err) {
    return read_tensor(f, t, 0, out, n, OUT_I64, 1, err);
}

st_status safetensors_read_raw(safetensors_file *f, const safetensors_tensor *t, void *out, uint64_t nbytes,
                               st_error *err) {
    st_status s = check_read(f, t, out, err);
    if (s != ST_OK) return s;
    if (nbytes != t->nbytes) {
        shown_name a;
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': asked for %" PRIu64 " bytes, it has %" PRIu64, f->path,
                       show(&a, t->name), nbytes, t->nbytes);
    }
    return read_bytes(f, t, out, nbytes, t->offset, err);
}

/* ------------------------------------------------------------------------- */
/* writing                                                                    */

typedef struct { char *p; size_t len, cap; int oom; } strbuf;

static void sb_add(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

static void sb_str(strbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) sb_add(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* A JSON string literal; s is valid UTF-8, so only quotes, backslashes and
 * control characters need escaping. */
static void sb_json_string(strbuf *b, const char *s) {
    sb_add(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        sb_add(b, run, (size_t)(s - run));
        if (c == '"') sb_str(b, "\\\"");
        else if (c == '\\') sb_str(b, "\\\\");
        else sb_printf(b, "\\u%04x", c);
        run = s + 1;
    }
    sb_add(b, run, (size_t)(s - run));
    sb_add(b, "\"", 1);
}

static st_status check_entry(const char *path, const safetensors_entry *e, size_t i, int streamed, uint64_t *nbytes,
                             st_error *err) {
    shown_name a;
    if (!e->name) return st_fail(err, ST_EINVAL, "%s: entry %zu has no name", path, i);
    const char *nm = show(&a, e->name);
    size_t len = strlen(e->name);
    if (utf8_invalid_at((const uint8_t *)e->name, len) < len)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': name is not valid UTF-8", path, nm);
    if (strcmp(e->name, "__metadata__") == 0)
        return st_fail(err, ST_EINVAL, "%s: \"__metadata__\" is reserved, not a tensor name", path);
    if ((unsigned)e->dtype >= SAFETENSORS_DTYPE_COUNT)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': invalid dtype %d", path, nm, (int)e->dtype);
    if (e->from_f32 && e->dtype != SAFETENSORS_F32 && e->dtype != SAFETENSORS_BF16 && e->dtype != SAFETENSORS_F16)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': float data cannot be written as %s (only F32, BF16, F16)",
                       path, nm, dtype_info[e->dtype].name);
    if (e->ndim < 0 || e->ndim > SAFETENSORS_MAX_DIMS)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': %d dimensions, must be 0..%d", path, nm, e->ndim,
                       SAFETENSORS_MAX_DIMS);
    uint64_t numel = 1;
    int overflow = 0;
    for (int k = 0; k < e->ndim; k++) {
        if (e->shape[k] < 0 || (uint64_t)e->shape[k] >= SAFETENSORS_MAX_INTEGER)
            return st_fail(err, ST_EINVAL, "%s: tensor '%s': dimension %d is %" PRId64 ", must be in [0, 2^53)", path,
                           nm, k, e->shape[k]);
        overflow |= __builtin_mul_overflow(numel, (uint64_t)e->shape[k], &numel);
    }
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)dtype_info[e->dtype].size, nbytes) ||
        *nbytes >= SAFETENSORS_MAX_INTEGER)
        return st_fail(err, ST_EINVAL, "%s: tensor '%s': too many bytes", path, nm);
    if (*nbytes && !e->data && !streamed) return st_fail(err, ST_EINVAL, "%s: tensor '%s': NULL data", path, nm);
    return ST_OK;
}

/* Builds the header: __metadata__ first, then the tensors in the given order,
 * laid out back to back; padded with spaces so the data starts at a multiple
 * of 8 bytes. */
static st_status build_header(const char *path, const safetensors_entry *e, size_t n, const uint64_t *nbytes,
                              const char *const *kv, strbuf *b, st_error *err) {
    sb_str(b, "{");
    if (kv && kv[0]) {
        sb_str(b, "\"__metadata__\":{");
        for (size_t i = 0; kv[i]; i += 2) {
            if (i) sb_str(b, ",");
            sb_json_string(b, kv[i]);
            sb_str(b, ":");
            sb_json_string(b, kv[i + 1]);
        }
        sb_str(b, "}");
    }
    uint64_t off = 0;
    for (size_t i = 0; i < n; i++) {
        if (i || (kv && kv[0])) sb_str(b, ",");
        sb_json_string(b, e[i].name);
        sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", dtype_info[e[i].dtype].name);
        for (int k = 0; k < e[i].ndim; k++) sb_printf(b, "%s%" PRId64, k ? "," : "", e[i].shape[k]);
        if (off + nbytes[i] >= SAFETENSORS_MAX_INTEGER)
            return st_fail(err, ST_EINVAL, "%s: tensors total more than 2^53 bytes", path);
        sb_printf(b, "],\"data_offsets\":[%" PRIu64 ",%" PRIu64 "]}", off, off + nbytes[i]);
        off += nbytes[i];
    }
    sb_str(b, "}");
    while ((8 + b->len) % 8) sb_str(b, " ");
    if (b->oom) return st_fail(err, ST_ENOMEM, "%s: out of memory building the header", path);
    if (b->len > SAFETENSORS_MAX_HEADER)
        return st_fail(err, ST_EINVAL, "%s: header would be %zu bytes, above the %u-byte limit readers accept", path,
                       b->len, SAFETENSORS_MAX_HEADER);
    return ST_OK;
}

static st_status check_metadata(const char *path, const char *const *kv, st_error *err) {
    if (!kv) return ST_OK;
    shown_name a;
    size_t n = 0;
    for (; kv[2 * n]; n++) {
        const char *k = kv[2 * n], *v = kv[2 * n + 1];
        if (!v) return st_fail(err, ST_EINVAL, "%s: metadata key '%s' has no value", path, show(&a, k));
        if (utf8_invalid_at((const uint8_t *)k, strlen(k)) < strlen(k) ||
            utf8_invalid_at((const uint8_t *)v, strlen(v)) < strlen(v))
            return st_fail(err, ST_EINVAL, "%s: metadata '%s' is not valid UTF-8", path, show(&a, k));
    }
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) keys[i] = kv[2 * i];
    int64_t dup;
    st_status s = sort_names(keys, n, NULL, &dup);
    free(keys);
    if (s != ST_OK) return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    if (dup >= 0) return st_fail(err, ST_EINVAL, "%s: metadata key '%s' given twice", path, show(&a, kv[2 * dup]));
    return ST_OK;
}

static st_status write_entry(int fd, const char *path, const safetensors_entry *e, uint64_t nbytes, uint8_t **bounce,
                             st_error *err) {
    shown_name a;
    if (!e->from_f32 || e->dtype == SAFETENSORS_F32) {
        if (write_full(fd, e->data, nbytes) != 0)
            return st_fail_errno(err, errno, "%s: tensor '%s': write of %" PRIu64 " bytes failed", path,
                                 show(&a, e->name), nbytes);
        return ST_OK;
    }
    /* float -> BF16/F16, a chunk at a time through a bounded buffer */
    if (!*bounce && !(*bounce = malloc(SAFETENSORS_IO_CHUNK)))
        return st_fail(err, ST_ENOMEM, "%s: out of memory for a write buffer", path);
    const float *src = e->data;
    uint64_t n = nbytes / 2, per_chunk = SAFETENSORS_IO_CHUNK / 2;
    for (uint64_t i0 = 0; i0 < n; i0 += per_chunk) {
        uint64_t k = n - i0 < per_chunk ? n - i0 : per_chunk;
        uint16_t *dst = (uint16_t *)*bounce;
        if (e->dtype == SAFETENSORS_BF16)
            for (uint64_t i = 0; i < k; i++) dst[i] = st_f32_to_bf16(src[i0 + i]);
        else
            for (uint64_t i = 0; i < k; i++) dst[i] = st_f32_to_f16(src[i0 + i]);
        if (write_full(fd, dst, k * 2) != 0)
            return st_fail_errno(err, errno, "%s: tensor '%s': write failed", path, show(&a, e->name));
    }
    return ST_OK;
}

st_status safetensors_write(const char *path, const safetensors_entry *entries, size_t n,
                            const char *const *metadata_kv, st_error *err) {
    return safetensors_write_streamed(path, entries, n, metadata_kv, NULL, NULL, err);
}

st_status safetensors_write_streamed(const char *path, const safetensors_entry *entries, size_t n,
                                     const char *const *metadata_kv, safetensors_fill_fn fill, void *ctx,
                                     st_error *err) {
    if (!path) return st_fail(err, ST_EINVAL, "safetensors_write: NULL path");
    if (n && !entries) return st_fail(err, ST_EINVAL, "%s: NULL entries", path);
    st_status s = check_metadata(path, metadata_kv, err);
    if (s != ST_OK) return s;

    uint64_t *nbytes = malloc((n ? n : 1) * sizeof *nbytes);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    strbuf hdr = {0};
    uint8_t *bounce = NULL;
    st_atomic_file out = {0};
    if (!nbytes || !names) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if ((s = check_entry(path, &entries[i], i, fill != NULL, &nbytes[i], err)) != ST_OK) goto done;
        names[i] = entries[i].name;
    }
    int64_t dup;
    if (sort_names(names, n, NULL, &dup) != ST_OK) {
        s = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (dup >= 0) {
        shown_name a;
        s = st_fail(err, ST_EINVAL, "%s: tensor '%s' given twice", path, show(&a, entries[dup].name));
        goto done;
    }
    if ((s = build_header(path, entries, n, nbytes, metadata_kv, &hdr, err)) != ST_OK) goto done;

    if ((s = st_atomic_open(&out, path, 0, err)) != ST_OK) goto done;
    uint8_t len8[8];
    uint64_t hlen = hdr.len;
    memcpy(len8, &hlen, 8);
    if (write_full(out.fd, len8, 8) != 0 || write_full(out.fd, hdr.p, hdr.len) != 0) {
        s = st_fail_errno(err, errno, "%s: writing the header to %s failed", path, out.tmp);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        if (!nbytes[i]) continue;
        safetensors_entry e = entries[i];
        if (fill && (s = fill(ctx, i, &e.data, err)) != ST_OK) goto done;
        if (!e.data) {
            shown_name a;
            s = st_fail(err, ST_EINVAL, "%s: tensor '%s': NULL data", path, show(&a, e.name));
            goto done;
        }
        if ((s = write_entry(out.fd, path, &e, nbytes[i], &bounce, err)) != ST_OK) goto done;
    }
    s = st_atomic_commit(&out, err);
done:
    st_atomic_abort(&out);   /* a failed write leaves path untouched and no debris */
    free(bounce);
    free(hdr.p);
    free(names);
    free(nbytes);
    return s;
}
