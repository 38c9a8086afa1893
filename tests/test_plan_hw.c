/* test_plan_hw.c - hardware descriptions: a file reads back exactly as it
 * was written; every missing, negative, mistyped, unknown or repeated field
 * is refused with an error naming it; malformed JSON says where; and no
 * prefix or byte flip of a valid file crashes the reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>

#include "strata/hw.h"

static const char *VALID =
    "{\n"
    "  \"name\": \"a100x4\",\n"
    "  \"compute\": {\"backend\": \"gpu\", \"matmul_gflops\": 250000, \"head_matmul_gflops\": 240000,\n"
    "              \"attention_gflops\": 120000, \"other_gbps\": 1500, \"cores\": 108, \"task_overhead_s\": 1e-5,\n"
    "              \"io_cpu_s_per_gb\": 0.12, \"widen_gbps\": 900,\n"
    "              \"matmul_by_rows\": [{\"rows\": 64, \"gflops\": 50000}, {\"rows\": 4096, \"gflops\": 200000}],\n"
    "              \"head_by_rows\": [{\"rows\": 1024, \"gflops\": 240000}]},\n"
    "  \"host_device_gbps\": 25,\n"
    "  \"ssd\": [{\"path\": \"/nvme0\", \"read_gbps\": 6.5, \"write_gbps\": 3.5},\n"
    "          {\"read_gbps\": 6.5, \"write_gbps\": 3.5, \"mixed_read_gbps\": 3, \"mixed_write_gbps\": 2}],\n"
    "  \"optimizer\": {\"adamw_params_per_s_per_thread\": 1.5e8, \"threads\": 32},\n"
    "  \"contention\": {\"compute_slowdown\": 1, \"optimizer_slowdown\": 1, \"compute_beside_io\": 1.25,\n"
    "                 \"io_beside_compute\": 1.5},\n"
    "  \"memory\": {\"device_bytes\": 80000000000, \"host_bytes\": 1000000000000},\n"
    "  \"node\": {\"devices\": 4, \"interconnect_gbps\": 300},\n"
    "  \"note\": \"by hand\"\n"
    "}\n";

static st_status parse(const char *text, hw_desc *hw, st_error *err) {
    return hw_parse_json(text, strlen(text), "hw.json", hw, err);
}

static void test_valid_file_reads(void **state) {
    (void)state;
    hw_desc hw;
    st_error err = {0};
    assert_int_equal(parse(VALID, &hw, &err), ST_OK);
    assert_string_equal(hw.name, "a100x4");
    assert_int_equal(hw.backend, HW_BACKEND_GPU);
    assert_true(hw.matmul_gflops == 250000 && hw.head_matmul_gflops == 240000 && hw.attention_gflops == 120000);
    assert_int_equal(hw.n_ssd, 2);
    assert_string_equal(hw.ssd[0].path, "/nvme0");
    assert_true(hw.task_overhead_s == 1e-5 && hw.n_matmul_rows == 2 && hw.n_head_rows == 1);
    assert_true(hw.io_cpu_s_per_gb == 0.12 && hw.compute_beside_io == 1.25 && hw.io_beside_compute == 1.5);
    assert_true(hw.widen_gbps == 900);
    /* rates by rows: flat outside the table, linear in log(rows) inside it */
    assert_true(hw_matmul_gflops_at(&hw, 1) == 50000 && hw_matmul_gflops_at(&hw, 1e6) == 200000);
    assert_true(fabs(hw_matmul_gflops_at(&hw, 512) - 125000) < 1e-6);   /* halfway from 64 to 4096 */
    assert_true(hw_head_gflops_at(&hw, 16) == 240000);
    assert_true(hw.ssd[0].mixed_read_gbps == 0 && hw.ssd[1].mixed_write_gbps == 2);
    assert_true(hw_adamw_rate(&hw) == 1.5e8 * 32);
    assert_true(hw.device_bytes == 80000000000ull && hw.host_bytes == 1000000000000ull);
    assert_int_equal(hw.devices_per_node, 4);
    /* optional fields left out take their defaults */
    const char *minimal = "{\"name\": \"m\", \"compute\": {\"matmul_gflops\": 100, \"other_gbps\": 10, \"cores\": 2},"
                          "\"ssd\": [], \"optimizer\": {\"adamw_params_per_s_per_thread\": 5e8},"
                          "\"memory\": {\"device_bytes\": 1e9, \"host_bytes\": 2e9}}";
    assert_int_equal(parse(minimal, &hw, &err), ST_OK);
    assert_int_equal(hw.backend, HW_BACKEND_CPU);
    assert_int_equal(hw.n_ssd, 0);
    assert_int_equal(hw.adamw_threads, 1);
    assert_true(hw.compute_slowdown == 1 && hw.optimizer_slowdown == 1 && hw.host_device_gbps == 0);
    assert_true(hw.compute_beside_io == 0 && hw.io_beside_compute == 0);   /* absent: neither slows the other */
    assert_true(hw.widen_gbps == 0);   /* absent: at other_gbps */
    assert_int_equal(hw.devices_per_node, 1);
}

