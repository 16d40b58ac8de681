#!/usr/bin/env bash
# p1_s38.sh — ONE GPU, session 38: the ibverbs transport's first GPU run (src/host/transport_ibv.c,
# CPU-tested only so far). The inter-node collectives (test_net: 2 x 1, 3 x 1, 2 x 2 emulated
# nodes, hierarchical and flat, splits, tp ops, graphs, a missing rank) with
# MELD_NET_TRANSPORT=ibv on the fake HCA (tests/fake/fakeverbs.c, MELD_IB_LIB): the kernel's
# command ring -> proxy -> RDMA WRITE + flag SEND -> the receiver thread's release store, with
# pinned mapped staging that the GPU reads. Then, only if this machine has an RDMA device with an
# active port and libibverbs: the same over the REAL HCA (emulated nodes on one host: RC QPs
# looped back through one NIC), 2 ranks.
# Prediction: test_net passes on the fake with the same check counts as over tcp (289 a rank at
# 2 x 2); its thread timings mean nothing (the fake moves 16 KiB fragments through a 64 KiB
# inbox with a polling thread: well under 1 GB/s). On a real HCA (if present): passes; loopback
# 64 MiB all_gather a few GB/s, bounded by the GPU's copies into pinned staging (~10-20 GB/s)
# and PCIe, not by TCP (2-4 GB/s in session 37).
# Usage (device, nvidia-h200): OUT=... [PREBUILT=1: bench/pack_bins.sh build/tests/gpu/test_net
#   build/tests/gpu/test_comm build/tests/lib/libfakeverbs.so build/lib/libmeld.so, carry build/carry] bash bench/calls/p1_s38.sh
# Estimated wall: build ~100 s cold (0 PREBUILT), test_net on the fake ~100-200 s, on a real HCA
# ~60-120 s: under 450 s; every step capped by tl.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net build/tests/gpu/test_comm build/tests/lib/libfakeverbs.so
{
  echo "## RDMA on this machine"
  ls -l /sys/class/infiniband 2>&1
  for p in /sys/class/infiniband/*/ports/*; do [ -e "$p/state" ] && echo "$p: $(cat "$p/state") $(cat "$p/link_layer" 2>/dev/null)"; done
  ls /usr/include/infiniband/verbs.h 2>&1; ldconfig -p 2>/dev/null | grep -E "libibverbs|libmlx5" | head -4
  command -v ibv_devinfo >/dev/null && ibv_devinfo 2>&1 | head -40
} > "$OUT/rdma.log" 2>&1
echo "== RDMA here:"; grep -E "state|verbs|mlx|No such" "$OUT/rdma.log" | head -10
FAKE=$PWD/build/tests/lib/libfakeverbs.so
[ -f "$FAKE" ] || { echo "no $FAKE: the fake HCA needs rdma-core headers at build time (build with PREBUILT=1 from the CPU machine)"; exit 1; }
rm -f /tmp/meld-s38-fabric
MELD_NET_TRANSPORT=ibv MELD_IB_LIB=$FAKE FAKEVERBS_FABRIC=/tmp/meld-s38-fabric \
  GT_SPAWN_TIMEOUT_S=300 timeout -k 5 "$(tl 330)" tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net_fake.log" 2>&1
echo "== run_shared 4 test_net over the fake HCA rc=$? at $(el) s"
grep -E "FAIL|checks|PASSED|FAILED|timeout after|error|threads|^---|ibverbs" "$OUT/test_net_fake.log" | cut -c1-260 | head -60
rm -f /tmp/meld-s38-fabric
# meld_comm_info's net_transport ("" on one node; test_net checks "ibv" / "tcp")
MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 90)" tests/gpu/run.sh test_comm > "$OUT/test_comm.log" 2>&1
echo "== test_comm rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_comm.log" | head -5
if grep -q "ACTIVE" "$OUT/rdma.log" && ldconfig -p 2>/dev/null | grep -q libibverbs.so.1; then
  MELD_NET_TRANSPORT=ibv MELD_DEBUG=INFO MELD_DEBUG_SUBSYS=PROXY GT_SPAWN_TIMEOUT_S=200 \
    timeout -k 5 "$(tl 200)" tests/gpu/run_shared.sh 2 test_net > "$OUT/test_net_hca.log" 2>&1
  echo "== run_shared 2 test_net over the real HCA rc=$? at $(el) s"
  grep -E "FAIL|checks|PASSED|FAILED|timeout after|error|threads|ibverbs" "$OUT/test_net_hca.log" | cut -c1-260 | head -40
else
  echo "== no active RDMA port with libibverbs here: the real-HCA run is skipped"
fi
echo "== done at $(el) s"
