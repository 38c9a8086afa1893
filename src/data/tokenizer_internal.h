/*
 * tokenizer_internal.h - hooks into the GPT-2 tokenizer for its tests and
 * benchmarks; not part of the data layer's contract.
 */
#ifndef STRATA_DATA_TOKENIZER_INTERNAL_H
#define STRATA_DATA_TOKENIZER_INTERNAL_H

#include "strata/tokenizer.h"

/* Pre-splits text[0, len) with GPT-2's regex (no BPE): writes the end offset
 * of each piece to ends[] (up to cap of them) and returns how many pieces
 * there are (which may exceed cap). */
size_t gpt2_pretokenize(const gpt2_tokenizer *tok, const char *text, size_t len, size_t *ends, size_t cap);

#endif
