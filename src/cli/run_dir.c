/* run_dir.c - a training run's directory (see run_dir.h). */
#include "cli/run_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "strata/fs.h"
#include "strata/gpt_io.h"

struct run_dir {
    char path[4096];
    int lock;           /* RUN_LOCK, held while this process writes the run */
    FILE *metrics;
    int has_previous;   /* an overwritten run waits in PREVIOUS until this one succeeds */
};

/* What a run writes into its directory. With --overwrite, a previous run's
 * copies are moved aside into PREVIOUS and deleted only when the new run
 * finishes; if it fails, they are put back, so a failed run loses nothing. */
static const char *run_files[] = {"run.json", "metrics.jsonl", "model.safetensors", "config.json", "tokenizer.json",
                                  "loss.png", "loss.dat", "loss.gnuplot", "store"};
#define N_RUN_FILES (sizeof run_files / sizeof run_files[0])
#define PREVIOUS ".previous-run"

static int join(char *out, size_t cap, const char *dir, const char *name) {
    return snprintf(out, cap, "%s/%s", dir, name) < (int)cap;
}

/* One writer per run: every process that writes a run directory takes its
 * lock first and holds it until run_dir_finish (or its end). */
#define RUN_LOCK "run.lock"

static st_status lock_run(const char *path, int *lock, st_error *err) {
    char f[4200];
    join(f, sizeof f, path, RUN_LOCK);
    long holder;
    st_error e = {0};
    st_status s = st_lock_take(f, 1, lock, &holder, &e);
    if (s == ST_EEXIST) {
        char who[64] = "another strata process";
        if (holder) snprintf(who, sizeof who, "another strata process (PID %ld)", holder);
        return st_fail(err, s, "%s: %s is writing this run; wait for it to end, or choose another --run-dir", path, who);
    }
    return s == ST_OK ? ST_OK : st_fail(err, s, "%s", e.msg);
}

static st_status create_locked(run_dir **out, const char *path, const char *desc_json, int overwrite, st_error *err);

st_status run_dir_create(run_dir **out, const char *path, const char *desc_json, int overwrite, st_error *err) {
    *out = NULL;
    int lock;
    st_status s = st_mkdir_p(path, err);
    if (s != ST_OK) return s;
    if (access(path, W_OK) != 0) return st_fail_errno(err, errno, "%s: run directory is not writable", path);
    if ((s = lock_run(path, &lock, err)) != ST_OK) return s;
    if ((s = create_locked(out, path, desc_json, overwrite, err)) != ST_OK) st_lock_release(&lock);
    else (*out)->lock = lock;
    return s;
}

st_status run_dir_reopen(run_dir **out, const char *path, st_error *err) {
    *out = NULL;
    char f[4200];
    join(f, sizeof f, path, "run.json");
    if (access(f, F_OK) != 0) return st_fail_errno(err, errno, "%s: not a run directory (no run.json)", path);
    if (access(path, W_OK) != 0) return st_fail_errno(err, errno, "%s: run directory is not writable", path);
    int lock;
    st_status s = lock_run(path, &lock, err);
    if (s != ST_OK) return s;
    run_dir *rd = calloc(1, sizeof *rd);
    if (!rd) {
        st_lock_release(&lock);
        return st_fail(err, ST_ENOMEM, "out of memory");
    }
    rd->lock = lock;
    snprintf(rd->path, sizeof rd->path, "%s", path);
    *out = rd;
    return ST_OK;
}