/* Written, then read: the same description, bit for bit (doubles included). */
static void test_round_trip(void **state) {
    (void)state;
    hw_desc a, b;
    st_error err = {0};
    assert_int_equal(parse(VALID, &a, &err), ST_OK);
    a.matmul_gflops = 1.0 / 3.0 * 1e5;   /* a value that needs all 17 digits */
    a.ssd[1].read_gbps = 0.1 + 0.2;
    a.ssd[1].bench_read_gbps = 1.25;
    a.ssd[1].bench_write_gbps = 1.5;
    a.block_factor = 1.0 / 7.0 + 1;
    a.probe = (hw_probe_record){.model = "gpt2-124m", .blas_kernels = "SkylakeX", .B = 4, .T = 256,
                                .block_forward_s = 0.1175, .block_backward_s = 0.3861, .head_s = 1.8,
                                .adamw_alone_s = 1e-3, .adamw_beside_compute_s = 3e-3, .compute_beside_adamw = 2.5, .checksum_gbps = 14.1,
                                .io_kernel_s_per_gb = 0.024, .trial_layers = 4, .trial_work_s = 0.68,
                                .trial_predicted_work_s = 0.61, .trial_ssd_step_s = 1.2, .trial_ssd_work_s = 0.75,
                                .trial_long_layers = 12, .trial_long_work_s = 1.93};
    char path[] = "/tmp/strata-test-hw-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(hw_save_json(path, &a, &err), ST_OK);
    assert_int_equal(hw_load_json(path, &b, &err), ST_OK);
    assert_memory_equal(&a, &b, sizeof a);
    unlink(path);
    /* and through text */
    char *text = hw_to_json(&a);
    assert_non_null(text);
    assert_int_equal(parse(text, &b, &err), ST_OK);
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
    /* a record with only some of its fields (the fuzzer's find: trial fields without trial_layers) */
    a.probe = (hw_probe_record){.trial_ssd_work_s = 0.3861, .compute_beside_adamw = 3.5};
    text = hw_to_json(&a);
    assert_non_null(text);
    assert_int_equal(parse(text, &b, &err), ST_OK);
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
    a.probe = (hw_probe_record){.trial_long_work_s = 0.5};
    text = hw_to_json(&a);
    assert_non_null(text);
    assert_int_equal(parse(text, &b, &err), ST_OK);
    assert_memory_equal(&a, &b, sizeof a);
    free(text);
    /* a file that is not there, a directory that is not there */
    assert_int_equal(hw_load_json("/nonexistent/hw.json", &b, &err), ST_ENOENT);
    assert_non_null(strstr(err.msg, "/nonexistent/hw.json"));
    assert_int_not_equal(hw_save_json("/nonexistent/dir/hw.json", &a, &err), ST_OK);
}

/* VALID with one member set to set_json, or removed when NULL (path like
 * "compute.cores" or "ssd.1.read_gbps"). */
