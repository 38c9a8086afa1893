/* test_plan_public_header.c - the one public header is complete: including
 * strata.h alone gives every layer's API, and a program can use it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>

#include "strata.h"

static void test_one_header_gives_every_layer(void **state) {
    (void)state;
    st_error err = {0};
    gpt_config c;
    assert_int_equal(gpt_config_from_name(&c, "gpt2-124m", &err), ST_OK);
    assert_int_equal(gpt_num_real_params(&c), 124439808);   /* GPT-2 small, as published */
    sched_params p = {.kind = SCHED_VERTICAL, .n_units = c.n_layer + 1, .micro_batches = 4};
    sched_list l;
    assert_int_equal(sched_build(&p, 0, &l, &err), ST_OK);
    sched_counts n;
    sched_count(&l, &n);
    assert_int_equal(n.weight_loads, 2 * (c.n_layer + 1));
    sched_list_free(&l);
    assert_int_equal(st_crc32c(0, "123456789", 9), 0xe3069283u);   /* the CRC32C check value */
    assert_string_equal(store_kind_name(STORE_MASTER), "master");
    assert_int_equal(safetensors_dtype_size(SAFETENSORS_BF16), 2);
    /* the plan layer: a machine described, a configuration simulated */
    hw_desc hw;
    const char *text = "{\"name\": \"m\", \"compute\": {\"matmul_gflops\": 100, \"other_gbps\": 10, \"cores\": 2},"
                       "\"ssd\": [{\"read_gbps\": 1, \"write_gbps\": 2}], \"optimizer\": {\"adamw_params_per_s_per_thread\": 5e8},"
                       "\"memory\": {\"device_bytes\": 1e10, \"host_bytes\": 1e10}}";
    assert_int_equal(hw_parse_json(text, strlen(text), "m.json", &hw, &err), ST_OK);
    sim_config sc = sim_default_config();
    sc.model = c;
    sc.B = 1;
    sc.T = 64;
    sc.micro_batches = 2;
    sc.place.weights = 1;
    sim_result r;
    assert_int_equal(sim_run(&hw, &sc, &r, &err), ST_OK);
    assert_true(r.iter_s > 0 && r.bytes_read[STORE_WEIGHTS] > 0);
    assert_true(hw_probe_defaults().reps > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_header_gives_every_layer)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
