/*
 * strata/checksum.h - CRC32C (Castagnoli), the checksum of every chunk the
 * tensor store writes and of the token-shard format.
 *
 * st_crc32c continues a running checksum: start from 0 and feed the bytes in
 * any number of pieces; the result equals one call over all of them. The
 * value is the standard CRC32C (iSCSI, ext4, RFC 3720): pre- and
 * post-inverted, so st_crc32c(0, "123456789", 9) == 0xe3069283.
 *
 *     uint32_t crc = st_crc32c(0, header, sizeof header);
 *     crc = st_crc32c(crc, payload, payload_bytes);
 *
 * On x86-64 CPUs with SSE4.2 and PCLMULQDQ (every x86-64 CPU since 2010) it
 * runs three interleaved streams of the crc32 instruction (about 3 bytes per
 * cycle per stream) and merges them with a carry-less multiply; elsewhere a
 * table-driven loop gives the same values. The choice is made per call from
 * the CPU's feature bits: no global state, safe from any thread.
 */
#ifndef STRATA_CHECKSUM_H
#define STRATA_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

uint32_t st_crc32c(uint32_t crc, const void *data, size_t n);

/* The table-driven implementation, whatever the CPU: the reference the fast
 * path is tested against. */
uint32_t st_crc32c_portable(uint32_t crc, const void *data, size_t n);

/* 1 when st_crc32c uses the CPU's crc32 instruction, else 0. */
int st_crc32c_hardware(void);

#ifdef __cplusplus
}
#endif
#endif