static char *edit(const char *path, const char *set_json) {
    cJSON *root = cJSON_Parse(VALID);
    assert_non_null(root);
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    cJSON *obj = root;
    char *save = NULL, *tok = strtok_r(buf, ".", &save), *next;
    while ((next = strtok_r(NULL, ".", &save))) {
        obj = cJSON_IsArray(obj) ? cJSON_GetArrayItem(obj, atoi(tok)) : cJSON_GetObjectItemCaseSensitive(obj, tok);
        assert_non_null(obj);
        tok = next;
    }
    cJSON *v = set_json ? cJSON_Parse(set_json) : NULL;
    if (set_json) assert_non_null(v);
    if (cJSON_IsArray(obj) && v) cJSON_ReplaceItemInArray(obj, atoi(tok), v);
    else if (cJSON_IsArray(obj)) cJSON_DeleteItemFromArray(obj, atoi(tok));
    else if (v && cJSON_GetObjectItemCaseSensitive(obj, tok)) cJSON_ReplaceItemInObjectCaseSensitive(obj, tok, v);
    else if (v) cJSON_AddItemToObject(obj, tok, v);
    else cJSON_DeleteItemFromObjectCaseSensitive(obj, tok);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    return text;
}

static void expect_error(const char *path, const char *set_json, const char *message) {
    char *text = edit(path, set_json);
    hw_desc hw;
    st_error err = {0};
    st_status s = parse(text, &hw, &err);
    if (s == ST_OK || !strstr(err.msg, message))
        fprintf(stderr, "%s = %s: got \"%s\", expected \"%s\"\n", path, set_json ? set_json : "(removed)", err.msg, message);
    assert_int_equal(s, ST_EINVAL);
    assert_non_null(strstr(err.msg, message));
    assert_non_null(strstr(err.msg, "hw.json: "));
    assert_null(strchr(err.msg, '\n'));
    free(text);
}

static void test_missing_fields_named(void **state) {
    (void)state;
    static const char *required[] = {"name", "compute", "compute.matmul_gflops", "compute.other_gbps", "compute.cores",
                                     "ssd", "ssd.1.read_gbps", "ssd.0.write_gbps", "optimizer",
                                     "optimizer.adamw_params_per_s_per_thread", "memory", "memory.device_bytes",
                                     "memory.host_bytes"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        char want[128];
        snprintf(want, sizeof want, "missing field %s", required[i]);
        /* arrays are named with brackets: ssd[1].read_gbps */
        if (!strncmp(required[i], "ssd.", 4))
            snprintf(want, sizeof want, "missing field ssd[%c].%s", required[i][4], required[i] + 6);
        expect_error(required[i], NULL, want);
    }
    /* the optional ones may go */
    static const char *optional[] = {"compute.head_matmul_gflops", "compute.attention_gflops", "ssd.0.path",
                                     "compute.task_overhead_s", "compute.matmul_by_rows", "compute.head_by_rows",
                                     "compute.io_cpu_s_per_gb", "ssd.1.mixed_read_gbps", "optimizer.threads", "contention", "node", "note"};
    for (size_t i = 0; i < sizeof optional / sizeof optional[0]; i++) {
        char *text = edit(optional[i], NULL);
        hw_desc hw;
        st_error err = {0};
        assert_int_equal(parse(text, &hw, &err), ST_OK);
        free(text);
    }
}

