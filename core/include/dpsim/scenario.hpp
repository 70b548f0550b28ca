#pragma once
// The scenario model shared by the estimator, the simulator and the GPU backend.
// Plain structs, validated by the loader, every quantity in SI units named in the field.
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "dpsim/pipeline_schedule.hpp"

namespace dpsim {

enum class Dtype { bf16, fp16, fp32 };
enum class Optimizer { adamw, sgd_momentum, sgd };
// How PyTorch runs the optimizer step: torch/optim/optimizer.py picks foreach unless fused is asked for.
enum class OptimizerImpl { foreach, fused, forloop };
// The attention kernel: FlashAttention-2 / PyTorch SDPA (causal half skipped), FlashAttention v1 (or its Triton
// port, llm-foundry's attn_impl triton), or eager softmax(QK^T)V: as Hugging Face runs it (an fp32 softmax) or with
// the softmax in the 16-bit dtype and the scale and mask as their own kernels (Megatron-LM 2019).
enum class AttentionImpl { flash, flash1, cudnn, eager, eager_16bit };
// Whether the attention materializes its whole score matrix in HBM (eager or eager_16bit).
bool is_eager(AttentionImpl impl);
// training.activation_checkpointing: full recomputes each transformer block's forward during its backward and
// keeps only the block's input (Korthikanti et al. 2022, arXiv 2205.05198, Section 4: "full activation
// recomputation"); llm-foundry / Composer's fsdp_config.activation_checkpointing wraps every block. selective
// recomputes only each block's attention core, which keeps only its inputs (the same paper, Section 5 "selective
// activation recomputation"; Megatron-LM's --recompute-granularity selective). selective_op is torchtitan's op-level
// selective checkpointing (activation_checkpoint.mode selective, selective_ac_option "op"): each block reruns its
// forward except the SDPA attention and every other plain matmul (aten.mm), whose outputs it caches instead.
enum class ActivationCheckpointing { none, selective, full, selective_op };
// How the Llama family's memory-bound ops run: eager, one PyTorch kernel per tensor op as torchtitan and Hugging Face
// write them (RMSNorm through fp32, complex rotary, repeat_kv copies, SiLU then multiply); fused, one kernel each
// (Megatron-LM / Transformer Engine, torch.compile). data/gpus.yaml kernels.eager_elementwise_bytes.
enum class ElementwiseImpl { eager, fused };
// The cross-entropy's kernels, for the memory its backward allocates (core/plan.cpp loss_backward_transient_bytes):
// torch, torch.nn.functional.cross_entropy on fp32 logits (torchtitan, Hugging Face, plain PyTorch loops): log_softmax
// then nll_loss, whose backward allocates two more fp32 tensors of the logits' size; fused, a kernel whose saved
// tensors and gradient fit in the 4 bytes per logit dpsim keeps (Megatron-LM's vocab-parallel cross-entropy writes the
// gradient over its saved fp32 softmax; flash-attn's CrossEntropyLoss, llm-foundry's default, saves the 16-bit logits
// and writes one 16-bit gradient). Unset: cross_entropy_impl().
enum class CrossEntropyImpl { fused, torch };
// How a layer list's 4-D activations are laid out (training.memory_format): channels_first, PyTorch's default
// (torch.contiguous_format, NCHW), whose tensor-core convolutions cuDNN runs on transposed NHWC copies
// (core/conv_layout.cpp); channels_last (model.to(memory_format=torch.channels_last)), which they run on as they are.
enum class MemoryFormat { channels_first, channels_last };
const char* to_string(ElementwiseImpl impl);
const char* to_string(MemoryFormat format);
enum class Algorithm { automatic, ring, tree, nvls, nvlstree, collnet_chain };
enum class Protocol { automatic, ll, ll128, simple };
// GPU architectures, in NCCL's order of compute capability (sm70, sm75, sm80/86, sm89, sm90, sm100/sm120).
enum class Arch { volta, turing, ampere, ada, hopper, blackwell };
inline constexpr Arch kArchs[] = {Arch::volta, Arch::turing, Arch::ampere, Arch::ada, Arch::hopper, Arch::blackwell};
// The host CPUs' vendor, as NCCL reads it (src/graph/tuning.cc: the multi-node LL bandwidth row and the network
// post overhead depend on it, and NVLSTree's correction on Blackwell applies on x86 hosts only); a topology's
// `cpu_vendor`, intel by default. arm: NVIDIA Grace (GB200), an ARM host, which NCCL's tables read as Intel's.
enum class CpuVendor { intel, amd, arm };
// The entry of NCCL's per-vendor tables a host reads: AMD's, or Intel's for every other (tuning.cc:230-232
// getNetOverhead, "1.0" for Intel x86 and anything not x86; :267-272 llMaxBws, "AMD or mixed ? 1 : 0").
CpuVendor nccl_table_vendor(CpuVendor vendor);

int dtype_bytes(Dtype dtype);
const char* to_string(Dtype dtype);
const char* to_string(Optimizer optimizer);
const char* to_string(OptimizerImpl impl);
const char* to_string(AttentionImpl impl);
const char* to_string(ActivationCheckpointing checkpointing);
const char* to_string(Algorithm algorithm);
std::optional<Algorithm> algorithm_named(std::string_view name);  // inverse of to_string ("auto", "ring", ...)
const char* to_string(Protocol protocol);
const char* to_string(Arch arch);
const char* to_string(CpuVendor vendor);
std::optional<Arch> arch_named(std::string_view name);  // inverse of to_string ("volta", "ampere", ...)

// ---- hardware ---------------------------------------------------------------------------------

// A published attention kernel's forward + backward FLOP rate by sequence length, for one mask and head size
// (data/gpus.yaml flash1_fwd_bwd): FLOPs as the FlashAttention benchmarks count them, 4 x seq^2 x head_dim x heads
// per sample forward, halved when causal, the backward 2.5 times that.
struct AttentionRateCurve {
  bool causal = true;
  int64_t head_dim = 0;
  std::vector<std::pair<int64_t, double>> rate_by_sequence;  // {sequence length, FLOP/s}, ascending lengths
};

// What eager attention moves through HBM and keeps, per score element: forward and backward bytes, the bytes its
// softmax and matmul keep for the backward, and what attention dropout adds to those (its one-byte mask, and its own
// output where the matmul's input was already kept).
struct EagerScoreBytes {
  double forward = 0;
  double backward = 0;
  double saved = 0;
  double saved_dropout = 0;
};

// Bytes per element of an eager op's input (data/gpus.yaml kernels.eager_elementwise_bytes), for a 16-bit and an
// fp32 input.
struct EagerOpBytes {
  double forward = 0;
  double backward = 0;
  double saved = 0;
};
struct EagerOp {
  EagerOpBytes half;    // 16-bit input
  EagerOpBytes single;  // fp32 input
  const EagerOpBytes& of(double input_bytes) const { return input_bytes >= 4 ? single : half; }
};
struct EagerElementwise {
  EagerOp rms_norm;
  EagerOp rotary;
  EagerOp gated_act;
};

// A kernel's time over what its bytes take at memory_bandwidth x memory_efficiency, forward and backward.
struct PassFactors {
  double forward = 1;
  double backward = 1;
};

struct GpuSpec {
  std::string key;   // catalog key, e.g. "H100-SXM"
  std::string name;  // as nvidia-smi prints it
  Arch arch = Arch::hopper;
  double peak_bf16_flops_per_s = 0;  // 0: the GPU has no such unit
  double peak_fp16_flops_per_s = 0;
  double peak_fp32_flops_per_s = 0;
  double peak_tf32_flops_per_s = 0;  // TF32 tensor cores (fp32 matmuls with allow_tf32); 0: none
  double peak_fp8_flops_per_s = 0;   // dense FP8 tensor cores (training.fp8); 0: none, or no source states it
  double fp8_gemm_efficiency = 0;    // achieved / FP8 peak for large FP8 GEMMs; 0: gemm_efficiency
  double memory_bytes = 0;           // the whole capacity: nothing is reserved for CUDA, NCCL or the allocator
  std::string memory_as_written;     // as data/gpus.yaml states it, e.g. "80GiB"
  double memory_bandwidth_bytes_per_s = 0;
  bool pcie_p2p = true;          // its stock driver allows peer-to-peer over PCIe (not on GeForce cards)
  double gemm_efficiency = 0;    // achieved / peak for large GEMMs
  double memory_efficiency = 0;  // achieved / peak HBM bandwidth for streaming kernels
  // Calibrated GEMM efficiency per shape {m, n, k, batch} (as the plan has them, micro-batch included), from
  // `dpsim measure --calibrate` through a calibration; shapes not listed use gemm_efficiency.
  std::map<std::array<int64_t, 4>, double> gemm_efficiency_by_shape;
  int sm_count = 0;                              // streaming multiprocessors: the waves a GEMM's tiles run in
  double attention_efficiency = 0;               // FlashAttention forward FLOP rate / peak (data/gpus.yaml)
  std::vector<AttentionRateCurve> flash1_rates;  // FlashAttention v1 as benchmarked; empty: attention_efficiency / 2
  double cudnn_attention_efficiency = 0;         // cuDNN's fused attention forward rate / peak; 0: not measured
  // From data/gpus.yaml `kernels:`, the same for every GPU: cuBLAS's tile shapes {m, n}, the CPU-side cost of
  // launching one kernel from PyTorch eager, FlashAttention's backward work over its forward's (the FLOP convention
  // of published forward + backward rates) and its backward time over its forward time as measured.
  std::vector<std::array<int64_t, 2>> gemm_tiles;
  double kernel_launch_s = 0;
  double gemm_fixed_time_s = 0;  // GPU time of one GEMM kernel beyond its tiles' work
  double attention_backward_factor = 1;
  double attention_backward_time_factor = 1;
  double cudnn_attention_backward_time_factor = 1;  // the same for cuDNN's fused attention kernels
  double flash2_speedup_over_flash1 = 1;  // FlashAttention-2's rate over v1's (flash1 = attention_efficiency / this)
  double cuda_context_bytes = 0;          // kernels.cuda_context: the CUDA context beside the model
  double cublas_workspace_bytes = 0;      // kernels.cublas_workspace for this GPU's architecture
  // Eager attention's HBM bytes per score element (kernels.eager_attention_bytes_per_score, per implementation).
  std::map<AttentionImpl, EagerScoreBytes> eager_score_bytes;
  EagerElementwise eager_elementwise;        // kernels.eager_elementwise_bytes (training.elementwise eager)
  double eager_elementwise_time_factor = 1;  // those ops' time over their bytes' at memory_efficiency (kernels.)
  PassFactors layer_norm_time_factor;        // PyTorch's LayerNorm kernels: time / their bytes' (kernels.)
  PassFactors gelu_time_factor;              // and its GELU's (kernels.native_kernel_time_factor)
  // Passes over a convolution's input and output feature maps that one cuDNN call's NCHW <-> NHWC transposes make
  // (kernels.nchw_convolution_transposes; core/conv_layout.cpp).
  double nchw_transpose_passes_per_call = 0;
  std::string source;  // where the catalog's figures come from (data/gpus.yaml "source"), may be empty
  double peak_flops_per_s(Dtype dtype) const;
};

struct Link {
  double bandwidth_bytes_per_s = 0;  // per direction
  double latency_s = 0;
};

enum class IntraKind { nvswitch, pcie, nvlink_mesh };
// intra_node.p2p (PCIe nodes): whether NCCL moves data between two GPUs peer-to-peer over PCIe or stages it through
// host memory (its SHM transport). nccl_default: NCCL's own rule (core/cost.cpp nccl_uses_p2p); all_paths:
// NCCL_P2P_LEVEL=SYS on a driver that allows P2P; disabled: NCCL_P2P_DISABLE=1.
enum class PcieP2p { nccl_default, all_paths, disabled };
const char* to_string(PcieP2p p2p);
enum class NetworkKind { none, single_switch, fat_tree, rail_optimized };
// The inter-node transport NCCL runs over: InfiniBand / RoCE verbs, or AWS EFA (libfabric SRD through the
// aws-ofi-nccl plugin). Each has its own measured ring efficiency (data/nccl.yaml ring_efficiency.net / .efa).
enum class NetTransport { infiniband, efa };
const char* to_string(IntraKind kind);
const char* to_string(NetworkKind kind);
const char* to_string(NetTransport transport);

struct PcieSwitch {
  std::string name;
  std::string root;       // root complex (CPU socket) it hangs from
  std::vector<int> gpus;  // local GPU indices behind it
  Link uplink;            // switch <-> root complex
};

struct MeshLink {
  int gpu_a = 0;
  int gpu_b = 0;
  Link link;
};

struct IntraNode {
  IntraKind kind = IntraKind::nvswitch;
  Link gpu_link;  // nvswitch: GPU <-> switch; pcie: GPU <-> its PCIe switch
  bool nvls = false;
  std::vector<PcieSwitch> switches;     // pcie only
  std::optional<Link> inter_socket;     // pcie only: between root complexes
  PcieP2p p2p = PcieP2p::nccl_default;  // pcie only
  // pcie only: intra_node.host_staged_bandwidth, one GPU's copy to another through host memory as CUDA's
  // p2pBandwidthLatencyTest measures it with P2P disabled (unidirectional); 0: not measured.
  double host_staged_bytes_per_s = 0;
  std::vector<MeshLink> mesh;  // nvlink_mesh only
};

struct Nic {
  std::vector<int> gpus;  // local GPU indices served
  Link link;
};

struct TunerPlugin;  // dpsim/tuner_plugin.hpp

struct Network {
  NetworkKind kind = NetworkKind::none;
  double link_latency_s = 0;    // per switch hop
  double oversubscription = 1;  // fat_tree: leaf down:up ratio
  int leaf_radix = 0;           // nodes per leaf (fat_tree) or per rail switch group
  NetTransport transport = NetTransport::infiniband;
  // The ring_efficiency class of the inter-node links: "net" (InfiniBand / RoCE) or "efa".
  const char* ring_class() const { return transport == NetTransport::efa ? "efa" : "net"; }
  // network.tuner_plugin: the NCCL tuner plugin the platform loads (data/tuner_plugins.yaml); null: NCCL's own tuner.
  std::shared_ptr<const TunerPlugin> tuner_plugin;
  // network.sharp: the switches reduce in the network (InfiniBand SHARP, NCCL's CollNet through the SHARP plugin).
  bool sharp = false;
};

struct Topology {
  std::string name;
  std::string file;
  GpuSpec gpu;
  int nodes = 1;
  int gpus_per_node = 1;
  IntraNode intra;
  std::vector<Nic> nics;
  Network network;
  CpuVendor cpu_vendor = CpuVendor::intel;
  int world_size() const { return nodes * gpus_per_node; }
};

// The first `gpus_per_node` GPUs of each node: PCIe switches, NVLink mesh links and NICs that serve only
// GPUs beyond them are dropped (a NIC shared with a kept GPU stays). More GPUs than the topology lists is
// only meaningful for NVSwitch nodes; validate_topology refuses it elsewhere.
Topology keep_first_gpus(Topology t, int gpus_per_node);

// ---- NCCL cost-model constants (data/nccl.yaml) ------------------------------------------------

struct ProtoValues {
  double ll = 0, ll128 = 0, simple = 0;
  double get(Protocol protocol) const;
  double& at(Protocol protocol);  // the protocol's value, to set
};

enum class Fabric { nvlink, pcie, net };
const char* to_string(Fabric fabric);

// Extra time of a collective's pipeline fill: NCCL moves small messages in smaller chunks, so the
// first bytes of a message move slower. fill(S) = bytes / bandwidth * (1 - exp(-S / bytes)): it grows
// like S / bandwidth for small S and saturates at bytes / bandwidth (data/nccl.yaml has the fits).
struct PipelineFill {
  double bytes = 0;
  double bytes_per_s = 1;
  double seconds(double message_bytes) const;
  // NVLS: the fitted call's loop (NCCL's loopSize = channels x heads x chunk); a call whose loop is k times larger
  // fills k times the bytes (data/nccl.yaml nvls_fill.loop). 0: not scaled.
  int loop_channels = 0, loop_heads = 0, max_heads = 0;
  PipelineFill for_loop(int channels, int heads) const;
};

// The tuning constants of one NCCL release that differ from the model's top-level ones (data/nccl.yaml releases):
// replacements of single base/hw latencies and single-node LL caps, read from that release's src/graph/tuning.cc.
struct NcclReleaseTuning {
  std::array<int, 3> release{};  // the first release (major, minor, patch) that has these tables
  std::string name;              // as data/nccl.yaml writes it: "2.18.3"
  std::vector<std::tuple<Algorithm, Protocol, double>> base_latency_s;
  std::vector<std::tuple<Fabric, Algorithm, Protocol, double>> hw_latency_s;
  std::map<Arch, double> ll_max_busbw_bytes_per_s;
  std::optional<std::vector<Arch>> ll128_default_archs;        // replaces NcclModel::ll128_default_archs where given
  std::optional<std::vector<Arch>> nvlstree_correction_archs;  // replaces NcclModel's where given
};

// How NCCL cuts one call into steps, for the step fidelity (data/nccl.yaml step_chunks, with NCCL's lines): the
// chunk a tree, NVLS or NVLSTree step moves per channel, and NVLS's channel count. A model without them (tests'
// hand-built ones) runs those algorithms as one step.
struct NcclStepChunks {
  ProtoValues tree_bytes;  // the tree's chunk per protocol (0: one step)
  // LL128 tree: the chunk halves while a channel's bytes / chunk < (1 + log2(nodes) + steps_per_gpu x ppn) x
  // `steps` / ppn and the chunk is above `above_bytes`, for each rule in turn.
  struct Halving {
    double steps = 0;
    double above_bytes = 0;
  };
  std::vector<Halving> tree_ll128_halving;
  double tree_ll128_steps_per_gpu = 0;
  // CollNetChain: its chunk, halved while a channel's bytes / chunk < the chain's depth x `steps` and the chunk is
  // above `above_bytes`, for each rule in turn.
  double collnet_chain_bytes = 0;
  std::vector<Halving> collnet_chain_halving;
  double nvls_bytes = 0;  // NVLS's chunk (0: one step)
  // Below `loops` loops of (heads x chunk) per channel, the chunk is at most `bytes` (each rule in turn).
  struct Cap {
    double loops = 0;
    double bytes = 0;
  };
  std::vector<Cap> nvls_caps, nvlstree_caps;
  double nvlstree_max_bytes = 0;  // NVLSTree's chunk cap from nvlstree_max_from_nodes nodes on
  int nvlstree_max_from_nodes = 0;
  std::map<Arch, std::array<int, 2>> nvls_channels;            // NVLS channels on one node, across nodes
  int nvls_channels_for(Arch arch, bool several_nodes) const;  // 1 where the architecture has no entry
};

struct NcclModel {
  std::string version;
  std::string file;
  // Per-release tuning tables, oldest first; the top-level constants are `version`'s. dpsim/nccl_release.hpp picks
  // and applies one; tuning_release names the table in use ("" for the top-level one).
  std::vector<NcclReleaseTuning> releases;
  std::string tuning_release;
  double communicator_bytes = 0;  // GPU memory of one communicator (communicator_memory)
  // [algorithm ring|tree|nvls] -> per-protocol latency
  std::map<Algorithm, ProtoValues> base_latency_s;
  // [fabric][algorithm] -> per-protocol latency; missing = algorithm unavailable on that fabric
  std::map<Fabric, std::map<Algorithm, ProtoValues>> hw_latency_s;
  // Measured per-architecture replacements of single hw_latency_s entries.
  std::map<std::tuple<Arch, Fabric, Algorithm, Protocol>, double> hw_latency_by_arch_s;
  // hw_latency_s[fabric][algorithm] with the architecture's replacements; nullopt: unavailable on that fabric.
  std::optional<ProtoValues> hw_latency(Fabric fabric, Algorithm algorithm, Arch arch) const;
  // A calibrated per-hop latency: replaces the shipped value and every architecture's replacement of it.
  void set_hw_latency(Fabric fabric, Algorithm algorithm, Protocol protocol, double seconds);
  ProtoValues protocol_efficiency;
  // Architectures on which NCCL enables LL128 by default (over NVLink paths only; data/nccl.yaml
  // ll128_default_architectures, core/cost.cpp nccl_enables_by_default).
  std::vector<Arch> ll128_default_archs;
  std::map<Arch, double> ll_max_busbw_bytes_per_s;  // one node, by architecture (llMaxBws column N1)
  // Several nodes, by host CPU vendor: [0] two nodes, [1] more (llMaxBws columns N2 / N4).
  std::map<CpuVendor, std::array<double, 2>> ll_max_busbw_multi_node_bytes_per_s;
  // The tree all-reduce's share of the bus bandwidth (tuning.cc: x0.92 for every protocol, then LL x1/3.8, LL128
  // x120/128 across nodes).
  double tree_bandwidth_factor = 1;
  ProtoValues tree_protocol_efficiency{1, 1, 1};
  std::map<Arch, double> per_channel_max_ll128_busbw_bytes_per_s;
  // A ring/LL call's channels and threads as NCCL picks them for its size (data/nccl.yaml ll_call_channels).
  struct LlCallChannels {
    double thread_threshold_bytes = 8;  // per thread, times the ring's rank count
    int max_threads = 512, min_threads = 64, max_channels = 32;
    std::map<Arch, double> channel_busbw_bytes_per_s;  // one channel at max_threads; absent: not applied
  } ll_call_channels;
  std::map<Arch, double> nvls_efficiency;  // NCCL's nvlsEfficiency by architecture
  // nvls_algbw_per_link is Hopper's; an architecture's NVLS runs at it x this (its nvls_efficiency / Hopper's; 1 where
  // either is missing).
  double nvls_efficiency_vs_hopper(Arch arch) const;
  double nvls_algbw_per_link = 1;  // NVLS algorithm bandwidth / nominal NVLink bandwidth (measured)
  int nvls_min_gpus = 2;           // NVLS only with at least this many GPUs per NVSwitch domain
  PipelineFill nvls_fill;          // NVLS (Simple) pipeline fill (data/nccl.yaml)
  PipelineFill ring_fill;          // ring LL128/Simple pipeline fill (data/nccl.yaml)
  NcclStepChunks step_chunks;      // how NCCL cuts a call into steps (step fidelity)
  // Bandwidth factor per protocol for sizes 64 B * 2^i (NCCL treeCorrectionFactor), of which an algorithm reads its
  // first tree_correction_entries (tree; NVLSTree on nvlstree_correction_archs with an x86 host)
  std::map<Protocol, std::vector<double>> tree_correction;
  std::map<Algorithm, int> tree_correction_entries;
  std::vector<Arch> nvlstree_correction_archs;
  // A multi-node ring all-reduce's latency factor with Simple, per architecture (data/nccl.yaml)
  std::map<Arch, double> ring_simple_plateau_latency_factor;
  double ring_plateau_factor(Arch arch) const;
  std::map<CpuVendor, double> net_overhead_s;  // NCCL getNetOverhead, by host CPU vendor
  double net_overhead(CpuVendor vendor) const;
  double net_overhead_simple_factor = 1;  // the Simple protocol's multiple of it (data/nccl.yaml)
  // Latency the network plugin reports to NCCL, added to every inter-node step (NCCL's graph.latencyInter), per
  // inter-node ring_efficiency class ("efa"); absent: 0 (NCCL's own IB transport reports none).
  std::map<std::string, double> net_plugin_latency_s;
  // Edge latency NCCL's hwLat table already holds, per link class (nvswitch, pcie, nvlink_mesh, net, efa):
  // a topology's edge adds what it exceeds (data/nccl.yaml table_edge_latency).
  std::map<std::string, double> table_edge_latency_s;
  int hops_single_switch = 2, hops_within_leaf = 2, hops_across_leaves = 4;  // data/nccl.yaml network_hops
  double net_plugin_latency(const std::string& net_class) const;
  double framework_launch_overhead_s = 0;  // PyTorch launch of one collective (per DDP bucket)
  // Host time of one thread launching a collective's kernel on one of the GPUs it drives (nccl-tests -g N)
  double single_thread_launch_per_gpu_s = 0;
  // FSDP's rate limiter (limit_all_gathers): resharded units whose free events a new all-gather may run ahead of
  // (data/nccl.yaml fsdp_inflight_all_gathers, FSDP's _FreeEventQueue._max_num_inflight_all_gathers).
  int fsdp_inflight_all_gathers = 2;
  // A PCIe node's copy through host memory (p2pBandwidthLatencyTest, P2P disabled) over its GPU link's bandwidth,
  // where the topology does not state it (data/nccl.yaml host_staged_fraction_of_link)
  double host_staged_fraction_of_link = 0;
  // measured ring bus bandwidth / nominal link bandwidth, per fabric kind; shm: a ring hop through host memory, over
  // the host-staged bandwidth
  std::map<std::string, double> ring_efficiency;  // keys: nvswitch, pcie, nvlink_mesh, net, efa, shm
  // per-architecture overrides of ring_efficiency (e.g. NVLink3 on Ampere reaches less than NVLink4)
  std::map<Arch, std::map<std::string, double>> ring_efficiency_by_arch;
  double ring_efficiency_for(const std::string& fabric_class, Arch arch) const;
  void set_ring_efficiency(const std::string& fabric_class, double efficiency);  // all architectures
  // Transformer Engine's comm-GEMM overlap (parallelism.tp_comm_overlap): the GEMM splits of its "pipeline" method and
  // the SMs its "pipeline" and "bulk" methods take from the GEMM, as data/nccl.yaml tp_comm_overlap gives them (the
  // loader requires it; these defaults are neutral: one split, no SM taken).
  int tp_overlap_pipeline_splits = 1;
  int tp_overlap_comm_sms = 0;
  double overlap_slowdown = 1;               // compute slowdown beside a ring/tree/CollNet call (dpsim/overlap.hpp)
  bool overlap_slowdown_calibrated = false;  // overlap_slowdown is every algorithm's (measured on the machine)
  void set_overlap_slowdown_everywhere(double slowdown);  // a calibration's, or 1 for none
};

// ---- model ------------------------------------------------------------------------------------

enum class ModelFamily { llama, gpt2, bert };

struct TransformerConfig {
  ModelFamily family = ModelFamily::llama;
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t intermediate_size = 0;
  int64_t max_position_embeddings = 0;
  int64_t type_vocab_size = 0;  // bert
  // gpt2 variants of BLOOM (Megatron-DeepSpeed --position-embedding-type alibi, --embed-layernorm): ALiBi biases the
  // attention scores instead of a position table (no wpe tensor, no length limit); a LayerNorm after the embedding.
  bool alibi = false;
  bool embedding_norm = false;
  // gpt2 and bert as Megatron-LM 2019 runs them (separate_output_bias): the attention and MLP output projections
  // (RowParallelLinear) add their bias after the tensor-parallel reduction, as a kernel of its own.
  bool separate_output_bias = false;
  bool tie_embeddings = false;
  // Llama-family variants (Hugging Face model_types mistral, qwen2, qwen3, gemma, gemma2, phi3):
  int64_t head_dim = 0;         // per attention head; 0: hidden_size / num_heads
  bool qkv_bias = false;        // biases on the q, k, v projections (qwen2; attention_bias)
  bool o_bias = false;          // bias on the attention output projection (attention_bias)
  bool mlp_bias = false;        // biases on gate, up and down projections (llama's mlp_bias)
  bool qk_norm = false;         // qwen3: RMSNorm over head_dim on queries and keys
  bool sandwich_norms = false;  // gemma2: norms after attention and after the MLP too (4 per layer)
  // Dropout probabilities (Megatron-LM's --hidden-dropout and --attention-dropout): hidden on the embedding output and
  // on each attention and MLP output, attention on the attention probabilities. 0: no dropout op.
  double hidden_dropout = 0;
  double attention_dropout = 0;