static st_status create_locked(run_dir **out, const char *path, const char *desc_json, int overwrite, st_error *err) {
    st_status s;
    run_dir *rd = calloc(1, sizeof *rd);
    if (!rd) return st_fail(err, ST_ENOMEM, "out of memory");
    rd->lock = -1;   /* the caller's until it succeeds */
    snprintf(rd->path, sizeof rd->path, "%s", path);
    char f[4200];
    join(f, sizeof f, path, "run.json");
    if (access(f, F_OK) == 0 && !overwrite) {
        free(rd);
        return st_fail(err, ST_EEXIST,
                       "%s already holds a run (run.json); pass --overwrite to replace it, or choose another --run-dir",
                       path);
    }
    /* Files a run would replace, without run.json: not ours (a downloaded
     * model, the --init file's own directory). Keep them unless asked. */
    for (size_t i = 1; i < 5 && !overwrite; i++) {
        join(f, sizeof f, path, run_files[i]);
        if (access(f, F_OK) == 0) {
            free(rd);
            return st_fail(err, ST_EEXIST,
                           "%s already holds %s (not from a strata run); pass --overwrite to replace it, or choose "
                           "another --run-dir",
                           path, run_files[i]);
        }
    }
    char prev[4200];
    join(prev, sizeof prev, path, PREVIOUS);
    if (access(prev, F_OK) == 0) {
        free(rd);
        return st_fail(err, ST_EEXIST,
                       "%s exists: an earlier --overwrite was interrupted and the run before it is kept there; move "
                       "its files back into %s or delete it",
                       prev, path);
    }
    for (size_t i = 0; i < N_RUN_FILES; i++) {
        char from[4200], to[4400];
        join(from, sizeof from, path, run_files[i]);
        if (access(from, F_OK) != 0) continue;
        if (!rd->has_previous && mkdir(prev, 0755) != 0) {
            s = st_fail_errno(err, errno, "%s: cannot create", prev);
            free(rd);
            return s;
        }
        rd->has_previous = 1;
        snprintf(to, sizeof to, "%s/%s", prev, run_files[i]);
        if (rename(from, to) != 0) {
            s = st_fail_errno(err, errno, "%s: cannot move the previous run's file aside", from);
            run_dir_finish(rd, 0);
            return s;
        }
    }
    join(f, sizeof f, path, "run.json");
    char *text = malloc(strlen(desc_json) + 2);
    if (!text) {
        free(rd);
        return st_fail(err, ST_ENOMEM, "out of memory");
    }
    sprintf(text, "%s\n", desc_json);
    s = st_write_file_atomic(f, text, strlen(text), err);
    free(text);
    if (s != ST_OK) {
        free(rd);
        return s;
    }
    join(f, sizeof f, path, "metrics.jsonl");
    rd->metrics = fopen(f, "w");
    if (!rd->metrics) {
        s = st_fail_errno(err, errno, "%s: cannot create", f);
        free(rd);
        return s;
    }
    *out = rd;
    return ST_OK;
}

/* Keeps the lines of metrics.jsonl up to step (whole lines only). */
static st_status truncate_metrics(const char *path, long step, st_error *err) {
    FILE *f = fopen(path, "r+");
    if (!f) return errno == ENOENT ? ST_OK : st_fail_errno(err, errno, "%s: cannot open", path);
    char line[4096];
    long keep = 0;
    for (;;) {
        if (!fgets(line, sizeof line, f)) break;
        const size_t n = strlen(line);
        if (n == 0 || line[n - 1] != '\n') break;   /* cut short (or absurdly long): drop it and what follows */
        const char *p = strstr(line, "\"step\": ");
        if (!p || strtol(p + 8, NULL, 10) > step) break;
        keep = ftell(f);
    }
    int bad = fflush(f) != 0 || ftruncate(fileno(f), keep) != 0 || fsync(fileno(f)) != 0;
    int e = errno;
    fclose(f);
    return bad ? st_fail_errno(err, e, "%s: cannot truncate to step %ld", path, step) : ST_OK;
}

/* Temporary files of a save that a crash interrupted. */
static void remove_temporaries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (n > 4 && !strcmp(e->d_name + n - 4, ".tmp")) {
            char f[4400];
            snprintf(f, sizeof f, "%s/%s", dir, e->d_name);
            unlink(f);
        }
    }
    closedir(d);
}

st_status run_dir_cut_to(run_dir *rd, long step, st_error *err) {
    char f[4200];
    remove_temporaries(rd->path);
    join(f, sizeof f, rd->path, "metrics.jsonl");
    st_status s = truncate_metrics(f, step, err);
    if (s != ST_OK) return s;
    if (!(rd->metrics = fopen(f, "a"))) return st_fail_errno(err, errno, "%s: cannot open", f);
    return ST_OK;
}

st_status run_dir_write_settings(run_dir *rd, const char *settings_json, st_error *err) {
    char f[4200];
    join(f, sizeof f, rd->path, "run.json");
    char *text = malloc(strlen(settings_json) + 2);
    if (!text) return st_fail(err, ST_ENOMEM, "out of memory");
    sprintf(text, "%s\n", settings_json);
    st_status s = st_write_file_atomic(f, text, strlen(text), err);
    free(text);
    return s;
}

st_status run_dir_log_metrics(run_dir *rd, st_error *err, const char *fmt, ...) {
    if (!rd) return ST_OK;
    va_list ap;
    va_start(ap, fmt);
    int bad = vfprintf(rd->metrics, fmt, ap) < 0;
    va_end(ap);
    bad |= fputc('\n', rd->metrics) == EOF || fflush(rd->metrics) != 0;
    if (bad) return st_fail_errno(err, errno, "%s/metrics.jsonl: write failed", rd->path);
    return ST_OK;
}

st_status run_dir_sync_metrics(run_dir *rd, st_error *err) {
    if (!rd) return ST_OK;
    if (fflush(rd->metrics) != 0 || fsync(fileno(rd->metrics)) != 0)
        return st_fail_errno(err, errno, "%s/metrics.jsonl: cannot sync", rd->path);
    return ST_OK;
}