static void test_bad_values_named(void **state) {
    (void)state;
    expect_error("compute.matmul_gflops", "-1", "compute.matmul_gflops: must be > 0");
    expect_error("compute.matmul_gflops", "0", "compute.matmul_gflops: must be > 0");
    expect_error("compute.head_matmul_gflops", "-5", "compute.head_matmul_gflops: must be >= 0");
    expect_error("compute.attention_gflops", "-5", "compute.attention_gflops: must be >= 0");
    expect_error("compute.other_gbps", "-0.5", "compute.other_gbps: must be > 0");
    expect_error("compute.cores", "0", "compute.cores: must be >= 1");
    expect_error("compute.cores", "2.5", "compute.cores: must be a whole number");
    expect_error("compute.cores", "1e300", "compute.cores: must be a whole number");
    expect_error("compute.backend", "\"tpu\"", "compute.backend: must be \"cpu\" or \"gpu\"");
    expect_error("compute.task_overhead_s", "-1e-6", "compute.task_overhead_s: must be >= 0");
    expect_error("compute.io_cpu_s_per_gb", "-0.1", "compute.io_cpu_s_per_gb: must be >= 0");
    expect_error("compute.block_factor", "-1", "compute.block_factor: must be >= 0");
    expect_error("compute.widen_gbps", "-2", "compute.widen_gbps: must be >= 0");
    expect_error("ssd.1.bench_read_gbps", "-1", "ssd[1].bench_read_gbps: must be >= 0");
    expect_error("probe", "{\"trial_layers\": -2}", "probe.trial_layers: must be >= 0");
    expect_error("probe", "{\"blas_kernels\": 3}", "probe.blas_kernels: must be a string");
    expect_error("probe", "{\"blas_kernels\": \"" "0123456789012345678901234567890123" "\"}",
                 "probe.blas_kernels: longer than 31 characters");
    expect_error("probe", "{\"trial_work_s\": -2}", "probe.trial_work_s: must be >= 0");
    expect_error("probe", "{\"trial_long_layers\": -1}", "probe.trial_long_layers: must be >= 0");
    expect_error("probe", "{\"trial_long_work_s\": -0.5}", "probe.trial_long_work_s: must be >= 0");
    expect_error("compute.matmul_by_rows.1.rows", "64", "compute.matmul_by_rows[1].rows: must be more than the entry before");
    expect_error("compute.matmul_by_rows.0.rows", "0.5", "compute.matmul_by_rows[0].rows: must be >= 1");
    expect_error("compute.head_by_rows.0.gflops", "0", "compute.head_by_rows[0].gflops: must be > 0");
    expect_error("compute.head_by_rows.0.speed", "1", "compute.head_by_rows[0].speed: unknown field");
    expect_error("compute.matmul_by_rows", "{}", "compute.matmul_by_rows: must be an array");
    expect_error("compute.matmul_by_rows",
                 "[{\"rows\": 1, \"gflops\": 1}, {\"rows\": 2, \"gflops\": 1}, {\"rows\": 3, \"gflops\": 1},"
                 " {\"rows\": 4, \"gflops\": 1}, {\"rows\": 5, \"gflops\": 1}, {\"rows\": 6, \"gflops\": 1},"
                 " {\"rows\": 7, \"gflops\": 1}, {\"rows\": 8, \"gflops\": 1}, {\"rows\": 9, \"gflops\": 1}]",
                 "compute.matmul_by_rows: at most 8 entries");
    expect_error("compute.matmul_by_rows.0", "{\"rows\": 8}", "missing field compute.matmul_by_rows[0].gflops");
    expect_error("host_device_gbps", "-1", "host_device_gbps: must be >= 0");
    expect_error("host_device_gbps", "0", "host_device_gbps: must be > 0 with a gpu backend");
    expect_error("ssd.1.read_gbps", "-1", "ssd[1].read_gbps: must be > 0");
    expect_error("ssd.0.write_gbps", "0", "ssd[0].write_gbps: must be > 0");
    expect_error("ssd.1.mixed_write_gbps", "-2", "ssd[1].mixed_write_gbps: must be >= 0");
    expect_error("optimizer.adamw_params_per_s_per_thread", "-1e8", "optimizer.adamw_params_per_s_per_thread: must be > 0");
    expect_error("optimizer.threads", "0", "optimizer.threads: must be >= 1");
    expect_error("contention.compute_slowdown", "0.5", "contention.compute_slowdown: must be >= 1");
    expect_error("contention.optimizer_slowdown", "-1", "contention.optimizer_slowdown: must be >= 1");
    expect_error("contention.compute_beside_io", "0.5", "contention.compute_beside_io: must be >= 1");
    expect_error("contention.io_beside_compute", "0.9", "contention.io_beside_compute: must be >= 1");
    expect_error("memory.device_bytes", "-1", "memory.device_bytes: must be > 0");
    expect_error("memory.host_bytes", "0", "memory.host_bytes: must be > 0");
    expect_error("memory.host_bytes", "1.5", "memory.host_bytes: must be a whole number of bytes");
    expect_error("memory.host_bytes", "1e30", "memory.host_bytes: must be a whole number of bytes");
    expect_error("node.devices", "0", "node.devices: must be >= 1");
    expect_error("node.interconnect_gbps", "0", "node.interconnect_gbps: must be > 0 with more than one device");
    /* types */
    expect_error("name", "7", "name: must be a string");
    expect_error("name", "\"\"", "name: must not be empty");
    expect_error("compute", "[]", "compute: must be an object");
    expect_error("compute.matmul_gflops", "\"fast\"", "compute.matmul_gflops: must be a number");
    expect_error("ssd", "{}", "ssd: must be an array");
    expect_error("ssd.0", "3", "ssd[0]: must be an object");
    expect_error("note", "1", "note: must be a string");
    /* unknown and repeated fields */
    expect_error("compute.matmul_gflop", "100", "compute.matmul_gflop: unknown field");
    expect_error("ssd.1.speed", "1", "ssd[1].speed: unknown field");
    expect_error("bogus", "1", "bogus: unknown field");
    hw_desc hw;
    st_error err = {0};
    const char *twice = "{\"name\": \"a\", \"name\": \"b\"}";
    assert_int_equal(parse(twice, &hw, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "name: given twice"));
    /* more than 16 SSD paths */
    char big[8192] = "[";
    for (int i = 0; i < 17; i++) strcat(big, i ? ",{\"read_gbps\": 1, \"write_gbps\": 1}" : "{\"read_gbps\": 1, \"write_gbps\": 1}");
    strcat(big, "]");
    expect_error("ssd", big, "ssd: at most 16 paths");
}