  int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_heads; }
};

struct GemmShape {
  int64_t m = 0;  // rows per sample (tokens, or output pixels); the plan multiplies by micro-batch
  int64_t n = 0;
  int64_t k = 0;
  int64_t batch = 1;  // batched GEMM count per sample (attention heads)
};

// A parameter tensor of a layer, with its shape (an imported model: python/dpsim/import_torch.py).
struct LayerTensor {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;  // the product of shape
};

struct ExplicitLayer {
  std::string name;
  int64_t parameters = 0;
  std::vector<LayerTensor> tensors;  // empty: one tensor NAME.weight of `parameters` elements
  double forward_flops_per_sample = 0;
  std::optional<GemmShape> gemm;
  // memory-bound work: passes over this many activation elements per sample (bytes = x the activation dtype)
  double memory_elements_per_sample = 0;
  double forward_passes = 0;
  double backward_passes = 0;
  double activation_elements_per_sample = 0;  // saved for backward (bytes = x the activation dtype)
  // A 2-D convolution: its `memory` elements are its input and output feature maps (core/conv_layout.cpp).
  bool convolution = false;
};

struct ModelSpec {
  std::string name;
  std::string file;
  std::optional<TransformerConfig> transformer;  // exactly one of transformer / layers
  std::vector<ExplicitLayer> layers;
  // A layer list's tensors in the order their gradients become ready in backward (names from layers[].tensors, as an
  // autograd hook saw them); empty: backward op order, within a layer the reverse of its tensors.
  std::vector<std::string> gradient_ready_order;
};

