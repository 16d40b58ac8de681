#!/usr/bin/env bash
# p1_s13c.sh — ONE GPU, session 13 call 3: the fused AG+GEMM kernel at one rank reads 9% more L2
# sectors than meld_gemm with the same plan and the same cycles (call 2). Do the CTAs start out
# of step (entry ticket, handshake) and lose L2 request sharing? The rows *_sync had the compute
# CTAs meet at a counter before the engine (MELD_AG_GEMM_DIAG bit 2 then; the experiment was
# removed after this call, at commit 6f67e13's successor: it changed neither L2 reads nor time).
# Prediction was: L2 reads back to meld_gemm's, sustained -1..2%. Call 2's script with:
VARIANTS="meld_gemm fused_p1 fused_p1_sync loopback_p1 loopback_p1_sync" \
EXTRA_MET=lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum, \
ROWS=" default | meld_gemm | fused_p1 | fused_p1_sync | loopback_p1 | loopback_p1_sync | cublas " \
  exec bash "$(dirname "$0")/p1_s13b.sh"
