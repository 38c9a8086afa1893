/*
 * data_internal.h - what the data layer's files share; not part of its
 * contract.
 */
#ifndef STRATA_DATA_INTERNAL_H
#define STRATA_DATA_INTERNAL_H

#include <stdint.h>

/* One rule for text, so that a file token_file_open calls text is one that
 * `strata prepare` takes: no NUL byte in its first DATA_SNIFF_BYTES. */
#define DATA_SNIFF_BYTES 8192

/* 0: the file open at fd looks like text; 1: binary (*nul_at: the offset of
 * its first NUL byte); -1: it cannot be read (errno). */
int data_sniff_binary(int fd, uint64_t *nul_at);

#endif
