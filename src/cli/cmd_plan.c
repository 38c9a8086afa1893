/* cmd_plan.c - `strata plan`: the best few ways to train a model on a
 * described machine within memory budgets (strata/planner.h), each with its
 * predicted speed, what bounds it and what it moves. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cli_flags.h"
#include "strata/planner.h"

typedef struct plan_opts {
    const char *hw, *precision, *schedule;
    cli_model_flags shape;
    long global_batch, max_micro_batches, top;
    int whole;
    double clip;
    uint64_t mem_device, mem_host;
} plan_opts;

#define STRINGIFY(x) #x
#define NUMBER_TEXT(x) STRINGIFY(x)
#define O(field) offsetof(plan_opts, field)
#define SHAPE(field) O(shape.field)
static const cli_flag plan_flags[] = {
    CLI_HW_FLAG(O(hw)),
    CLI_INT("global-batch", O(global_batch), 1, 1 << 20, "N", "sequences per optimizer step (required)"),
    CLI_MODEL_SHAPE_FLAGS(SHAPE),
    CLI_SEQ_FLAG(SHAPE(seq)),
    CLI_STRING("precision", O(precision), "P", "mixed (default: bf16 compute weights) or fp32"),
    CLI_DOUBLE("clip", O(clip), 0, 1e9, "X", "gradient clipping as in train (default 1.0; 0 = off)"),
    CLI_SIZE("mem-device", O(mem_device), "SIZE", "budget for the compute working set (default: the machine's)"),
    CLI_SIZE("mem-host", O(mem_host), "SIZE", "budget for host memory (default: the machine's)"),
    CLI_STRING("schedule", O(schedule), "S", "search only vertical or only horizontal (default both)"),
    CLI_INT("max-micro-batches", O(max_micro_batches), 1, 1 << 16, "M", "largest micro-batch count tried (default 64)"),
    CLI_INT("top", O(top), 1, PLAN_MAX_BEST, "K", "how many to print (default 5, at most " NUMBER_TEXT(PLAN_MAX_BEST) ")"),
    CLI_ON("whole", O(whole), "only whole placements (each kind all in memory or all on the SSD)"),
};

static const cli_spec plan_spec = {
    .command = "plan",
    .usage = "usage: strata plan --hw FILE --global-batch N [--model NAME | --n-layer N --n-head N --d-model N]\n"
             "                   [--seq T] [--precision fp32|mixed] [--clip X] [--mem-device SIZE] [--mem-host SIZE]\n"
             "                   [--schedule vertical|horizontal] [--max-micro-batches M] [--top K]\n"
             "                   [--whole]",
    .about = "Searches the schedule, the micro-batch size and count making up the global batch,\n"
             "the placement of each kind of state (host memory or SSD) and alpha, simulating\n"
             "every candidate that fits the budgets against the hardware description, and\n"
             "prints the fastest few: predicted tokens/s and model FLOP/s, the bottleneck,\n"
             "the SSD bytes each moves per iteration, and the memory it needs.",
    .flags = plan_flags,
    .n_flags = CLI_COUNT(plan_flags),
    .lists_models = 1,
};

int cmd_plan(int argc, char **argv) {
    plan_opts o = {.precision = "mixed", .shape = {.seq = 1024}, .max_micro_batches = 64, .top = 5, .clip = 1.0};
    cli_parsed flags;
    int parsed = cli_parse_flags(&plan_spec, argc, argv, &o, &flags);
    if (parsed != CLI_PARSED) return parsed;
    const char *hw_path = o.hw;
    const uint64_t mem_device = o.mem_device, mem_host = o.mem_host;
    st_error err = {0};
    if (!hw_path) return cli_usage_error("plan", "--hw FILE is required (write one with 'strata probe')");
    if (!o.global_batch) return cli_usage_error("plan", "--global-batch N is required");
    plan_request q = plan_default_request();
    if (gpt_precision_parse(o.precision, &q.precision, &err) != ST_OK || cli_model_config(&o.shape, &q.model, &err) != ST_OK)
        return cli_usage_error("plan", "%s", err.msg);
    if (o.schedule) {
        sched_kind k;
        if (cli_parse_schedule(o.schedule, &k, &err) != ST_OK) return cli_usage_error("plan", "%s", err.msg);
        q.schedule = (int)k;
    }
    q.T = (int)o.shape.seq;
    q.global_batch = (int)o.global_batch;
    q.clipping = o.clip > 0;
    q.mem_device = mem_device;
    q.mem_host = mem_host;
    q.max_micro_batches = (int)o.max_micro_batches;
    q.n_best = (int)o.top;
    q.whole_placements = o.whole;
    hw_desc hw;
    if (cli_load_hw(hw_path, &hw, &err) != ST_OK) return cli_fail(&err);
    cli_plan_progress progress;
    cli_plan_progress_start(&progress);
    q.progress = cli_plan_progress_show, q.progress_ctx = &progress;
    plan_result r;
    if (plan_search(&hw, &q, &r, &err) != ST_OK) return cli_fail(&err);

    const gpt_config *g = &q.model;
    char d[32], h[32], rd[32], wr[32];
    printf("model: %d layers, %d heads, d_model %d, vocab %d: %.2fM parameters; global batch %d x %d tokens, %s, "
           "clipping %s\n",
           g->n_layer, g->n_head, g->d_model, g->vocab_size, (double)gpt_num_real_params(g) / 1e6, q.global_batch, q.T,
           gpt_precision_name(q.precision), q.clipping ? "on" : "off");
    printf("hardware: %s (%s); budgets: device %s, host %s\n", hw.name, hw_path,
           mem_device ? st_format_bytes((double)mem_device, d, sizeof d) : "the machine's",
           mem_host ? st_format_bytes((double)mem_host, h, sizeof h) : "the machine's");
    printf("searched %d candidates, simulated %d (those that fit: the whole placements with the least state on the "
           "SSD%s)\n\n",
           r.considered, r.simulated,
           q.whole_placements ? "; --whole: no kind split" : ", and every whole placement with as much of its state kept in memory as fits");
    printf("%-4s %-10s %-12s %-5s %-5s %-25s %10s %12s %-10s %-22s %s\n", "rank", "schedule", "micro-batch", "alpha",
           "gbufs", "on the SSD", "tokens/s", "model GFLOP/s", "bound by", "SSD per iter (r / w)", "memory (device + host)");
    for (int i = 0; i < r.n_best; i++) {
        const plan_choice *ch = &r.best[i];
        const sim_config *c = &ch->config;
        char where[128], mb[32], io[48];
        placement_name(c->place, where, sizeof where);
        snprintf(mb, sizeof mb, "%d x %d", c->B, c->micro_batches);
        snprintf(io, sizeof io, "%s / %s", st_format_bytes((double)ch->result.total_read, rd, sizeof rd),
                 st_format_bytes((double)ch->result.total_written, wr, sizeof wr));
        printf("%-4d %-10s %-12s %-5.2f %-5d %-25s %10.1f %12.1f %-10s %-22s %s + %s\n", i + 1,
               c->schedule == SCHED_VERTICAL ? "vertical" : "horizontal", mb, c->alpha, layout_grad_buffers(c->grad_buffers), where,
               ch->result.tokens_per_s, ch->result.model_flops_per_s / 1e9, sim_resource_name(ch->result.bottleneck),
               io, st_format_bytes((double)ch->result.memory.device, d, sizeof d),
               st_format_bytes((double)ch->result.memory.host, h, sizeof h));
    }
    const plan_choice *b = &r.best[0];
    char where[128];
    printf("\nbest: --schedule %s --micro-batch %d --alpha %.2f --grad-buffers %d --offload %s: %.3f s per iteration, "
           "%.0f%% of its roofline bound's speed (%s-bound at %.3f s)\n",
           b->config.schedule == SCHED_VERTICAL ? "vertical" : "horizontal", b->config.B, b->config.alpha,
           layout_grad_buffers(b->config.grad_buffers),
           placement_name(b->config.place, where, sizeof where),
           b->result.iter_s, b->result.iter_s > 0 ? 100.0 * b->roofline.bound_s / b->result.iter_s : 0,
           sim_resource_name(b->roofline.limit), b->roofline.bound_s);
    if (r.has_runner_up) {   /* why this placement: the best of any other */
        const plan_choice *u = &r.runner_up;
        const double moved_b = (double)(b->result.total_read + b->result.total_written);
        const double moved_u = (double)(u->result.total_read + u->result.total_written);
        printf("runner-up of another placement: --schedule %s --micro-batch %d --alpha %.2f --grad-buffers %d --offload "
               "%s: %.3f s per iteration, %.1f%% slower; it moves %s through the SSD per iteration against %s, and is "
               "%s-bound\n",
               u->config.schedule == SCHED_VERTICAL ? "vertical" : "horizontal", u->config.B, u->config.alpha,
               layout_grad_buffers(u->config.grad_buffers),
               placement_name(u->config.place, where, sizeof where), u->result.iter_s,
               b->result.iter_s > 0 ? 100.0 * (u->result.iter_s / b->result.iter_s - 1) : 0,
               st_format_bytes(moved_u, rd, sizeof rd), st_format_bytes(moved_b, wr, sizeof wr),
               sim_resource_name(u->result.bottleneck));
    } else {
        printf("no other %splacement fits the budgets\n", q.whole_placements ? "whole " : "");
    }
    return 0;
}