// ---- training, DDP, collective ----------------------------------------------------------------

// training.trainable: what the step trains (core/trainable.cpp decides it for every parameter, in one place): every
// parameter (full training), LoRA adapters on a frozen base (Hu et al. 2021, arXiv 2106.09685; PEFT's LoraConfig), or
// only the parameters whose names match training.frozen_except's patterns.
enum class Trainable { all, lora, frozen_except };
const char* to_string(Trainable trainable);

// The scenario's lora: block, with PEFT's names (peft/tuners/lora/config.py LoraConfig; defaults in data/lora.yaml).
struct Lora {
  int64_t rank = 0;                         // r
  double alpha = 0;                         // lora_alpha: scales the update, no cost
  std::vector<std::string> target_modules;  // PEFT's module names (q_proj, ...), matched against the ops' names
  double dropout = 0;                       // lora_dropout: > 0 adds a dropout on each adapter's input
  Dtype adapter_dtype = Dtype::fp32;        // the adapters' weights and gradients (PEFT's autocast_adapter_dtype)
  // lora.base_dtype nf4 (QLoRA): bytes per weight of the frozen linear layers as bitsandbytes stores them
  // (data/lora.yaml); 0: every frozen tensor in training.param_dtype.
  double quantized_base_bytes = 0;
};

