/* test_net_plan.c — the inter-node path's arithmetic (src/common/net.h) and its knob: launches
 * cover every byte of a block exactly once, in ranges no longer than a staging slot; the two
 * parities' slots never overlap and parity repeats every second epoch (the reuse argument);
 * staging sizes; MELD_NET_CHUNK_BYTES parsing and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/net.h"
#include "error.h"
#include "net.h"

static void test_launch_ranges(void **state) {
  (void)state;
  const uint64_t blocks[] = {MELD_NET_BLOCK_MIN, 65536, MELD_NET_BLOCK_DEFAULT};
  const uint64_t sizes[] = {0, 1, 2, 4095, 4096, 4097, 65536, 65537, 140002, 3u << 20, (3u << 20) + 6};
  for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      const uint64_t B = blocks[b], n = sizes[s], L = meld_net_launches(n, B);
      assert_int_equal(L, n == 0 ? 0 : (n + B - 1) / B);
      uint64_t covered = 0;
      for (uint64_t i = 0; i < L; i++) {
        uint64_t c0 = 0, len = 0;
        meld_net_launch_range(n, B, i, &c0, &len);
        assert_int_equal(c0, covered); /* contiguous, in order, no gap or overlap */
        assert_true(len > 0 && len <= B);
        covered += len;
      }
      assert_int_equal(covered, n);
      uint64_t c0 = 0, len = 1;
      meld_net_launch_range(n, B, L, &c0, &len); /* one past the last: empty */
      assert_int_equal(len, 0);
    }
}

/* An all-reduce's parts (ceil(count / P) elements, the last shorter or empty) over the launches
 * of one block size: every rank's piece of every launch stays inside its part, the pieces of one
 * part are contiguous and cover it exactly, and the parts cover the buffer exactly. */
static void test_pieces(void **state) {
  (void)state;
  const uint64_t counts[] = {1, 2, 3, 1000, 1001, 70001, 70003, 262145, 1u << 20};
  const int ranks[] = {2, 3, 4, 5, 8};
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
    for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++)
      for (int es = 2; es <= 4; es += 2) {
        const int P = ranks[ri];
        const uint64_t total = counts[ci] * (uint64_t)es, blk = (counts[ci] + P - 1) / P * (uint64_t)es;
        const uint64_t B = 65536, L = meld_net_launches(blk, B);
        uint64_t covered = 0;
        for (int q = 0; q < P; q++) {
          uint64_t got = 0;
          for (uint64_t i = 0; i < L; i++) {
            uint64_t c0 = 0, len = 0;
            meld_net_launch_range(blk, B, i, &c0, &len);
            const uint64_t n = meld_net_piece(blk, total, c0, len, q);
            assert_true(n <= len);
            if (n > 0) assert_int_equal(c0, got); /* contiguous from the part's start */
            got += n;
          }
          const uint64_t start = (uint64_t)q * blk;
          const uint64_t want = start >= total ? 0 : (total - start < blk ? total - start : blk);
          assert_int_equal(got, want);
          assert_int_equal(got % (uint64_t)es, 0); /* whole elements */
          covered += got;
        }
        assert_int_equal(covered, total);
      }
}

static void test_slots(void **state) {
  (void)state;
  const int P = 5;
  const uint64_t B = 65536;
  assert_int_equal(meld_net_stage_bytes(P, B), 2ull * P * B);
  for (uint64_t e = 1; e < 6; e++)
    for (int q = 0; q < P; q++) {
      const uint64_t s = meld_net_slot(e, q, P, B);
      assert_true(s + B <= meld_net_stage_bytes(P, B));
      assert_int_equal(s % 256, 0);
      assert_int_equal(s, meld_net_slot(e + 2, q, P, B)); /* parity repeats */
      for (int r = 0; r < P; r++) {                       /* the next epoch's slots are apart */
        const uint64_t t = meld_net_slot(e + 1, r, P, B);
        assert_true(t + B <= s || s + B <= t);
        if (r != q) {
          const uint64_t u = meld_net_slot(e, r, P, B);
          assert_true(u + B <= s || s + B <= u);
        }
      }
    }
}

static void test_block_env(void **state) {
  (void)state;
  uint64_t b = 0;
  unsetenv("MELD_NET_CHUNK_BYTES");
  assert_int_equal(meld_net_block_env(&b), MELD_OK);
  assert_int_equal(b, MELD_NET_BLOCK_DEFAULT);
  setenv("MELD_NET_CHUNK_BYTES", "64K", 1);
  assert_int_equal(meld_net_block_env(&b), MELD_OK);
  assert_int_equal(b, 65536);
  const char *bad[] = {"100", "4000", "1G", "65537", "-4096", "abc", "64KX"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("MELD_NET_CHUNK_BYTES", bad[i], 1);
    assert_int_equal(meld_net_block_env(&b), MELD_ERR_INVALID_ARG);
    assert_non_null(strstr(meld_last_error(), "MELD_NET_CHUNK_BYTES"));
    assert_non_null(strstr(meld_last_error(), "multiple of 256"));
  }
  unsetenv("MELD_NET_CHUNK_BYTES");
  assert_true(meld_net_block_valid(MELD_NET_BLOCK_MIN) && meld_net_block_valid(MELD_NET_BLOCK_MAX));
  assert_false(meld_net_block_valid(MELD_NET_BLOCK_MIN - 256) || meld_net_block_valid(MELD_NET_BLOCK_MAX + 256));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_launch_ranges),
      cmocka_unit_test(test_pieces),
      cmocka_unit_test(test_slots),
      cmocka_unit_test(test_block_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
