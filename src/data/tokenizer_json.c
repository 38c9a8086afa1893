/* tokenizer_json.c - reads a Hugging Face tokenizer.json into the tokenizer
 * of tokenizer.c, exactly as the library (tokenizers 0.22) would build it, or
 * refuses it naming the part this build cannot reproduce exactly.
 *
 * The file is hostile input (10+ MB for Llama 3): cJSON parses it (the JSON
 * reader the rest of Strata uses), with its nesting limit; every field is
 * type-checked before use and every error names the file and the field (or
 * line and byte for malformed JSON). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "data/tokenizer_internal.h"
#include "strata/tokenizer.h"

/* The Split regexes this build has matchers for, as the files write them. */
static const struct {
    const char *regex;
    tok_pretok pretok;
    const char *name;
} known_regexes[] = {
    {"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+", PRETOK_GPT2, "gpt2"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     PRETOK_LLAMA3, "llama3"},
    {"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
     "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
     PRETOK_QWEN2, "qwen2"},
};

/* ---- reading JSON ---------------------------------------------------------- */

static void line_col(const char *text, size_t at, size_t *line, size_t *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < at; i++) {
        if (text[i] == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

/* Parses text[0, size) (NUL-terminated) as one JSON document; name is for errors. */
static st_status parse_json(const char *text, size_t size, const char *name, cJSON **root, st_error *err) {
    *root = NULL;
    /* cJSON ends a string at an escaped NUL without saying so; no real
     * vocabulary has one, so refuse it rather than read a shorter token. */
    for (size_t i = 0; i + 6 <= size; i++) {
        if (text[i] != '\\') continue;
        if (text[i + 1] == 'u' && !memcmp(text + i + 2, "0000", 4)) {
            size_t line, col;
            line_col(text, i, &line, &col);
            return st_fail(err, ST_EUNSUPPORTED, "%s: line %zu, column %zu (byte %zu): a string holds \\u0000, "
                           "which this reader does not support", name, line, col, i);
        }
        i++;   /* skip the escaped character (an escaped backslash included) */
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, size, &end, 0);
    size_t at = end && end >= text && end <= text + size ? (size_t)(end - text) : 0;
    if (doc) {   /* only blanks may follow the document */
        while (at < size && (text[at] == ' ' || text[at] == '\t' || text[at] == '\n' || text[at] == '\r')) at++;
        if (at < size) {
            cJSON_Delete(doc);
            doc = NULL;
        }
    }
    if (!doc) {
        size_t line, col;
        line_col(text, at, &line, &col);
        return st_fail(err, ST_ECORRUPT, "%s: malformed JSON at line %zu, column %zu (byte %zu)", name, line, col, at);
    }
    *root = doc;
    return ST_OK;
}

st_status tok_read_json(const char *path, cJSON **root, st_error *err) {
    char *text;
    size_t size;
    *root = NULL;
    st_status st = tok_read_file(path, &text, &size, err);
    if (st) return st;
    st = parse_json(text, size, path, root, err);
    free(text);
    return st;
}

/* ---- field helpers ------------------------------------------------------------ */

typedef struct loader {
    const char *path;
    st_error *err;
    tokenizer *t;
    int16_t byte_of_cp[512];
} loader;

static const cJSON *field(const cJSON *obj, const char *name) {
    return cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}
static int is_null(const cJSON *v) { return !v || cJSON_IsNull(v); }
static const char *type_of(const cJSON *obj) {
    const cJSON *ty = field(obj, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

static st_status unsupported(loader *L, const char *what, const char *detail) {
    return st_fail(L->err, ST_EUNSUPPORTED, "%s: %s %s is not supported (Strata reads byte-level BPE tokenizers: "
                   "see tokenizer_load_json in strata/tokenizer.h)", L->path, what, detail);
}
static st_status corrupt(loader *L, const char *what, const char *detail) {
    return st_fail(L->err, ST_ECORRUPT, "%s: %s %s", L->path, what, detail);
}

/* A boolean field: absent gives dflt; *out = -1 for a wrong type. */
static int bool_field(const cJSON *obj, const char *name, int dflt) {
    const cJSON *v = field(obj, name);
    if (!v) return dflt;
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : -1;
}

/* ---- the model --------------------------------------------------------------- */

st_status tok_set_vocab(tokenizer *t, const cJSON *vocab, const int16_t *byte_of_cp, const char *path,
                        const char *where, st_status outside, st_error *err) {
    if (!cJSON_IsObject(vocab))
        return st_fail(err, ST_ECORRUPT, "%s: %snot a JSON object of token strings to ids", path, where);
    int n = cJSON_GetArraySize(vocab);
    if (n <= 0) return st_fail(err, ST_ECORRUPT, "%s: %sno tokens", path, where);
    size_t pool = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) pool += strlen(e->string);
    t->n_model = t->n_vocab = n;
    t->tok_off = calloc((size_t)n + 1, sizeof(uint32_t));
    t->tok_bytes = malloc(pool + 1);
    char *bytes = malloc(pool + 1);
    uint32_t *lens = calloc((size_t)n, sizeof(uint32_t));
    const char **at = calloc((size_t)n, sizeof *at);
    st_status st = ST_OK;
    if (!t->tok_off || !t->tok_bytes || !bytes || !lens || !at) {
        st = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    size_t used = 0;
    for (const cJSON *e = vocab->child; e; e = e->next) {
        double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(v >= 0 && v < n) || v != (double)(int)v) {
            st = st_fail(err, ST_ECORRUPT, "%s: %stoken \"%.60s\" has %s id (the %d ids must be 0..%d)", path, where,
                         e->string, cJSON_IsNumber(e) ? "an out-of-range" : "a non-numeric", n, n - 1);
            goto done;
        }
        int id = (int)v;
        if (at[id]) {
            st = st_fail(err, ST_ECORRUPT, "%s: %sid %d is given twice", path, where, id);
            goto done;
        }
        long bl = tok_unicode_to_bytes(byte_of_cp, e->string, strlen(e->string), bytes + used);
        if (bl <= 0) {
            st = st_fail(err, outside, "%s: %stoken \"%.60s\" (id %d) is %s, not a byte-level token", path, where,
                         e->string, id, bl == 0 ? "empty" : "outside GPT-2's byte alphabet");
            goto done;
        }
        at[id] = bytes + used;
        lens[id] = (uint32_t)bl;
        used += (size_t)bl;
    }
    uint32_t o = 0;
    for (int id = 0; id < n; id++) {
        t->tok_off[id] = o;
        memcpy(t->tok_bytes + o, at[id], lens[id]);
        o += lens[id];
    }
    t->tok_off[n] = o;
    st = tok_index_vocab(t, path, err);
done:
    free(bytes); free(lens); free(at);
    return st;
}

/* One part of a merge, a string in the byte-level alphabet, to its id. */
static int32_t merge_part(loader *L, const char *s, size_t n, char *buf) {
    long bl = tok_unicode_to_bytes(L->byte_of_cp, s, n, buf);
    return bl > 0 ? tok_find_bytes(L->t, buf, (size_t)bl) : -1;
}

static st_status load_merges(loader *L, const cJSON *merges) {
    if (!cJSON_IsArray(merges)) return corrupt(L, "model.merges", "is not an array");
    int n = cJSON_GetArraySize(merges);
    int32_t *pairs = malloc(2 * ((size_t)n + 1) * sizeof(int32_t));
    size_t buf_cap = 0;
    char *buf = NULL;
    st_status st = ST_OK;
    if (!pairs) return st_fail(L->err, ST_ENOMEM, "%s: out of memory", L->path);
    int k = 0;
    for (const cJSON *m = merges->child; m; m = m->next, k++) {
        const char *a = NULL, *b = NULL;
        size_t la = 0, lb = 0;
        if (cJSON_IsString(m)) {   /* "a b": exactly one space, as the library splits it */
            const char *s = m->valuestring, *sp = strchr(s, ' ');
            if (sp && !strchr(sp + 1, ' ')) {
                a = s, la = (size_t)(sp - s);
                b = sp + 1, lb = strlen(b);
            }
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {   /* ["a", "b"] */
            a = m->child->valuestring, la = strlen(a);
            b = m->child->next->valuestring, lb = strlen(b);
        }
        if (!a) {
            st = st_fail(L->err, ST_ECORRUPT, "%s: model.merges[%d] is neither \"a b\" nor [\"a\", \"b\"]", L->path, k);
            break;
        }
        if (la + lb + 1 > buf_cap) {
            buf_cap = 2 * (la + lb + 1);
            char *nb = realloc(buf, buf_cap);
            if (!nb) {
                st = st_fail(L->err, ST_ENOMEM, "%s: out of memory", L->path);
                break;
            }
            buf = nb;
        }
        int32_t ia = merge_part(L, a, la, buf), ib = merge_part(L, b, lb, buf);
        if (ia < 0 || ib < 0) {
            st = st_fail(L->err, ST_ECORRUPT, "%s: model.merges[%d]: token \"%.*s\" is not in the vocabulary", L->path,
                         k, (int)(ia < 0 ? (la > 60 ? 60 : la) : (lb > 60 ? 60 : lb)), ia < 0 ? a : b);
            break;
        }
        pairs[2 * k] = ia;
        pairs[2 * k + 1] = ib;
    }
    if (!st) {
        char what[PATH_MAX + 32];
        snprintf(what, sizeof what, "%s: model.merges", L->path);
        st = tok_set_merges(L->t, pairs, (size_t)k, what, L->err);
    }
    free(pairs);
    free(buf);
    return st;
}

static st_status load_model(loader *L, const cJSON *model) {
    if (!cJSON_IsObject(model)) return corrupt(L, "model", "is missing or not an object");
    const char *ty = type_of(model);
    /* Hugging Face's gpt2 file has no "type"; the library then tries each
     * model in turn, and a BPE is what has merges. */
    if (ty ? strcmp(ty, "BPE") != 0 : !field(model, "merges")) {
        char d[96];
        snprintf(d, sizeof d, "type \"%.60s\"", ty ? ty : "(none)");
        return unsupported(L, "model", d);
    }
    if (!is_null(field(model, "dropout"))) return unsupported(L, "model.dropout", "other than null");
    if (bool_field(model, "byte_fallback", 0) != 0) return unsupported(L, "model.byte_fallback", "other than false");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        const cJSON *v = field(model, affixes[k]);
        if (!is_null(v) && !(cJSON_IsString(v) && !v->valuestring[0])) {
            char w[64];
            snprintf(w, sizeof w, "model.%s", affixes[k]);
            return unsupported(L, w, "other than null or \"\"");
        }
    }
    /* unk_token and fuse_unk only act on a character without a token, and a
     * byte-level vocabulary has every byte (checked), so they never act. */
    int ig = bool_field(model, "ignore_merges", 0);
    if (ig < 0) return corrupt(L, "model.ignore_merges", "is not a boolean");
    L->t->ignore_merges = ig;
    st_status st = tok_set_vocab(L->t, field(model, "vocab"), L->byte_of_cp, L->path, "model.vocab: ", ST_EUNSUPPORTED,
                                 L->err);
    if (!st) st = load_merges(L, field(model, "merges"));
    return st;
}

/* ---- added tokens --------------------------------------------------------------
 * The library does not take the ids written in the file: it adds the tokens
 * in order, each getting the model's id for its content if there is one,
 * else the next free id after the model's. A file whose ids differ from that
 * would be read differently by the library, so it is refused. */

static st_status load_added(loader *L, const cJSON *list) {
    tokenizer *t = L->t;
    if (is_null(list)) return ST_OK;
    if (!cJSON_IsArray(list)) return corrupt(L, "added_tokens", "is not an array");
    int k = 0, next_id = t->n_model;
    for (const cJSON *a = list->child; a; a = a->next, k++) {
        char w[64];
        snprintf(w, sizeof w, "added_tokens[%d]", k);
        const cJSON *content = field(a, "content"), *id = field(a, "id");
        if (!cJSON_IsString(content) || !content->valuestring[0] || !cJSON_IsNumber(id))
            return corrupt(L, w, "needs a non-empty \"content\" string and a numeric \"id\"");
        const char *c = content->valuestring;
        size_t len = strlen(c);
        if (!tok_utf8_valid(c, len)) return corrupt(L, w, "has content that is not valid UTF-8");
        static const char *const flags[] = {"single_word", "lstrip", "rstrip"};
        for (int f = 0; f < 3; f++) {
            int v = bool_field(a, flags[f], 0);
            if (v < 0) return corrupt(L, w, "has a flag that is not a boolean");
            if (v) {
                char d[160];
                snprintf(d, sizeof d, "(\"%.60s\") with %s true", c, flags[f]);
                return unsupported(L, w, d);
            }
        }
        int special = bool_field(a, "special", 0), normalized = bool_field(a, "normalized", 1);
        if (special < 0 || normalized < 0) return corrupt(L, w, "has a flag that is not a boolean");
        for (int j = 0; j < t->n_added; j++)
            if (t->added[j].len == len && !memcmp(t->added[j].content, c, len)) return corrupt(L, w, "repeats a token");
        /* the model's token for this content, if any (its bytes in the alphabet) */
        char *buf = malloc(len + 1);
        if (!buf) return st_fail(L->err, ST_ENOMEM, "%s: out of memory", L->path);
        long bl = tok_unicode_to_bytes(L->byte_of_cp, c, len, buf);
        int32_t want = bl > 0 ? tok_find_bytes(t, buf, (size_t)bl) : -1;
        int fresh = want < 0;
        if (fresh) want = next_id;
        if (id->valuedouble != (double)want) {
            free(buf);
            return st_fail(L->err, ST_ECORRUPT, "%s: %s (\"%.60s\") has id %.0f, but the library gives it id %d "
                           "(the model's id for that text, or the next after the model's and earlier added tokens)",
                           L->path, w, c, id->valuedouble, want);
        }
        st_status st = tok_add_token(t, c, len, want, special, normalized, L->err);
        if (!st && fresh) {
            /* Decoding it: the ByteLevel decoder maps each character back to
             * its byte, or, when one is outside the alphabet, gives the text. */
            const char *bytes = bl > 0 ? buf : c;
            size_t n = bl > 0 ? (size_t)bl : len;
            char *nb = realloc(t->tok_bytes, t->tok_off[t->n_vocab] + n + 1);
            uint32_t *no = realloc(t->tok_off, ((size_t)t->n_vocab + 2) * sizeof(uint32_t));
            if (nb) t->tok_bytes = nb;
            if (no) t->tok_off = no;
            if (!nb || !no) st = st_fail(L->err, ST_ENOMEM, "%s: out of memory", L->path);
            else {
                memcpy(t->tok_bytes + t->tok_off[t->n_vocab], bytes, n);
                t->tok_off[t->n_vocab + 1] = t->tok_off[t->n_vocab] + (uint32_t)n;
                t->n_vocab++;
                next_id++;
            }
        }
        free(buf);
        if (st) return st;
    }
    return ST_OK;
}

/* ---- pre-tokenizer, post-processor, decoder ------------------------------------- */

static st_status byte_level(loader *L, const cJSON *bl, const char *where, int want_regex) {
    char w[96];
    snprintf(w, sizeof w, "%s (ByteLevel)", where);
    int aps = bool_field(bl, "add_prefix_space", -2);
    if (aps == -2) return corrupt(L, w, "has no add_prefix_space (the library requires it)");
    if (aps != 0) return unsupported(L, w, "with add_prefix_space other than false");
    int re = bool_field(bl, "use_regex", 1);
    if (re != want_regex)
        return unsupported(L, w, want_regex ? "with use_regex false" : "with use_regex true (after a Split it must be false)");
    return ST_OK;
}

static st_status split(loader *L, const cJSON *sp) {
    const cJSON *pattern = field(sp, "pattern"), *re = field(pattern, "Regex");
    const cJSON *behavior = field(sp, "behavior");
    if (!cJSON_IsString(re)) return unsupported(L, "pre_tokenizer Split", "with a pattern that is not {\"Regex\": ...}");
    if (!cJSON_IsString(behavior) || strcmp(behavior->valuestring, "Isolated") != 0)
        return unsupported(L, "pre_tokenizer Split", "with a behavior other than \"Isolated\"");
    if (bool_field(sp, "invert", 0) != 0) return unsupported(L, "pre_tokenizer Split", "with invert other than false");
    for (size_t k = 0; k < sizeof known_regexes / sizeof known_regexes[0]; k++)
        if (!strcmp(re->valuestring, known_regexes[k].regex)) {
            L->t->pretok = known_regexes[k].pretok;
            snprintf(L->t->name, sizeof L->t->name, "%s", known_regexes[k].name);
            return ST_OK;
        }
    return st_fail(L->err, ST_EUNSUPPORTED, "%s: pre_tokenizer Split regex \"%.300s\" is not supported (this build "
                   "has matchers for the regexes of GPT-2, Llama 3 and Qwen2 only)", L->path, re->valuestring);
}

static st_status load_pre_tokenizer(loader *L, const cJSON *pre) {
    const char *ty = type_of(pre);
    if (ty && !strcmp(ty, "ByteLevel")) {
        L->t->pretok = PRETOK_GPT2;
        return byte_level(L, pre, "pre_tokenizer", 1);
    }
    if (ty && !strcmp(ty, "Sequence")) {
        const cJSON *list = field(pre, "pretokenizers");
        const cJSON *first = cJSON_IsArray(list) ? list->child : NULL, *second = first ? first->next : NULL;
        if (!first || !second || second->next || !type_of(first) || strcmp(type_of(first), "Split") ||
            !type_of(second) || strcmp(type_of(second), "ByteLevel"))
            return unsupported(L, "pre_tokenizer Sequence", "other than [Split, ByteLevel]");
        st_status st = split(L, first);
        return st ? st : byte_level(L, second, "pre_tokenizer.pretokenizers[1]", 0);
    }
    char d[96];
    snprintf(d, sizeof d, "of type \"%.60s\"", ty ? ty : "(none)");
    return unsupported(L, "pre_tokenizer", d);
}

/* The first id of a TemplateProcessing special token. */
static st_status template_id(loader *L, const cJSON *specials, const cJSON *piece, int32_t *out) {
    const cJSON *name = field(field(piece, "SpecialToken"), "id");
    const cJSON *ids = cJSON_IsString(name) ? field(field(specials, name->valuestring), "ids") : NULL;
    const cJSON *first = cJSON_IsArray(ids) ? ids->child : NULL;
    if (!cJSON_IsNumber(first) || first->valuedouble < 0 || first->valuedouble >= L->t->n_vocab)
        return corrupt(L, "post_processor (TemplateProcessing)", "names a special token without a valid id");
    *out = (int32_t)first->valuedouble;
    return ST_OK;
}

static st_status load_post_processor(loader *L, const cJSON *pp, int depth) {
    if (is_null(pp)) return ST_OK;
    const char *ty = type_of(pp);
    if (ty && !strcmp(ty, "ByteLevel")) return ST_OK;   /* offsets only */
    if (ty && !strcmp(ty, "Sequence") && depth < 4) {
        const cJSON *list = field(pp, "processors");
        if (!cJSON_IsArray(list)) return corrupt(L, "post_processor (Sequence)", "has no processors array");
        for (const cJSON *p = list->child; p; p = p->next) {
            st_status st = load_post_processor(L, p, depth + 1);
            if (st) return st;
        }
        return ST_OK;
    }
    if (ty && !strcmp(ty, "TemplateProcessing")) {
        const cJSON *single = field(pp, "single"), *specials = field(pp, "special_tokens");
        if (!cJSON_IsArray(single)) return corrupt(L, "post_processor (TemplateProcessing)", "has no single template");
        int seen_a = 0;
        for (const cJSON *p = single->child; p; p = p->next) {
            if (field(p, "Sequence")) {
                seen_a = 1;
                continue;
            }
            if (!field(p, "SpecialToken")) return corrupt(L, "post_processor (TemplateProcessing)", "has an unknown piece");
            int32_t *side = seen_a ? &L->t->eos : &L->t->bos;
            int32_t id = -1;
            st_status st = template_id(L, specials, p, &id);
            if (st) return st;
            if (*side < 0) *side = id;
        }
        return ST_OK;
    }
    char d[96];
    snprintf(d, sizeof d, "of type \"%.60s\"", ty ? ty : "(none)");
    return unsupported(L, "post_processor", d);
}

/* ---- the whole file ------------------------------------------------------------- */

static st_status load(loader *L, const cJSON *root) {
    if (!cJSON_IsObject(root)) return corrupt(L, "the file", "is not a JSON object");
    if (!is_null(field(root, "truncation"))) return unsupported(L, "truncation", "other than null");
    if (!is_null(field(root, "padding"))) return unsupported(L, "padding", "other than null");
    const cJSON *norm = field(root, "normalizer");
    if (!is_null(norm)) {
        char d[96];
        snprintf(d, sizeof d, "of type \"%.60s\"", type_of(norm) ? type_of(norm) : "(none)");
        return unsupported(L, "normalizer", d);
    }
    st_status st = load_model(L, field(root, "model"));
    if (!st) st = load_added(L, field(root, "added_tokens"));
    if (!st) st = load_pre_tokenizer(L, field(root, "pre_tokenizer"));
    if (!st) st = load_post_processor(L, field(root, "post_processor"), 0);
    if (!st) {
        const cJSON *dec = field(root, "decoder");
        const char *ty = type_of(dec);
        if (!ty || strcmp(ty, "ByteLevel") != 0) {
            char d[96];
            snprintf(d, sizeof d, "of type \"%.60s\"", ty ? ty : is_null(dec) ? "null" : "(none)");
            st = unsupported(L, "decoder", d);
        }
    }
    return st;
}

static st_status load_root(tokenizer **out, cJSON *root, const char *path, st_error *err);

st_status tokenizer_load_json(tokenizer **out, const char *path, st_error *err) {
    *out = NULL;
    cJSON *root;
    st_status st = tok_read_json(path, &root, err);
    return st ? st : load_root(out, root, path, err);
}

st_status tok_load_json_text(tokenizer **out, const char *text, size_t len, const char *name, st_error *err) {
    *out = NULL;
    cJSON *root;
    st_status st = parse_json(text, len, name, &root, err);
    return st ? st : load_root(out, root, name, err);
}

/* Builds the tokenizer from the parsed file; frees root. */
static st_status load_root(tokenizer **out, cJSON *root, const char *path, st_error *err) {
    st_status st;
    loader L = {.path = path, .err = err, .t = tok_new()};
    if (!L.t) {
        cJSON_Delete(root);
        return st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    }
    uint32_t cp_of_byte[256];
    tok_byte_alphabet(cp_of_byte, L.byte_of_cp);
    /* the library's regex engine decides the classes */
    L.t->ranges = uni_ranges_hf;
    L.t->n_ranges = uni_ranges_hf_count;
    st = load(&L, root);
    cJSON_Delete(root);
    if (!st && !(L.t->source = strdup(path))) st = st_fail(err, ST_ENOMEM, "%s: out of memory", path);
    if (!st) st = tok_finish(L.t, err);
    if (st) {
        tokenizer_free(L.t);
        return st;
    }
    *out = L.t;
    return ST_OK;
}

st_status tokenizer_load_path(tokenizer **out, const char *path, st_error *err) {
    *out = NULL;
    if (!path || !*path) return tokenizer_load_default(out, err);
    struct stat sb;
    if (stat(path, &sb) != 0) return st_fail_errno(err, errno, "%s: cannot open the tokenizer", path);
    if (!S_ISDIR(sb.st_mode)) return tokenizer_load_json(out, path, err);
    char file[PATH_MAX];
    if (snprintf(file, sizeof file, "%s/tokenizer.json", path) >= (int)sizeof file)
        return st_fail(err, ST_EINVAL, "%s: path too long", path);
    if (stat(file, &sb) != 0)
        return st_fail(err, ST_ENOENT, "%s: a directory without a tokenizer.json (give the file, or the model "
                       "directory that holds it)", path);
    return tokenizer_load_json(out, file, err);
}
