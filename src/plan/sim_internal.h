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
/* CPU ranks: one collective of rank 0 (a GATHER_WEIGHTS or REDUCE_GRADS
 * task, or a sum of n_doubles doubles when t is NULL), on hw (the whole
 * description) with cfg->ranks resolved: the bytes of strata/comm.h's
 * table, what crosses shared memory (the copies this rank makes of what
 * ranks on its node send it) and the network (the larger of what it sends
 * to and receives from other nodes), and the fixed time (latency, and a
 * reduce-scatter's sum at the rank's share of other_gbps). */
typedef struct sim_comm {
    uint64_t sent, received;
    double shm, net, fixed_s;
} sim_comm;
void sim_collective(const hw_desc *hw, const sim_config *c, const sched_task *t, int n_doubles, sim_comm *out);
sim_work sim_task_work_at(const sim_config *c, const sched_task *t, int first, int last);

#endif
