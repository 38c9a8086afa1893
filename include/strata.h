/*
 * strata.h - the public interface of libstrata, an SSD-offloaded trainer for
 * GPT-style language models. Include this one header; it pulls in each
 * layer's contract, bottom to top (each header teaches its module by example):
 *
 *   strata/base.h         status values, errors, memory, time, random numbers, bf16/f16
 *   strata/checksum.h     CRC32C
 *   strata/io.h           async O_DIRECT I/O engine (io_uring, psync fallback), preflight
 *   strata/store.h        named tensors on tiers, striping, crash-safe manifest
 *   strata/backend.h      compute backends: device memory and kernels behind a table (CPU, checking)
 *   strata/model.h        GPT-2 configuration, parameter layout, forward/backward
 *   strata/safetensors.h  safetensors files
 *   strata/gpt_io.h       GPT-2 weights in the Hugging Face layout
 *   strata/tokenizer.h    GPT-2 byte-level BPE
 *   strata/data.h         token files, datasets
 *   strata/batches.h      training batches from a token file
 *   strata/optim.h        AdamW, clipping, learning-rate schedule
 *   strata/train.h        the in-memory trainer
 *   strata/schedule.h     an iteration as a task list (vertical, horizontal)
 *   strata/offload.h      the executor: task lists against host memory and the SSD store
 *   strata/trace.h        Chrome trace files
 *   strata/hw.h           hardware descriptions (JSON) for the simulator
 *   strata/probe.h        measuring this machine into one
 *   strata/sim.h          the simulator: task lists replayed against a machine, the roofline bound
 *   strata/planner.h      choosing schedule, micro-batch, placement and alpha by simulating candidates
 */
#ifndef STRATA_H
#define STRATA_H
#include "strata/base.h"
#include "strata/checksum.h"
#include "strata/io.h"
#include "strata/store.h"
#include "strata/backend.h"
#include "strata/model.h"
#include "strata/safetensors.h"
#include "strata/gpt_io.h"
#include "strata/tokenizer.h"
#include "strata/data.h"
#include "strata/batches.h"
#include "strata/optim.h"
#include "strata/train.h"
#include "strata/schedule.h"
#include "strata/offload.h"
#include "strata/trace.h"
#include "strata/hw.h"
#include "strata/probe.h"
#include "strata/sim.h"
#include "strata/planner.h"
#endif