static void test_malformed_json_says_where(void **state) {
    (void)state;
    hw_desc hw;
    st_error err = {0};
    assert_int_equal(parse("{\n  \"name\": \"x\",\n  oops\n}", &hw, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "hw.json: malformed JSON at line 3, column "));   /* at the bad token */
    assert_int_equal(parse("", &hw, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "malformed JSON at line 1, column 1"));
    assert_int_equal(parse("{} {}", &hw, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "column 4 (byte 3): text after the end"));
    assert_int_equal(parse("[1, 2]", &hw, &err), ST_EINVAL);
    assert_non_null(strstr(err.msg, "must be a JSON object"));
    assert_int_equal(hw_parse_json("{\"name\": \"a\0b\"}", 15, "hw.json", &hw, &err), ST_EINVAL);
}

/* Every prefix, and every byte replaced by a few troublesome ones: a clean
 * error or a valid description, never a crash (ASan watches). */
static void test_hostile_input(void **state) {
    (void)state;
    const size_t n = strlen(VALID);
    char *buf = malloc(n + 1);
    hw_desc hw;
    st_error err = {0};
    for (size_t len = 0; len < n; len++) {
        memcpy(buf, VALID, len);   /* not terminated: the parser must respect the length */
        st_status s = hw_parse_json(buf, len, "hw.json", &hw, &err);
        assert_true(s == ST_OK || (s == ST_EINVAL && strstr(err.msg, "hw.json: ")));
    }
    static const char subst[] = {'"', '{', '}', '[', ']', ',', ':', '-', '9', 'e', '\\', 0};
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < sizeof subst; k++) {
            memcpy(buf, VALID, n);
            buf[i] = subst[k];
            st_status s = hw_parse_json(buf, n, "hw.json", &hw, &err);
            assert_true(s == ST_OK || s == ST_EINVAL);
            if (s == ST_OK) assert_int_equal(hw_check(&hw, "x", &err), ST_OK);
        }
    free(buf);
}

/* The store's rates in place of the test file's: those kept as bench_*,
 * each mixed rate scaled as its direction; nothing changes without rates. */
static void test_store_rates_scale_the_mix(void **state) {
    (void)state;
    hw_ssd d = {.read_gbps = 2.5, .write_gbps = 3.0, .mixed_read_gbps = 1.25, .mixed_write_gbps = 1.2};
    hw_ssd_use_store_rates(&d, 1.5, 2.4);
    assert_true(d.read_gbps == 1.5 && d.write_gbps == 2.4);
    assert_true(d.bench_read_gbps == 2.5 && d.bench_write_gbps == 3.0);
    assert_true(fabs(d.mixed_read_gbps - 0.75) < 1e-12 && fabs(d.mixed_write_gbps - 0.96) < 1e-12);
    const hw_ssd before = d;
    hw_ssd_use_store_rates(&d, 0, 2.4);
    hw_ssd_use_store_rates(&d, 1.5, -1);
    assert_memory_equal(&d, &before, sizeof d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_store_rates_scale_the_mix),
        cmocka_unit_test(test_valid_file_reads),       cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_missing_fields_named),   cmocka_unit_test(test_bad_values_named),
        cmocka_unit_test(test_malformed_json_says_where), cmocka_unit_test(test_hostile_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