struct Training {
  int64_t micro_batch = 1;
  int64_t sequence_length = 1;
  int64_t gradient_accumulation = 1;
  Dtype param_dtype = Dtype::bf16;
  Dtype grad_dtype = Dtype::bf16;
  // training.compute_dtype, given only when it differs from param_dtype: 16-bit on fp32 parameters, torch.autocast
  // (weights cast per forward, the residual stream and norms in fp32: core/autocast.cpp). compute() is what matmuls
  // and activations run in.
  std::optional<Dtype> compute_dtype;
  Dtype compute() const { return compute_dtype.value_or(param_dtype); }
  bool autocast() const { return compute() != param_dtype; }
  Optimizer optimizer = Optimizer::adamw;
  OptimizerImpl optimizer_impl = OptimizerImpl::foreach;
  // training.master_weights false: "pure" 16-bit training, PyTorch's optimizer on the 16-bit parameters themselves,
  // its moments created like them (torch.zeros_like: the parameters' dtype) and no fp32 copy (a model loaded in bf16
  // and trained with torch.optim.AdamW; torchtune's dtype bf16). Default: an fp32 master copy and fp32 moments
  // whenever the trainable weights are 16-bit (mixed precision: apex / Megatron / FSDP's MixedPrecision / DeepSpeed).
  bool master_weights = true;
  AttentionImpl attention = AttentionImpl::flash;
  ActivationCheckpointing activation_checkpointing = ActivationCheckpointing::none;
  ElementwiseImpl elementwise = ElementwiseImpl::eager;
  std::optional<CrossEntropyImpl> cross_entropy;  // training.cross_entropy as written; cross_entropy_impl() resolves
  // full on every N-th block only (blocks N-1, 2N-1, ...: torchtitan's layer selective AC, ac_freq N); 1 = all.
  int64_t activation_checkpointing_every = 1;
  bool activations = true;
  bool tf32 = false;  // fp32 matmuls on TF32 tensor cores (torch.backends.cuda.matmul.allow_tf32)
  // The linear layers' GEMMs in FP8, as Transformer Engine runs them inside a 16-bit compute dtype (core/fp8.cpp)
  bool fp8 = false;
  MemoryFormat memory_format = MemoryFormat::channels_first;
  // How much the whole run trains on (at most one of the two): time and cost to train (core/training_cost.cpp).
  std::optional<double> total_tokens;
  std::optional<double> total_samples;
  Trainable trainable = Trainable::all;
  std::vector<std::string> frozen_except;  // trainable frozen_except: glob patterns over parameter names
  Lora lora;                               // trainable lora
};

