/*
 * strata.h - the public interface of libstrata, an SSD-offloaded trainer for
 * GPT-style language models. Include this one header; it pulls in each
 * layer's contract, bottom to top:
 *
 *   strata/base.h     status values, errors, memory, time, random numbers
 *   strata/io.h       async O_DIRECT I/O engine (io_uring, psync fallback)
 *   strata/store.h    named tensors on tiers, crash-safe manifest
 *   strata/model.h    GPT-2 configuration, parameter layout, forward/backward
 *   strata/safetensors.h  weights in and out in the Hugging Face layout
 *   strata/data.h     tokenizer and token files
 *   strata/optim.h    AdamW, clipping, learning-rate schedule
 *   strata/train.h    the trainer: steps, micro-batches, schedules
 */
#ifndef STRATA_H
#define STRATA_H
#include "strata/base.h"
#endif
