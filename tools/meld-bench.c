/* meld-bench — the one benchmark command (BENCH.md):
 *
 *   meld-bench --op ag_gemm --m 8192 --n 57344 --k 8192   one point (n = N_total for ag_gemm,
 *                                                          k = K_total for gemm_rs/gemm_ar)
 *   meld-bench --op all_reduce --bytes 67108864            one collective size
 *   meld-bench --suite [--quick]                           the whole suite on the GPUs present
 *   common: --json FILE (JSON lines per BENCH.md), --quick, --soak MS (the GEMM and fused
 *   programs also time every row sustained: back-to-back for ~MS ms, with the SM clock and
 *   power; an H200 under steady load runs at its power cap, docs/DESIGN.md section 10)
 *
 * It runs the benchmark programs built beside it (build/bench/bench_<family>), translating the
 * arguments; each program prints its table and its own arithmetic. Exit status: that of the
 * programs (non-zero if any failed). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char g_bench_dir[PATH_MAX];

static void usage(FILE *f) {
  fprintf(f,
          "usage: meld-bench --op OP [--m M --n N --k K | --bytes B] [--json FILE] [--quick] [--soak MS]\n"
          "       meld-bench --suite [--quick] [--json-dir DIR] [--soak MS]\n"
          "OP: gemm, ag_gemm, gemm_rs, gemm_ar, all_gather, reduce_scatter, all_reduce,\n"
          "    all_to_all, p2p, attn (the ring-attention suite shapes on one GPU),\n"
          "    ring_attn (the ring attention, ranks as threads: one per GPU, or 2 sharing one GPU),\n"
          "    moe (MoE dispatch + grouped GEMM and the whole SwiGLU layer meld_moe_ffn, ranks as threads:\n"
          "         one per GPU, or 2 sharing one GPU)\n"
          "--suite writes DIR/<family>-<date>.jsonl (default DIR bench/results)\n");
}

/* The programs that take --soak MS. */
static int takes_soak(const char *prog) {
  return !strcmp(prog, "bench_gemm") || !strcmp(prog, "bench_ag_gemm") || !strcmp(prog, "bench_gemm_rs");
}