struct Ddp {
  double bucket_cap_bytes = 25.0 * 1024 * 1024;
  double first_bucket_bytes = 1.0 * 1024 * 1024;
  bool gradient_as_bucket_view = false;
  bool static_graph = false;
  bool first_iteration = false;  // simulate iteration 0: one bucket for everything
  // false: every bucket is reduced after the whole forward-backward, the optimizer waiting for it (Megatron-LM's
  // local DDP; its DistributedDataParallelConfig.overlap_grad_reduce, default False); true: as PyTorch DDP's hooks.
  bool overlap_grad_reduce = true;
};

// Sharded data parallelism (ZeRO stages, Rajbhandari et al. 2019; PyTorch FSDP's ShardingStrategy): what each
// data-parallel rank keeps 1/N of. none = DDP (FSDP NO_SHARD); zero1 = optimizer state; zero2 = + gradients
// (FSDP SHARD_GRAD_OP); zero3 = + parameters (FSDP FULL_SHARD).
enum class Sharding { none, zero1, zero2, zero3 };
const char* to_string(Sharding sharding);

// FSDP's backward_prefetch (torch/distributed/fsdp/api.py BackwardPrefetch): when the next unit's all-gather is
// issued in backward: before the current unit's gradient computation, after it, or only when it is needed.
enum class BackwardPrefetch { backward_pre, backward_post, none };
const char* to_string(BackwardPrefetch prefetch);

