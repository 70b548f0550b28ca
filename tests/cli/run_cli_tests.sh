#!/usr/bin/env bash
# CLI tests: run the built binary on shipped files and check what a user sees.
# usage: run_cli_tests.sh DPSIM SOURCE_DIR
set -u
dpsim=$1
src=$2
fail=0
pass=0
check() {  # check NAME EXPECTED_STATUS PATTERN -- command...
  local name=$1 want=$2 pattern=$3
  shift 4
  local out status
  out=$("$@" 2>&1)
  status=$?
  if [[ $status -ne $want ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: status $status (want $want), pattern '$pattern'"
    echo "$out" | head -20
    fail=$((fail + 1))
  else
    pass=$((pass + 1))
  fi
}
s=$src/scenarios
check estimate-table 0 "parameters +8,030,261,248" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
check estimate-nofit 0 "NO: short by" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
check estimate-json 0 '"parameters": 8030261248' -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json
check estimate-pcie 0 "ideal ring at 32.0 GB/s +878" -- "$dpsim" estimate "$s/llama3.1-8b-8xpcie4.yaml"
check inspect 0 "total +8,030,261,248" -- "$dpsim" inspect model "$src/models/llama-3.1-8b.yaml"
# Sharded data parallelism: FSDP FULL_SHARD's memory and collectives, any strategy from the command line, the
# advice's re-evaluated strategies when DDP does not fit, and the backend's refusal.
check fsdp-memory 0 "model state \(adamw, 16 B/param, full_shard over 8 GPUs\) +16.06 GB" -- "$dpsim" predict "$s/llama3.1-8b-fsdp-8xh100.yaml"
check fsdp-collectives 0 "all_gather +65 calls, 30.02 GB in all" -- "$dpsim" predict "$s/llama3.1-8b-fsdp-8xh100.yaml"
check fsdp-traffic 0 "traffic per GPU +40.32 GB \(1.43x DDP" -- "$dpsim" estimate "$s/llama3.1-8b-fsdp-8xh100.yaml"
check fsdp-estimate-order 0 "in the program's order, no contention" -- "$dpsim" estimate "$s/llama3.1-8b-fsdp-8xh100.yaml"
# HSDP: zero3's memory over the 8 GPUs of a node, the shard group's collectives and the replica all-reduces (1/8 of
# the gradients each, 2 x 7/8 of that moved per GPU) on their own stream.
check hsdp-memory 0 "model state \(adamw, 16 B/param, hybrid_shard over 8 GPUs\) +141.11 GB" -- "$dpsim" estimate "$s/llama3.1-70b-hsdp-64xh100.yaml"
check hsdp-all-reduce 0 "all_reduce \(replica group\) +81 calls, 17.64 GB in all, 30.87 GB moved per GPU" -- "$dpsim" estimate "$s/llama3.1-70b-hsdp-64xh100.yaml"
check hsdp-json 0 '"shard_group": 8' -- "$dpsim" estimate "$s/llama3.1-70b-hsdp-64xh100.yaml" --json
check hsdp-dry-run 0 "all_reduce +all_reduce +replica #0 unit layers.79" -- "$dpsim" measure "$s/llama3.1-70b-hsdp-64xh100.yaml" --dry-run
check set-sharding 0 '"sharding": "zero2"' -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --set parallelism.sharding=shard_grad_op --json
check advice-strategies 0 "zero3: [0-9.]+ GB per GPU, fits, step .*Fastest that fits: zero[23]" -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml"
check measure-sharded-dry-run 0 "comm +all_gather +data #0 unit \(root\) 2.10 GB" -- "$dpsim" measure "$s/llama3.1-8b-fsdp-8xh100.yaml" --dry-run
check measure-zero3-buffers 0 "^# buffers of rank 0 of 8 \(FSDP shards\): weight-shard [0-9]+ \(2.01 GB\) grad-shard [0-9]+ \(2.01 GB\) gathered [0-9]+ \(2.97 GB\) unit-grads [0-9]+ \(2.10 GB\)" -- "$dpsim" measure "$s/llama3.1-8b-fsdp-8xh100.yaml" --dry-run
check deepspeed-collectives 0 "all_reduce +17 calls, 16.06 GB in all, 28.11 GB moved per GPU" -- "$dpsim" predict "$s/llama3.1-8b-deepspeed-zero2-8xh100.yaml"
check deepspeed-gather-in-place 0 "comm +all_gather +data #0 weights 16.06 GB \[weights\+0 -> weights\+0, 1003782656 per rank\]" -- "$dpsim" measure "$s/llama3.1-8b-deepspeed-zero2-8xh100.yaml" --dry-run
# A sharded program runs on the CUDA executor too: without a GPU it stops at the device query, not at the plan.
check measure-sharded 1 "no CUDA device is usable here|this build has no GPU backend" -- "$dpsim" measure "$s/llama3.1-8b-fsdp-8xh100.yaml"
# inspect topology: the nccl-tests-like table (NVLS from 2 MiB on 8 H200, the A100 ring plateau near its measured
# 232.5 GB/s), a resized multi-node cluster, and a size the topology cannot have.
check inspect-topology-nvls 0 "^2MiB +2097152 +nvls/simple" -- "$dpsim" inspect topology h200-8x-nvswitch --min-bytes 1MiB --max-bytes 4MiB
check inspect-topology-a100 0 "^8GiB .*ring/simple .* 23[0-4]\.[0-9]{2}$" -- "$dpsim" inspect topology a100-8x-nvswitch --min-bytes 8GiB --max-bytes 8GiB
check inspect-topology-nodes 0 "4 nodes x 8 = 32" -- "$dpsim" inspect topology h100-ib-rail --nodes 4 --min-bytes 1GiB --max-bytes 1GiB
# The Megatron-LM 2019 cluster: 32 DGX-2H of 16 V100 SXM3, the 8 EDR NICs bounding it at 100 GB/s per node.
# IB SHARP: --collnet (NCCL_COLLNET_ENABLE=1) lets NCCL's choice weigh CollNetChain on a SHARP network, not otherwise
check inspect-topology-collnet 0 "^64MiB +67108864 +collnet_chain/simple" -- "$dpsim" inspect topology h100-ib-sharp --nodes 8 --collnet --min-bytes 64MiB --max-bytes 64MiB
check inspect-topology-no-collnet 0 "^64MiB +67108864 +nvlstree/simple" -- "$dpsim" inspect topology h100-ib-sharp --nodes 8 --min-bytes 64MiB --max-bytes 64MiB
check inspect-topology-collnet-no-sharp 2 "collnet_chain: the topology's network does not reduce in its switches" -- "$dpsim" inspect topology h100-ib-cluster --nodes 8 --algorithm collnet_chain
check inspect-topology-dgx2h 0 "32 nodes x 16 = 512 x Tesla V100-SXM3-32GB-H" -- "$dpsim" inspect topology dgx2h-v100 --min-bytes 1GiB --max-bytes 1GiB
check inspect-topology-json 0 '"busbw_GBps"' -- "$dpsim" inspect topology pcie4-8x --gpus-per-node 4 --json
check inspect-topology-too-many 2 "--gpus-per-node 12: .* has 8 GPUs per node" -- "$dpsim" inspect topology pcie4-8x --gpus-per-node 12
check inspect-topology-nvswitch-too-many 2 "--gpus-per-node 64: 8x H100 SXM, NVSwitch has 8 GPUs per node" -- "$dpsim" inspect topology h100-8x-nvswitch --gpus-per-node 64
check inspect-topology-tree-one-node 2 "--algorithm tree: NCCL's tree spans nodes" -- "$dpsim" inspect topology h100-8x-nvswitch --algorithm tree
check inspect-topology-nvlstree 0 "nvlstree/simple" -- "$dpsim" inspect topology h100-ib-cluster --min-bytes 1GiB --max-bytes 1GiB
check inspect-topology-framework-torch 0 "PyTorch launch per call" -- "$dpsim" inspect topology h200-8x-nvswitch --framework torch --max-bytes 1MiB
check inspect-topology-single-thread 0 "1KiB +1024 +ring/ll +42.80" -- "$dpsim" inspect topology a100-8x-nvswitch --framework nccl-tests-single-thread --max-bytes 1MiB
check inspect-topology-nccl-release 0 "tuning tables of 2.18.3 for NCCL 2.18.5" -- "$dpsim" inspect topology h100-8x-nvswitch --nccl-release 2.18.5 --max-bytes 1MiB
check inspect-topology-nccl-release-old 2 "--nccl-release: NCCL 2.9.9 is older than the oldest tuning table" -- "$dpsim" inspect topology h100-8x-nvswitch --nccl-release 2.9.9
check inspect-topology-unknown 2 'no topology named "h900" \(shipped: a100-40gb-roce-cluster, a100-4xhdr-cluster' -- "$dpsim" inspect topology h900
# NCCL's transport on PCIe (issue 17): a stock GeForce box stages every hop through host memory (SHM), its P2P-driver
# twin runs peer-to-peer, a two-switch box under NCCL's default mixes them; predict names the SHM bottleneck and what
# peer-to-peer gives
check inspect-topology-shm 0 "through host memory \(NCCL's SHM\) on 4 of 4 ring hops.*11.5 GB/s per direction staged" -- "$dpsim" inspect topology rtx4090-4x-pcie4 --max-bytes 1KiB
check inspect-topology-p2p 0 "peer-to-peer on all 4 ring hops \(intra_node.p2p all_paths" -- "$dpsim" inspect topology rtx4090-4x-pcie4-p2p --max-bytes 1KiB
check inspect-topology-shm-mixed 0 "on 2 of 8 ring hops \(intra_node.p2p nccl_default\)" -- "$dpsim" inspect topology l40s-8x-pcie4 --max-bytes 1KiB
check inspect-topology-shm-json 0 '"intra_shm_hops": 2' -- "$dpsim" inspect topology pcie4-8x --json --max-bytes 1KiB
check estimate-shm 0 "through host memory +2 of the node ring's 8 hops \(NCCL's SHM, no PCIe peer-to-peer\): 11.5 GB/s staged .*the node's bottleneck" -- "$dpsim" estimate "$s/llama3.1-8b-8xpcie4.yaml"
check predict-shm-bottleneck 0 "the host-memory staging of NCCL's SHM transport \(no PCIe peer-to-peer on 4 of the node ring's 4 hops" -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml"
check predict-shm-p2p-advice 0 "Peer-to-peer on every path \(a driver that allows it on these cards; intra_node.p2p: all_paths\) gives \+" -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml"
check inspect-topology-bad-size 2 "--min-bytes: \"lots\" is not a message size" -- "$dpsim" inspect topology pcie4-8x --min-bytes lots
check help 0 "estimate" -- "$dpsim" --help
check estimate-help 0 "--json" -- "$dpsim" estimate --help
# dpsim import-torch execs python3 -m dpsim.import_torch (tests/python/test_torch_import.py runs it with torch)
check import-torch-no-python 1 "cannot run /nonexistent/python3 \(set DPSIM_PYTHON" -- env DPSIM_PYTHON=/nonexistent/python3 "$dpsim" import-torch m:f
check bad-input-exit-2 2 "training.micro_bach: unknown key" -- "$dpsim" estimate "$src/tests/bad-inputs/unknown-key.yaml"
check missing-file 2 "no such file" -- "$dpsim" estimate /nonexistent.yaml
check bad-option 2 "" -- "$dpsim" estimate --no-such-option
# No partial output on error: -o must not create the file.
tmp=$(mktemp -d)
"$dpsim" estimate "$src/tests/bad-inputs/unknown-key.yaml" -o "$tmp/out.json" >/dev/null 2>&1
if [[ -e $tmp/out.json ]]; then echo "FAIL no-partial-output"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check unwritable-output 1 "cannot write" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o /nonexistent-dir/x.json
"$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json -o "$tmp/a.json" && "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json -o "$tmp/b.json"
if cmp -s "$tmp/a.json" "$tmp/b.json"; then pass=$((pass + 1)); else echo "FAIL deterministic"; fail=$((fail + 1)); fi
# Output paths that cannot be written (tests run as root in CI, so no chmod: a directory, and /proc where
# nobody may create files): exit 1 naming the path, and no temporary file left beside it.
mkdir "$tmp/outdir"
check output-is-directory 1 "cannot write $tmp/outdir" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o "$tmp/outdir"
if ls -A "$tmp" | grep -q '\.tmp\.'; then echo "FAIL no-temp-left"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check output-in-proc 1 "cannot write /proc/version" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o /proc/version
# An unreadable scenario (as root, chmod 000 does not stop reads: run as nobody where we can).
cp "$s/llama3.1-8b-8xh100.yaml" "$tmp/unreadable.yaml"
chmod 000 "$tmp/unreadable.yaml"
chmod 755 "$tmp"
if [[ $(id -u) -ne 0 ]]; then
  check unreadable-input 2 "unreadable.yaml: cannot be read" -- "$dpsim" estimate "$tmp/unreadable.yaml"
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups "$dpsim" --help >/dev/null 2>&1; then
  check unreadable-input 2 "unreadable.yaml: cannot be read" -- setpriv --reuid=65534 --regid=65534 --clear-groups \
    "$dpsim" estimate "$tmp/unreadable.yaml"
else
  echo "skip unreadable-input: running as root and nobody cannot run $dpsim"
fi
rm -rf "$tmp"
# Calibration loop: fit from an nccl-tests log, then predict with it; the context names the calibration.
ctmp=$(mktemp -d)
check calibrate-residual 2 "gb10_2rank.log: not written: .*does not describe the sweep.*limit 10%.*--force" -- "$dpsim" calibrate "$src/tests/backend/data/all_reduce_perf_gb10_2rank.log" --fabric pcie --name gb10 -o "$ctmp/c.yaml"
if [[ -e $ctmp/c.yaml ]]; then echo "FAIL calibrate-residual wrote a file"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check calibrate 0 "warning: .*written with --force" -- "$dpsim" calibrate "$src/tests/backend/data/all_reduce_perf_gb10_2rank.log" --fabric pcie --name gb10 -o "$ctmp/c.yaml" --force
check predict-calibrated 0 "calibration gb10 fnv1a64:" -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --calibration "$ctmp/c.yaml" --json --no-advice
check predict-bad-calibration 2 'gpt2-124m-4xrtx4090.yaml:6: model: unknown key "model"' -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --calibration "$s/gpt2-124m-4xrtx4090.yaml"
# Calibrating from real logs (tests/validation/data): --fit only what predict applies; a log above the modeled
# algorithm's ceiling is refused; an NVLS calibration of a DGX H100 reproduces its log in inspect topology.
vd=$src/tests/validation/data
check calibrate-fit-tree 2 'simple/tree is not a fit predict applies; accepted: simple \(= simple/ring\), ll128, ll, simple/nvls' -- "$dpsim" calibrate "$vd/all_reduce_perf_h100_dgx_8gpu.log" --topology h100-8x-nvswitch --fit simple/tree:1MiB: -o "$ctmp/tree.yaml"
check calibrate-2node-above-ceiling 2 "a3mega_2node_16gpu.log: not written: .*338.82 GB/s.*200.0 GB/s.*tree or NVLSTree" -- "$dpsim" calibrate "$vd/all_reduce_perf_h100_gcp_a3mega_2node_16gpu.log" --topology "$vd/gcp-a3-mega.yaml" --fit simple:256MiB: -o "$ctmp/a3.yaml" --force
check calibrate-ring-above-nvls 2 "above 100%.*--fit simple/nvls" -- "$dpsim" calibrate "$vd/all_reduce_perf_h100_dgx_8gpu.log" --topology h100-8x-nvswitch --fit simple:256MiB: -o "$ctmp/ring.yaml"
if [[ -e $ctmp/tree.yaml || -e $ctmp/a3.yaml || -e $ctmp/ring.yaml ]]; then echo "FAIL calibrate refusals wrote a file"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check calibrate-h100-nvls 0 "simple nvls on nvswitch, 8 ranks, 7 points" -- "$dpsim" calibrate "$vd/all_reduce_perf_h100_dgx_8gpu.log" --topology h100-8x-nvswitch --fit simple/nvls:256MiB: --name h100-dgx -o "$ctmp/h100.yaml"
check inspect-topology-calibrated 0 "calibration h100-dgx: applied simple/nvls on nvswitch \(8 ranks\)" -- "$dpsim" inspect topology h100-8x-nvswitch --calibration "$ctmp/h100.yaml" --min-bytes 8GiB --max-bytes 8GiB
# the log: 480.16 GB/s at 8 GiB; calibrated within 5% (456..504)
check inspect-topology-calibrated-busbw 0 "^8GiB .*nvls/simple .* (4[5-9][0-9]|50[0-4])\.[0-9]{2}$" -- "$dpsim" inspect topology h100-8x-nvswitch --calibration "$ctmp/h100.yaml" --min-bytes 8GiB --max-bytes 8GiB
check predict-calibration-applied 0 "^calibration h100-dgx: applied simple/nvls on nvswitch" -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --calibration "$ctmp/h100.yaml" --no-advice
check predict-calibration-not-applied 0 "not applied: simple/nvls on nvswitch \(8 ranks\) \(fitted on nvswitch; .* has pcie in a node\)" -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --calibration "$ctmp/h100.yaml" --no-advice
check predict-calibration-json 0 '"not_applied": \[' -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --calibration "$ctmp/h100.yaml" --no-advice --json
rm -rf "$ctmp"
# Hugging Face config.json files: inspect prints the published count; a mixture-of-experts file is refused (exit 2)
# with the file, line and key.
hf=$src/tests/data/hf
check inspect-hf-qwen2 0 "total +7,615,616,512" -- "$dpsim" inspect model "$hf/qwen2.5-7b/config.json"
check inspect-hf-nemo 0 "total +12,247,782,400" -- "$dpsim" inspect model "$hf/mistral-nemo-base-2407/config.json"
check inspect-hf-moe 2 "qwen3-30b-a3b/config.json:22: num_experts: 128 experts make \"qwen3_moe\" a mixture-of-experts" -- "$dpsim" inspect model "$hf/qwen3-30b-a3b/config.json"
# --set KEY=VALUE: the sweep override code from the command line; errors name the override (exit 2).
check set-nodes 0 "fat tree \(4 nodes x 8 GPUs = 32 GPUs\)" -- "$dpsim" estimate "$s/gpt2-1.5b-16xh100-ib.yaml" --set cluster.nodes=4
check set-twice-json 0 '"cluster.nodes=4",' -- "$dpsim" estimate "$s/gpt2-1.5b-16xh100-ib.yaml" --set cluster.nodes=4 --set ddp.bucket_cap=50MiB --json
check set-predict 0 '"world_size": 4' -- "$dpsim" predict "$s/gpt2-124m-4xrtx4090.yaml" --set cluster.gpus_per_node=2 --set cluster.gpus_per_node=4 --json --no-advice
check set-unknown-key 2 '^dpsim: error: --set cluster.nodez=4: cluster.nodez: unknown key "nodez" \(did you mean "nodes"\?\)' -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --set cluster.nodez=4
check set-bad-value 2 '^dpsim: error: --set cluster.nodes=four: cluster.nodes: expected a whole number, got "four"' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --set cluster.nodes=four
check set-no-equals 2 "--set cluster.nodes: expected KEY=VALUE" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --set cluster.nodes
check set-validate-predicted 2 "--set applies when re-predicting a SCENARIO" -- "$dpsim" validate --predicted x.json --measured y.json --set cluster.nodes=2
# Cost and time to train: JSON keys and the table (days); absent without a price or total; bad values exit 2.
check cost-json 0 '"per_million_tokens": ' -- "$dpsim" estimate "$s/llama3.1-8b-8xh200.yaml" --set cluster.price_per_gpu_hour=6.35 --set training.total_tokens=1e9 --json
check cost-json-time 0 '"time_to_train_s": ' -- "$dpsim" estimate "$s/llama3.1-8b-8xh200.yaml" --set cluster.price_per_gpu_hour=6.35 --set training.total_tokens=1e9 --json
check cost-table 0 "time to train 1,000,000,000 tokens +[0-9.]+ days \([0-9,]+ steps of" -- "$dpsim" predict "$s/llama3.1-8b-8xh200.yaml" --set cluster.price_per_gpu_hour=6.35 --set training.total_tokens=1e9 --no-advice
check cost-table-price 0 "price +6.35 per GPU-hour x 8 GPUs = 50.80 per hour" -- "$dpsim" estimate "$s/llama3.1-8b-8xh200.yaml" --set cluster.price_per_gpu_hour=6.35
check cost-nofit-note 0 "does NOT fit in GPU memory" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --set cluster.price_per_gpu_hour=4.76
out=$("$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --json 2>&1)
if grep -qE '"cost"|time_to_train_s' <<<"$out"; then echo "FAIL cost-absent"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
check cost-zero-price 2 "--set cluster.price_per_gpu_hour=0: cluster.price_per_gpu_hour: must be greater than 0" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --set cluster.price_per_gpu_hour=0
check cost-nan-tokens 2 "training.total_tokens: expected a finite number" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" --set training.total_tokens=nan
# The GPU catalog: keys sorted, memory in GB with the GiB it is written in, dense peaks, sources; and the
# did-you-mean for a GPU key with its parts reordered (scenario and topology file) or a topology name.
check inspect-gpus 0 "^A100-SXM-80GB +NVIDIA A100-SXM4-80GB +ampere +85\.90 GB \(80 GiB\) +312\.0 +312\.0 +156\.0 +19\.5 +- +268\.3 \(0\.86\) +2039\.0 GB/s$" -- "$dpsim" inspect gpus
check inspect-gpus-fp8 0 "^H100-SXM +NVIDIA H100 80GB HBM3 +hopper .* +989\.0 +989\.0 +494\.5 +67\.0 +1979\.0 +791\.2 \(0\.80\) +3350\.0 GB/s$" -- "$dpsim" inspect gpus
check inspect-gpus-no-bf16 0 "^V100-SXM2-32GB .* 34\.36 GB \(32 GiB\) +- +125\.0 +- +15\.7 " -- "$dpsim" inspect gpus
check inspect-gpus-sources 0 "^  H100-SXM: NVIDIA H100 datasheet" -- "$dpsim" inspect gpus
check inspect-gpus-json 0 '"memory_as_written": "143771MiB"' -- "$dpsim" inspect gpus --json
keys=$("$dpsim" inspect gpus | sed -n '3,/^Sources:/p' | sed '$d' | awk '{print $1}')
if [[ -n $keys && $keys == "$(sort <<<"$keys")" && $(wc -l <<<"$keys") -ge 8 ]]; then pass=$((pass + 1)); else echo "FAIL inspect-gpus-sorted: $keys"; fail=$((fail + 1)); fi
check gpu-did-you-mean 2 'gpu-reordered.yaml:9: cluster.gpu: unknown GPU "A100-80GB-SXM" \(did you mean "A100-SXM-80GB"\?\)' -- "$dpsim" estimate "$src/tests/bad-inputs/gpu-reordered.yaml"
check topology-did-you-mean 2 'no topology named "h100-nvswitch-8x" \(did you mean "h100-8x-nvswitch"\?\)' -- "$dpsim" inspect topology h100-nvswitch-8x
check memory-capacity-label 0 "total .* of 85\.52 GB \(81559 MiB\), all of NVIDIA H100 80GB HBM3's memory" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
check memory-runtime 0 "NCCL \(1 communicator\) +688\.00 MB" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
check measure-refuses-autocast 2 "autocast \\(training.compute_dtype bf16\\) is predicted, not measured" -- "$dpsim" measure --dry-run "$s/gpt2-124m-autocast-4xrtx4090.yaml"
# training.fp8 is predicted, not measured: the backend's GEMMs are cuBLASLt's in param_dtype
fp8dir=$(mktemp -d)
sed -e 's|^model: \.\./|model: '"$src"'/|' -e 's|^  param_dtype: bf16|  param_dtype: bf16\n  fp8: true|' "$s/llama3.1-8b-8xh100.yaml" >"$fp8dir/fp8.yaml"
check measure-refuses-fp8 2 "training.fp8: the GPU backend runs its GEMMs with cuBLASLt in training.param_dtype \\(bf16\\)" -- "$dpsim" measure --dry-run "$fp8dir/fp8.yaml"
check predict-fp8 0 "step time" -- "$dpsim" predict "$fp8dir/fp8.yaml" --no-advice
check estimate-fp8 0 "FP8 GEMMs \\(training.fp8\\) +the linear layers' at 1979 TFLOP/s fp8 peak x 0\\.73, with their casts" -- "$dpsim" estimate "$fp8dir/fp8.yaml"
# parallelism.tp_comm_overlap is predicted, not measured: the backend runs the tensor-parallel calls with NCCL
tpodir=$(mktemp -d)
sed -e 's|^model: \.\./|model: '"$src"'/|' "$s/llama3.1-70b-tp8-pp2-64xh100.yaml" >"$tpodir/tpo.yaml"
sed -i 's|^  sequence_parallel: .*|  sequence_parallel: true\n  tp_comm_overlap: true|' "$tpodir/tpo.yaml"
check measure-refuses-tp-comm-overlap 2 "parallelism.tp_comm_overlap: userbuffers: the GPU backend runs the tensor-parallel collectives with NCCL" -- "$dpsim" measure --dry-run "$tpodir/tpo.yaml"
check predict-tp-comm-overlap 0 "tensor-parallel communication" -- "$dpsim" predict "$tpodir/tpo.yaml" --no-advice
sed -i 's|^  tp_comm_overlap: .*|  tp_comm_overlap: backward|' "$tpodir/tpo.yaml"
check measure-refuses-tp-comm-overlap-backward 2 "parallelism.tp_comm_overlap: backward: the GPU backend runs the tensor-parallel collectives with NCCL on the compute stream" -- "$dpsim" measure --dry-run "$tpodir/tpo.yaml"
check predict-tp-comm-overlap-backward 0 "tensor-parallel communication" -- "$dpsim" predict "$tpodir/tpo.yaml" --no-advice
# parallelism.context is predicted, not measured: the backend's attention is one kernel over the whole sequence
check measure-refuses-context 2 "parallelism.context 8: the GPU backend's attention is one kernel over the whole sequence" -- "$dpsim" measure --dry-run "$s/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml"
check predict-context-json 0 '"context": 8' -- "$dpsim" predict "$s/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml" --json
check inspect-ops-context 0 "1 x 131072 tokens, 16384 of them on this GPU: context parallelism over 8" -- "$dpsim" inspect ops "$s/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml"
check predict-context-table 0 "context-parallel exchange .*what the ring's sends leave exposed beside the attention" -- "$dpsim" predict "$s/llama3.1-8b-128k-tp4-cp8-pp2-64xh100.yaml" --no-advice
# training.master_weights false (pure bf16) is predicted, not measured: the backend's optimizer keeps an fp32 master
sed -e 's|^model: \.\./|model: '"$src"'/|' -e 's|^  param_dtype: bf16|  param_dtype: bf16\n  master_weights: false|' "$s/llama3.1-8b-8xh100.yaml" >"$fp8dir/pure.yaml"
check measure-refuses-pure-bf16 2 "pure.yaml: training.master_weights false: the GPU backend's optimizer updates an fp32 master copy" -- "$dpsim" measure --dry-run "$fp8dir/pure.yaml"
check estimate-pure-bf16 0 "model state \(adamw in bf16, no fp32 master, 8 B/param\)" -- "$dpsim" estimate "$fp8dir/pure.yaml"
rm -rf "$fp8dir"
check inspect-tuner-plugin 0 "NCCL tuner +aws-ofi-nccl-p5 .*: its regions pick the algorithm" -- "$dpsim" inspect topology aws-p5-efa --nodes 4
check inspect-tuner-choice 0 "^1GiB +1073741824 +ring/ll128" -- "$dpsim" inspect topology aws-p5-efa --nodes 4 --min-bytes 1GiB --max-bytes 1GiB
# A pipeline is measured like any scenario (each rank its stage's program): here it reaches the GPU backend, which
# finds no GPU, as measure-sharded does; --calibrate and a --gpus count the model-parallel degrees do not divide are
# refused first.
check measure-pipeline 1 "no CUDA device is usable here|this build has no GPU backend" -- "$dpsim" measure "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check measure-pipeline-calibrate 2 "llama3.1-70b-tp8-pp2-64xh100.yaml: parallelism.pipeline 2: dpsim measure --calibrate times the GEMMs of one rank's step" -- "$dpsim" measure --calibrate "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check dry-run-fsdp-pipeline 0 "^# buffers of rank 0 of 4 of pipeline stage 1 \\(FSDP shards\\): weight-shard 1102546944 \\(2.21 GB\\) grad-shard 1102546944 \\(2.21 GB\\) gathered 4410187776 \\(8.82 GB\\) unit-grads 4410187776" -- "$dpsim" measure --dry-run "$s/llama3.1-70b-fsdp-tp8-pp2-64xh100.yaml"
check measure-refuses-late-reduction 2 "bloom-176b-tr11-g384.yaml: ddp.overlap_grad_reduce false: the GPU backend reduces each bucket as the backward completes it" -- "$dpsim" measure --dry-run "$src/validation/reference/scenarios/megatron/bloom-176b-tr11-g384.yaml"
check measure-pipeline-gpus 2 "llama3.1-70b-tp8-pp2-64xh100.yaml: --gpus 8: the scenario's tensor x pipeline degrees \\(8 x 2\\) need a multiple of 16 GPUs" -- "$dpsim" measure --gpus 8 "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
# --gpus N runs the scenario on one node of N GPUs, its data-parallel degree the rest (groups, shards and buckets).
check measure-gpus-dry-run 0 "^# dpsim measure --dry-run: gpt2-124m-4xrtx4090 \\(1 GPU\\(s\\)," -- "$dpsim" measure --dry-run --gpus 1 "$s/gpt2-124m-4xrtx4090.yaml"
check measure-gpus-pipeline 0 "^# pipeline stage 1 of 2 \\(pipeline stage 1, 8 GPU\\(s\\) run it\\)" -- "$dpsim" measure --dry-run --gpus 16 "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check measure-gpus-shard-group 2 "--gpus 2 \\(one node of 2 GPUs\\): .*llama3.1-70b-hsdp-64xh100.yaml:22: parallelism.shard_group: a shard group of 8 GPUs does not divide the 2 data-parallel GPUs" -- "$dpsim" measure --dry-run --gpus 2 "$s/llama3.1-70b-hsdp-64xh100.yaml"
check dry-run-pipeline-stage 0 "^# pipeline stage 1 of 2 \\(pipeline stage 1, 32 GPU\\(s\\) run it\\)" -- "$dpsim" measure --dry-run "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check dry-run-send-payload 0 "compute +send +to stage 1 activations 16.78 MB \\(batch 0\\) \\[tensor-comm\\+0, 8388608 elements\\]" -- "$dpsim" measure --dry-run "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check dry-run-recv-payload 0 "compute +recv +from stage 1 input-gradient 16.78 MB \\(batch 1\\) \\[p2p-recv\\+0, 8388608 elements\\]" -- "$dpsim" measure --dry-run "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check dry-run-stage-buffers 0 "^# buffers of rank 0 of 4 of pipeline stage 1 \\(flat weights and gradients\\):.* p2p-recv 8388608 " -- "$dpsim" measure --dry-run "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
check dry-run-tensor-payload 0 "compute +all_gather +tensor #0 activations 134.22 MB" -- "$dpsim" measure --dry-run "$s/llama3.1-70b-tp8-pp2-64xh100.yaml"
# Interleaving posts its steady state as Megatron does (a forward's output after the next backward, four transfers in
# one group): the dry run runs every stage to the end.
itmp=$(mktemp -d)
sed -e "s|\.\./models/|$(cd "$src" && pwd)/models/|" -e "s/schedule: 1f1b/schedule: interleaved_1f1b\n  virtual_stages: 2/" "$s/llama3.1-70b-tp8-pp2-64xh100.yaml" >"$itmp/inter.yaml"
check dry-run-interleaved-runs 0 "^# pipeline stage 1 of 2 " -- "$dpsim" measure --dry-run "$itmp/inter.yaml"
rm -rf "$itmp"
check memory-autocast-copies 0 "autocast bf16 weight copies +24[0-9.]+ MB" -- "$dpsim" estimate "$s/gpt2-124m-autocast-4xrtx4090.yaml"
check memory-not-counted 0 "not counted +the caching allocator.s fragmentation" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml"
# validate SCENARIO --measured on fewer GPUs than the scenario's PCIe tree: predicted on the first 2 of its 4 GPUs
# (the switch tree cut down as cluster.gpus_per_node: 2 would), so it matches a prediction made for 2 GPUs.
vtmp=$(mktemp -d)
sed -e "s|\.\./models/|$(cd "$src" && pwd)/models/|" -e "s/gpus_per_node: 4/gpus_per_node: 2/" "$s/gpt2-124m-4xrtx4090.yaml" >"$vtmp/two.yaml"
"$dpsim" predict "$vtmp/two.yaml" --json --no-advice -o "$vtmp/p.json"
python3 - "$vtmp/p.json" "$vtmp/m.json" <<'EOP'
import json, sys
r = json.load(open(sys.argv[1]))
r["mode"] = "measure"
r["context"] = {"gpu_count": 2, "optimizer_impl": "foreach"}  # as predicted (a real run records fused)
json.dump(r, open(sys.argv[2], "w"))
EOP
check validate-fewer-gpus-pcie 0 "gpt2-124m-4xrtx4090.yaml \(2 GPUs\)" -- "$dpsim" validate "$s/gpt2-124m-4xrtx4090.yaml" --measured "$vtmp/m.json"
rm -rf "$vtmp"
# The first GPU runs (validation/measured/2026-12-04, one H200): validate predicts what ran, the fused optimizer
# kernel the backend runs and the GPU of the run; Llama 3.1 8B at 2k tokens is within the scenario's 10%.
m=$src/validation/measured/2026-12-04
check validate-h200-llama 0 "\(1 GPUs, training.optimizer_impl fused as measured\)" -- "$dpsim" validate "$src/validation/device/llama3.1-8b-1xh200-seq2048.yaml" --measured "$m/measure-llama3.1-8b-1xh200-seq2048.json"
# GPT-2 124M (scenario on RTX 4090s, measured on the H200 with --gpus 1): predicted on the measured GPU. The backend
# runs attention as unfused batched GEMMs (head size 64) where predict costs FlashAttention: outside (exit 1).
check validate-measured-gpu 1 "on the measured NVIDIA H200 \(cluster.gpu H200\), training.optimizer_impl fused" -- "$dpsim" validate "$s/gpt2-124m-4xrtx4090.yaml" --measured "$m/measure-gpt2-124m.json"
check measure-optimizer-note 0 "note: the scenario's training.optimizer_impl is foreach; the backend runs the fused optimizer kernel" -- "$dpsim" measure "$s/gpt2-124m-4xrtx4090.yaml" --dry-run
# A biased linear's bias gradient reads dY (8192 tokens x 768, bf16), as the plan costs it.
check dry-run-bias-grad 0 "grad-fill h.11.mlp.c_proj 12.58 MB -> h.11.mlp.c_proj.bias" -- "$dpsim" measure "$s/gpt2-124m-4xrtx4090.yaml" --dry-run
# inspect ops: the compute model per op; its ops' forward times add up to predict's forward on one GPU.
check inspect-ops 0 "^layers.0.self_attn.core +attention " -- "$dpsim" inspect ops "$src/validation/device/llama3.1-8b-1xh200-seq2048.yaml"
check inspect-ops-hidden 0 "^\(496 ops of later blocks not shown: --all lists them\)" -- "$dpsim" inspect ops "$src/validation/device/llama3.1-8b-1xh200-seq2048.yaml"
check inspect-ops-gpt2 0 "^\(110 ops of later blocks not shown" -- "$dpsim" inspect ops "$s/gpt2-124m-4xrtx4090.yaml"
otmp=$(mktemp -d)
"$dpsim" inspect ops "$src/validation/device/llama3.1-8b-1xh200-seq2048.yaml" --json -o "$otmp/ops.json"
"$dpsim" predict "$src/validation/device/llama3.1-8b-1xh200-seq2048.yaml" --json --no-advice -o "$otmp/p.json"
check inspect-ops-sum 0 "^same forward" -- python3 - "$otmp/ops.json" "$otmp/p.json" <<'EOP'
import json, sys
ops, p = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
total = sum(o["forward_s"] for o in ops["ops"])
f = p["step"]["forward_s"]
print("same forward" if abs(total - f) <= 1e-9 * f else f"ops {total} vs predict {f}")
EOP
rm -rf "$otmp"
# Oversubscription and the slowest NIC (tests/data/oversubscription: 2 nodes x 8 H100, one node per leaf): estimate
# and inspect topology see the leaf uplink (8 x 50 GB/s / oversubscription, x 0.96) where 1:1 is NVSwitch-bound
# (~360-366 GB/s); one NIC at 1e-6 Gbps paces the ring (8 x 125 B/s), it is not averaged away.
o=$src/tests/data/oversubscription
check inspect-topology-1to1 0 "^8GiB .*ring/simple .* 36[0-9]\.[0-9]{2}$" -- "$dpsim" inspect topology "$o/fat-tree-1to1.yaml" --algorithm ring --min-bytes 8GiB --max-bytes 8GiB
check inspect-topology-2to1 0 "^8GiB .*ring/simple .* 19[01]\.[0-9]{2}$" -- "$dpsim" inspect topology "$o/fat-tree-2to1.yaml" --algorithm ring --min-bytes 8GiB --max-bytes 8GiB
check inspect-topology-8to1 0 "^8GiB .*ring/simple .* 4[78]\.[0-9]{2}$" -- "$dpsim" inspect topology "$o/fat-tree-8to1.yaml" --algorithm ring --min-bytes 8GiB --max-bytes 8GiB
check inspect-topology-8to1-why 0 "50.0 GB/s per node per direction \(8:1 oversubscribed leaf uplink" -- "$dpsim" inspect topology "$o/fat-tree-8to1.yaml" --max-bytes 8B
check estimate-1to1 0 "NCCL model \(ring/simple\) .*busbw 3[56][0-9]\.[0-9] GB/s" -- "$dpsim" estimate "$o/fat-tree-1to1-scenario.yaml"
check estimate-2to1 0 "NCCL model \(ring/simple\) .*busbw 19[01]\.[0-9] GB/s" -- "$dpsim" estimate "$o/fat-tree-2to1-scenario.yaml"
check estimate-8to1 0 "NCCL model \(ring/simple\) .*busbw 4[78]\.[0-9] GB/s" -- "$dpsim" estimate "$o/fat-tree-8to1-scenario.yaml"
check estimate-slow-nic 0 '"busbw_GBps": 1e-06,' -- "$dpsim" estimate "$o/slow-nic-scenario.yaml" --json
# estimate labels its step figures as the two bounds, in the table and in JSON (bounds.*).
check estimate-bounds-step 0 "^  step time +[0-9.]+ ms \(perfect-overlap bound\) to [0-9.]+ ms \(no-overlap bound\)$" -- "$dpsim" estimate "$s/gpt2-1.5b-16xh100-ib.yaml"
check estimate-bounds-exposed 0 "^  exposed communication +[0-9.]+ (us|ms) \(perfect-overlap bound\) to [0-9.]+ ms \(no-overlap bound\)$" -- "$dpsim" estimate "$s/gpt2-1.5b-16xh100-ib.yaml"
check estimate-bounds-scaling 0 "^  scaling efficiency +[0-9.]+% \(perfect-overlap bound\) to [0-9.]+% \(no-overlap bound\)$" -- "$dpsim" estimate "$s/gpt2-1.5b-16xh100-ib.yaml"
check estimate-bounds-json 0 '"no_overlap": \{' -- "$dpsim" estimate "$s/gpt2-1.5b-16xh100-ib.yaml" --json
# --trace names the GPUs it holds (text output) and the trace names each bucket's size as the --buckets table does.
ttmp=$(mktemp -d)
"$dpsim" predict "$s/gpt2-1.5b-16xh100-ib.yaml" --no-advice --buckets --trace "$ttmp/t.json" --trace-ranks 4 -o "$ttmp/table.txt"
check predict-trace-ranks 0 "^Trace $ttmp/t.json: GPUs 0, 5, 10, 15 of 16 \(the first, the last" -- cat "$ttmp/table.txt"
check predict-trace-ranks-json 0 "^Trace .*: all 8 GPUs" -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --no-advice --json --trace "$ttmp/t8.json"
size=$(grep -m1 -oE "^ *0 +[0-9.]+ [kMGT]?B" "$ttmp/table.txt" | sed -E 's/^ *0 +//')
if [[ -n $size ]] && grep -q "all-reduce b0 $size " "$ttmp/t.json" && grep -q '"traced_gpus":\[0,5,10,15\]' "$ttmp/t.json"; then
  pass=$((pass + 1))
else
  echo "FAIL trace-bucket-size: table says '$size' for bucket 0; trace: $(grep -oE 'all-reduce b0 [^"]*' "$ttmp/t.json" | head -1)"
  fail=$((fail + 1))
fi
rm -rf "$ttmp"
# Option values that cannot mean what the option says exit 2 naming the option, never a quiet default (issue 21).
check option-max-events-nan 2 '^--max-events: must be a finite number > 0, got "nan"' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --max-events nan
check option-max-events-negative 2 '^--max-events: must be a finite number > 0, got "-1"' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --max-events -1
# Step fidelity has no GPU cap: 512 GPUs is refused by the event count of its calls' NCCL steps, not by a GPU count.
check step-512-event-budget 2 "^dpsim: error: step fidelity would simulate about 1.86e\+07 events for 512 GPUs and 162 buckets, above the limit of 5e\+06 \(raise it with --max-events, or use --fidelity fast\)$" -- "$dpsim" predict "$s/llama3.1-8b-1024xh100-ib.yaml" --set cluster.nodes=64 --fidelity step
check max-events-fast-advice 2 "above the limit of 3 \(raise it with --max-events\)$" -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --max-events 3
check option-max-memory-text 2 '^--max-memory: cannot parse "lots" as a size' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --max-memory lots
check option-max-memory-zero 2 '^--max-memory: must be above 0 bytes, got "0B"' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --max-memory 0B
check max-memory-tp 2 'would hold about 43.25 MB for 65536 GPUs \(the full platform: .*, on the direct engine\), above the limit of 20.00 MB \(raise it with --max-memory\)$' -- "$dpsim" predict "$s/llama3.1-70b-tp8-64xh100.yaml" --set cluster.nodes=8192 --max-memory 20MB
check option-trace-ranks-negative 2 '^--trace-ranks: must be a whole number from 1 to 1048576, got "-5"' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --trace-ranks -5
check option-trace-ranks-zero 2 '^--trace-ranks: must be a whole number from 1 to 1048576, got "0"' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --trace-ranks 0
check option-trace-empty 2 '^--trace: must not be empty \(give a file name\)' -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --trace ""
check option-output-empty 2 '^--output: must not be empty \(give a file name\)' -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o ""
check option-nodes-zero 2 '^--nodes: must be a whole number from 1 to 1048576, got "0"' -- "$dpsim" inspect topology h100-ib-rail --nodes 0
check option-nodes-negative 2 '^--nodes: must be a whole number from 1 to 1048576, got "-1"' -- "$dpsim" inspect topology h100-ib-rail --nodes -1
check option-gpus-per-node-zero 2 '^--gpus-per-node: must be a whole number from 1 to 1024, got "0"' -- "$dpsim" inspect topology h100-ib-rail --gpus-per-node 0
check option-watchdog-nan 2 '^--watchdog: must be a finite number > 0, got "nan"' -- "$dpsim" measure "$s/llama3.1-8b-8xh100.yaml" --dry-run --watchdog nan
check option-limit-negative 2 '^--limit: must be a whole number from 0 to 1099511627776, got "-5"' -- "$dpsim" sweep "$s/sweeps/a100-hdr-vs-h100-ndr.yaml" --limit -5 -o "$(mktemp -d)/never"
out=$("$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --fidelity $'\e[2J' 2>&1)
if [[ $out == *$'\e'* ]] || ! grep -qF '\x1b[2J' <<<"$out"; then echo "FAIL option-control-characters: $out"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
# Output paths: a directory is named with why (not "Success"), and nothing is left beside it.
otmp=$(mktemp -d)
mkdir "$otmp/dir"
check output-directory-why 1 "^dpsim: error: cannot write $otmp/dir: Is a directory" -- "$dpsim" estimate "$s/llama3.1-8b-8xh100.yaml" -o "$otmp/dir"
# calibrate: a log of other GPUs than --topology's is refused; a calibration of another GPU applies nothing and
# says so for each entry; an H100 NVSwitch calibration on a V100 mesh names the fabric it was fitted on.
sed 's/NVIDIA H100 80GB HBM3/NVIDIA GeForce GTX 1080/' "$vd/all_reduce_perf_h100_dgx_8gpu.log" >"$otmp/gtx1080.log"
check calibrate-other-gpu 2 "calibrate: $otmp/gtx1080.log was measured on NVIDIA GeForce GTX 1080, but --topology h100-8x-nvswitch has NVIDIA H100 80GB HBM3 \(H100-SXM\)" -- "$dpsim" calibrate "$otmp/gtx1080.log" --topology h100-8x-nvswitch --fit ll:64:32KiB -o "$otmp/gtx.yaml"
if [[ -e $otmp/gtx.yaml ]]; then echo "FAIL calibrate-other-gpu wrote a file"; fail=$((fail + 1)); else pass=$((pass + 1)); fi
"$dpsim" calibrate "$vd/all_reduce_perf_h100_dgx_8gpu.log" --topology h100-8x-nvswitch --fit ll:64:32KiB --name h100-ll -o "$otmp/ll.yaml" >/dev/null 2>&1
check predict-calibration-same-gpu 0 "^calibration h100-ll: applied ll/ring on nvswitch \(8 ranks\)$" -- "$dpsim" predict "$s/llama3.1-8b-8xh100.yaml" --calibration "$otmp/ll.yaml" --no-advice
check predict-calibration-other-gpu 0 "^calibration h100-ll: applied nothing; not applied: ll/ring on nvswitch \(8 ranks\) \(measured on NVIDIA H100 80GB HBM3; this scenario runs NVIDIA A100-SXM4-80GB\)$" -- "$dpsim" predict "$s/bert-large-8xa100.yaml" --calibration "$otmp/ll.yaml" --no-advice
check predict-calibration-v100 0 "^calibration h100-ll: applied nothing; not applied: ll/ring on nvswitch \(8 ranks\) \(fitted on nvswitch; this topology has nvlink_mesh in a node\)$" -- "$dpsim" predict "$s/resnet50-8xv100.yaml" --calibration "$otmp/ll.yaml" --no-advice
rm -rf "$otmp"
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
