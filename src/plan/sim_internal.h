/*
 * sim_internal.h - what the simulator's engine (sim.c) takes from its cost
 * model (sim_cost.c): the executor's tensor layout and each task's bytes
 * and work.
 */
#ifndef STRATA_PLAN_SIM_INTERNAL_H
#define STRATA_PLAN_SIM_INTERNAL_H

#include "strata/sim.h"

sched_params sim_sched_params(const sim_config *c);
size_t sim_wsz(const sim_config *c);
/* Data-parallel devices of a configuration (cfg->devices, at least 1). */
uint64_t sim_devices(const sim_config *c);
/* GPU backend, per device: bytes a task moves over the host-device link,
 * and which way; what it moves through the interconnect (a weight load's
 * all-gather). */
uint64_t sim_task_link_bytes(const sim_config *c, const sched_task *t, int *to_device);
double sim_task_interconnect_bytes(const sim_config *c, const sched_task *t);
/* A unit's gradients leaving the device: the shard each device sends to the
 * host, and what its reduce-scatter moves through each device. */
void sim_grad_offload(const sim_config *c, int unit, uint64_t *link, double *interconnect);
sim_work sim_task_work_at(const sim_config *c, const sched_task *t, int first, int last);

#endif