// parallelism.tp_comm_overlap: which tensor-parallel collectives run beside a GEMM instead of blocking the compute.
// - none: every one blocks (Megatron-LM 2019's operators f and g; Megatron-LM before 2021-09).
// - backward: a column-parallel linear's backward runs its input-gradient all-reduce (with sequence parallelism:
//   reduce-scatter) beside its weight-gradient GEMM and, with sequence parallelism, the re-gather of its saved input
//   beside its input-gradient GEMM, as NCCL calls on another stream (Megatron-Core's
//   LinearWithGradAccumulationAndAsyncCommunication, always on).
// - userbuffers: Transformer Engine's overlap of every sequence-parallel call with its GEMM (Megatron-Core's
//   --tp-comm-overlap; data/nccl.yaml tp_comm_overlap); needs sequence parallelism.
enum class TpCommOverlap { none, backward, userbuffers };
const char* to_string(TpCommOverlap overlap);

// parallelism.tensor_impl: whose tensor parallelism runs the split layers.
// - megatron: Megatron-LM's layers; with sequence parallelism a column-parallel linear saves its sequence-split input
//   and gathers it again in the backward (Korthikanti et al. 2022's activation memory).
// - torch: PyTorch's DTensor plans (torchtitan's parallelize_module with PrepareModuleInput, ColwiseParallel,
//   SequenceParallel): the gathered input is what the linears' autograd saves, whole, and nothing is gathered again.
enum class TensorImpl { megatron, torch };
const char* to_string(TensorImpl impl);