st_status run_dir_save_weights(run_dir *rd, const gpt_config *cfg, gpt_unit_reader read_unit, void *ctx,
                               uint64_t vocab_fingerprint, st_error *err) {
    /* the run directory is a Hugging Face model directory: one file, F32 */
    const hf_save_opts o = {.dtype = SAFETENSORS_F32, .vocab_fingerprint = vocab_fingerprint};
    return hf_checkpoint_save(rd->path, cfg, read_unit, ctx, &o, err);
}

st_status run_dir_save_tokenizer(run_dir *rd, const char *tokenizer_json, st_error *err) {
    char *text;
    size_t n;
    st_status s = st_read_file(tokenizer_json, 0, &text, &n, err);
    if (s != ST_OK) return s;
    char f[4200];
    join(f, sizeof f, rd->path, "tokenizer.json");
    s = st_write_file_atomic(f, text, n, err);
    free(text);
    return s;
}

/* Runs `gnuplot script` and returns its exit status (-1 if it could not start). */
static int run_gnuplot(const char *script) {
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) {
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void run_dir_plot(run_dir *rd, char *msg, size_t cap) {
    if (!rd) return;
    char script[4200], png[4200], data[4200], metrics[4200];
    join(script, sizeof script, rd->path, "loss.gnuplot");
    join(png, sizeof png, rd->path, "loss.png");
    join(data, sizeof data, rd->path, "loss.dat");
    join(metrics, sizeof metrics, rd->path, "metrics.jsonl");
    /* metrics.jsonl -> columns gnuplot reads: step, train loss, validation loss */
    FILE *in = fopen(metrics, "r"), *out = fopen(data, "w"), *gp = fopen(script, "w");
    if (!in || !out || !gp) {
        if (in) fclose(in);
        if (out) fclose(out);
        if (gp) fclose(gp);
        snprintf(msg, cap, "plot: skipped (cannot write in %s)", rd->path);
        return;
    }
    char line[1024];
    while (fgets(line, sizeof line, in)) {
        const char *p = strstr(line, "\"step\": ");
        if (!p) continue;
        const char *l = strstr(line, "\"loss\": "), *v = strstr(line, "\"val_loss\": ");
        fprintf(out, "%ld %.6g %.6g\n", strtol(p + 8, NULL, 10), l ? strtod(l + 8, NULL) : NAN,
                v ? strtod(v + 12, NULL) : NAN);
    }
    fclose(in);
    fclose(out);
    fprintf(gp,
            "set terminal png size 900,500\nset output '%s'\nset datafile missing 'nan'\n"
            "set xlabel 'step'\nset ylabel 'loss'\nset grid\nset key top right\n"
            "plot '%s' using 1:2 with lines lw 2 title 'train', '%s' using 1:3 with linespoints pt 7 title 'validation'\n",
            png, data, data);
    fclose(gp);
    int rc = run_gnuplot(script);
    if (rc == 127) snprintf(msg, cap, "plot: skipped (gnuplot is not installed; apt-get install gnuplot-nox)");
    else if (rc != 0) snprintf(msg, cap, "plot: gnuplot failed (exit %d) on %s", rc, script);
    else snprintf(msg, cap, "plot: %s", png);
}

const char *run_dir_path(const run_dir *rd) { return rd->path; }

/* Removes path: a file, or a directory of files (a run's store). */
static void remove_entry(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            char f[4400];
            snprintf(f, sizeof f, "%s/%s", path, e->d_name);
            unlink(f);
        }
        closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

/* Settles an overwritten run: deleted (success), or put back (failure). */
static void settle_previous(run_dir *rd, int success) {
    if (rd->has_previous) {
        char prev[4200];
        join(prev, sizeof prev, rd->path, PREVIOUS);
        for (size_t i = 0; i < N_RUN_FILES; i++) {
            char kept[4400], here[4200];
            snprintf(kept, sizeof kept, "%s/%s", prev, run_files[i]);
            join(here, sizeof here, rd->path, run_files[i]);
            if (access(kept, F_OK) != 0) continue;
            if (success) {
                remove_entry(kept);
            } else {   /* the new run failed: the previous one comes back */
                remove_entry(here);
                rename(kept, here);
            }
        }
        rmdir(prev);
        rd->has_previous = 0;
    }
}

void run_dir_committed(run_dir *rd) {
    if (rd) settle_previous(rd, 1);
}

void run_dir_finish(run_dir *rd, run_end end) {
    if (!rd) return;
    if (rd->metrics) fclose(rd->metrics);
    rd->metrics = NULL;
    if (end == RUN_DISCARDED)
        for (size_t i = 0; i < N_RUN_FILES; i++) {
            char here[4200];
            join(here, sizeof here, rd->path, run_files[i]);
            remove_entry(here);
        }
    settle_previous(rd, end == RUN_SUCCEEDED);
    st_lock_release(&rd->lock);
    free(rd);
}