/* Runs argv (argv[0] = program name in the bench dir); returns its exit status. */
static int run(char **argv) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s/%s", g_bench_dir, argv[0]);
  if (access(path, X_OK) != 0) {
    fprintf(stderr, "meld-bench: %s is not built (run `make bench`)\n", path);
    return 127;
  }
  fprintf(stderr, "meld-bench: %s", path);
  for (int i = 1; argv[i]; i++) fprintf(stderr, " %s", argv[i]);
  fprintf(stderr, "\n");
  pid_t pid = fork();
  if (pid == 0) {
    execv(path, argv);
    fprintf(stderr, "meld-bench: cannot run %s: %s\n", path, strerror(errno));
    _exit(127);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) < 0) return 127;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv) {
  const char *op = NULL, *json = NULL, *json_dir = "bench/results", *soak = NULL;
  long long m = 0, n = 0, k = 0, bytes = 0;
  int suite = 0, quick = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--op") && v) op = argv[++i];
    else if (!strcmp(a, "--m") && v) m = atoll(argv[++i]);
    else if (!strcmp(a, "--n") && v) n = atoll(argv[++i]);
    else if (!strcmp(a, "--k") && v) k = atoll(argv[++i]);
    else if (!strcmp(a, "--bytes") && v) bytes = atoll(argv[++i]);
    else if (!strcmp(a, "--json") && v) json = argv[++i];
    else if (!strcmp(a, "--json-dir") && v) json_dir = argv[++i];
    else if (!strcmp(a, "--suite")) suite = 1;
    else if (!strcmp(a, "--quick")) quick = 1;
    else if (!strcmp(a, "--soak") && v && atoi(v) > 0) soak = argv[++i];
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    else { usage(stderr); return 2; }
  }
  /* The programs live in ../bench relative to this executable (build/bin -> build/bench). */
  char self[PATH_MAX];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) { fprintf(stderr, "meld-bench: cannot find myself\n"); return 1; }
  self[len] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  snprintf(g_bench_dir, sizeof g_bench_dir, "%.3900s/../bench", self);

  if (suite) {
    /* program, family (JSON file name), extra argument */
    static const char *fams[][3] = {{"bench_gemm", "gemm", NULL},       {"bench_coll", "coll", NULL},
                                    {"bench_coll", "coll_zc", "--zc"},  {"bench_ag_gemm", "ag_gemm", NULL},
                                    {"bench_gemm_rs", "gemm_rs", NULL}, {"bench_p2p", "p2p", NULL},
                                    /* attention alone (the ring attention's compute core, one GPU) */
                                    {"bench_attn", "attn", NULL},
                                    /* the ring attention: fused / gathered / compute-only, ranks as threads */
                                    {"bench_ring_attn", "ring_attn", NULL},
                                    /* MoE: dispatch + grouped GEMM (fused / nocopy / comm / cuBLAS loop) and the layer (ffn) */
                                    {"bench_moe", "moe", NULL},
                                    /* 2 ranks as threads of this process: on one GPU their kernels run at once */
                                    {"bench_inproc", "inproc", NULL}};
    int worst = 0;
    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
      char jpath[PATH_MAX], date[16];
      time_t t = time(NULL);
      strftime(date, sizeof date, "%Y-%m-%d", gmtime(&t));
      snprintf(jpath, sizeof jpath, "%.3000s/%s-%s.jsonl", json_dir, fams[f][1], date);
      char *av[10] = {(char *)fams[f][0], (char *)"--json", jpath, NULL};
      int ac = 3;
      if (quick && strcmp(fams[f][1], "p2p") != 0) av[ac++] = (char *)"--quick";
      if (fams[f][2]) av[ac++] = (char *)fams[f][2];
      if (soak && takes_soak(fams[f][0])) { av[ac++] = (char *)"--soak"; av[ac++] = (char *)soak; }
      av[ac] = NULL;
      int rc = run(av);
      if (rc) worst = rc;
    }
    return worst;
  }
  if (!op) { usage(stderr); return 2; }
  char shape[96], bstr[32];
  snprintf(shape, sizeof shape, "%lld,%lld,%lld", m, n, k);
  snprintf(bstr, sizeof bstr, "%lld", bytes);
  char *av[14];
  int ac = 0;
  int needs_mnk = 0;
  if (!strcmp(op, "gemm")) av[ac++] = "bench_gemm", needs_mnk = 1;
  else if (!strcmp(op, "ag_gemm")) av[ac++] = "bench_ag_gemm", needs_mnk = 1;
  else if (!strcmp(op, "gemm_rs") || !strcmp(op, "gemm_ar")) {
    av[ac++] = "bench_gemm_rs";
    av[ac++] = "--op";
    av[ac++] = !strcmp(op, "gemm_rs") ? "rs" : "ar";
    needs_mnk = 1;
  } else if (!strcmp(op, "all_gather") || !strcmp(op, "reduce_scatter") || !strcmp(op, "all_reduce") ||
             !strcmp(op, "all_to_all")) {
    av[ac++] = "bench_coll";
    av[ac++] = "--only";
    av[ac++] = (char *)op;
    if (bytes > 0) { av[ac++] = "--bytes"; av[ac++] = bstr; }
  } else if (!strcmp(op, "attn")) {
    av[ac++] = "bench_attn";
  } else if (!strcmp(op, "ring_attn")) {
    av[ac++] = "bench_ring_attn";
  } else if (!strcmp(op, "moe")) {
    av[ac++] = "bench_moe";
  } else if (!strcmp(op, "p2p")) {
    av[ac++] = "bench_p2p";
    if (bytes > 0) { av[ac++] = "--bytes"; av[ac++] = bstr; }
  } else {
    fprintf(stderr, "meld-bench: unknown op '%s'\n", op);
    usage(stderr);
    return 2;
  }
  if (needs_mnk) {
    if ((m > 0) != (n > 0) || (m > 0) != (k > 0)) {
      fprintf(stderr, "meld-bench: give all of --m, --n, --k (or none: the op's suite shapes)\n");
      return 2;
    }
    if (m > 0) {
      av[ac++] = "--shape";
      av[ac++] = shape;
      if (!strcmp(av[0], "bench_gemm")) av[ac++] = "--custom-only"; /* one point, not the suite + it */
    }
  }
  if (json) { av[ac++] = "--json"; av[ac++] = (char *)json; }
  if (quick) av[ac++] = "--quick";
  if (soak && takes_soak(av[0])) { av[ac++] = "--soak"; av[ac++] = (char *)soak; }
  av[ac] = NULL;
  return run(av);
}