struct Parallelism {
  Sharding sharding = Sharding::none;
  std::string sharding_as_written = "none";  // the name the scenario used (full_shard, zero3, ...)
  // HSDP (FSDP's HYBRID_SHARD = zero3, _HYBRID_SHARD_ZERO2 = zero2): `sharding` inside groups of `shard_group`
  // consecutive data-parallel GPUs, replicated across the groups (parallelism.shard_group; default: one node).
  bool hybrid = false;
  int shard_group = 0;  // GPUs per sharding group; 0: all data-parallel GPUs (not hybrid)
  // Megatron-LM's model parallelism (Shoeybi et al. 2019; Korthikanti et al. 2022): parallelism.tensor GPUs split each
  // transformer block's GEMMs inside a node; sequence_parallel splits the norms and residuals along the sequence too.
  // The data-parallel degree is the rest of the world (Scenario::data_parallel; parallelism.data is checked).
  int tensor = 1;
  bool sequence_parallel = false;
  // Which tensor-parallel collectives run beside a GEMM instead of blocking the compute (TpCommOverlap).
  TpCommOverlap tp_comm_overlap = TpCommOverlap::none;
  TensorImpl tensor_impl = TensorImpl::megatron;
  // Context parallelism (Megatron-Core's --context-parallel-size, cp_comm_type p2p, the default): `context` GPUs split
  // each sample's sequence into 2 x context chunks, each GPU two of them (the first and the last, for causal load
  // balance), and pass the keys and values round a ring beside the attention (Transformer Engine
  // AttnFuncWithCPAndKVP2P). The weights are replicated over the context group, and the gradients reduced over data x
  // context GPUs.
  int context = 1;
  // Pipeline parallelism (Narayanan et al. 2021): `pipeline` stages, each `virtual_stages` model chunks (interleaved
  // 1F1B), run in `schedule`'s order over training.gradient_accumulation micro-batches; transformer blocks split evenly
  // or as `pipeline_layers` lists them (one entry per virtual stage, in model order).
  int pipeline = 1;
  PipelineSchedule schedule = PipelineSchedule::one_f_one_b;
  int virtual_stages = 1;
  std::vector<int> pipeline_layers;
  // The GPUs one data-parallel replica spans: tensor x context x pipeline (the world is a multiple of it).
  int model_parallel_gpus() const { return tensor * context * pipeline; }
};

// FSDP's knobs that change the step's timing, with PyTorch's defaults (FullyShardedDataParallel.__init__).
struct Fsdp {
  BackwardPrefetch backward_prefetch = BackwardPrefetch::backward_pre;
  bool limit_all_gathers = true;      // at most two units' all-gathers in flight ahead of the compute
  std::optional<Dtype> reduce_dtype;  // MixedPrecision.reduce_dtype; unset: the gradients' dtype
  // The auto-wrap policy wraps each transformer block; what it does not wrap (embedding, final norm, head) stays in
  // the root, which FSDP does not reshard after the forward. true: each of those ops is a unit of its own.
  bool wrap_root_ops = false;
  int wrap_blocks = 1;            // transformer blocks per unit (consecutive blocks wrapped together)
  std::string wrap_module{};      // "": the whole block; a submodule name ("mlp", "self_attn"): each one a unit
  bool forward_prefetch = false;  // FullyShardedDataParallel(forward_prefetch=False)
  // Gradient accumulation under FSDP's no_sync() (reduce-scatter in the last micro-step only), as a hand-written loop
  // or DeepSpeed-style trainer does; false: the trainer reduce-scatters every micro-step, as MosaicML Composer does
  // (its trainer enters no_sync only for a DistributedDataParallel model).
  bool no_sync = true;
  // FSDP2's fully_shard(reshard_after_forward=...); FSDP1 implies it by strategy: true for zero3, false for zero2.
  std::optional<bool> reshard_after_forward;
};

// DeepSpeed's zero_optimization block for stages 1 and 2 (zero1 / zero2), with DeepSpeed's names and defaults
// (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig, at microsoft/DeepSpeed 38327e0); sizes in elements, as
// DeepSpeed counts them. Given, the zero1/zero2 step is DeepSpeedZeroOptimizer's (stage_1_and_2.py), not FSDP's.
struct ZeroOptimization {
  int64_t reduce_bucket_size = 500000000;       // config.py:109 Field(pp_int(5e8)): elements per gradient bucket
  int64_t allgather_bucket_size = 500000000;    // config.py:128; unused where torch has all_gather_into_tensor
  bool overlap_comm = false;                    // config.py:134 and :351-353: None -> stage == 3, so false here
  bool reduce_scatter = true;                   // config.py:104
  bool use_multi_rank_bucket_allreduce = true;  // config.py:115
};

struct Collective {
  Algorithm algorithm = Algorithm::automatic;
  Protocol protocol = Protocol::automatic;
  // collective.collnet: NCCL_COLLNET_ENABLE=1, NCCL's own choice then also weighs the CollNet algorithms
  // (network.sharp).
  bool collnet = false;
};

struct Scenario {
  std::string name;
  std::string file;
  ModelSpec model;
  Training training;
  Ddp ddp;
  Parallelism parallelism;
  Fsdp fsdp;
  std::optional<ZeroOptimization> zero_optimization;  // DeepSpeed's stage 1/2 knobs; unset: not DeepSpeed
  Topology topology;
  Collective collective;
  std::string nccl_release;  // collective.nccl_release: the NCCL release whose tuning tables apply ("": the default)
  NcclModel nccl;
  double tolerance = 0.10;                   // relative, for validate
  std::optional<double> price_per_gpu_hour;  // cluster.price_per_gpu_hour, in the user's currency
  int world_size() const { return topology.world_size(); }
  // Data-parallel replicas: the GPUs that tensor, context and pipeline parallelism leave.
  int data_parallel() const { return world_size() / parallelism.model_parallel_gpus(); }
  // The GPUs that reduce (and shard) a gradient together: data x context (groups.hpp GroupKind::data).
  int data_group_gpus() const { return data_parallel() * parallelism.context; }
  // Samples one step trains on: micro-batch x accumulation on each data-parallel replica.
  int64_t samples_per_step() const {
    return static_cast<int64_t>(data_parallel()) * training.micro_batch * training.gradient_accumulation;
  }
};

// training.cross_entropy, or its default for the scenario (core/scenario.cpp).
CrossEntropyImpl cross_entropy_impl(const Scenario& s);

// Which sharding dpsim models under pipeline stages: none, zero1 (Megatron's distributed optimizer) and FSDP's
// full_shard (torchtitan's); not DeepSpeed's stages, zero2 or HSDP (the loader refuses them, the advice does not offer
// them).
bool sharding_modelled_with_pipeline(Sharding sharding, bool hybrid, bool deepspeed);

// Whether `s` can run context parallelism over `context` GPUs, or the first rule it breaks (core/scenario.cpp; the
// loader reports it with its key, the advice tries only degrees that break none).
enum class ContextRule { ok, not_transformer, world, sequence, eager_attention, deepspeed, hybrid };
ContextRule context_rule(const Scenario& s, int context);

}  // namespace dpsim
