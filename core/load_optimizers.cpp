// data/optimizers.yaml: the optimizer step's passes over one parameter (core/plan.cpp turns them into bytes).
#include <map>
#include <utility>

#include "dpsim/input_file.hpp"
#include "dpsim/load.hpp"
#include "load_internal.hpp"
#include "yaml_node.hpp"

namespace dpsim {

namespace {

using PassTable = std::map<std::pair<Optimizer, OptimizerImpl>, OptimizerPasses>;

PassTable read_pass_table() {
  const YNode root = YNode::load_file(optimizers_file());
  root.allow_only({"optimizers"});
  const YNode all = root.at("optimizers");
  const Optimizer optimizers[] = {Optimizer::adamw, Optimizer::sgd_momentum, Optimizer::sgd};
  const OptimizerImpl impls[] = {OptimizerImpl::fused, OptimizerImpl::foreach, OptimizerImpl::forloop};
  all.allow_only({to_string(optimizers[0]), to_string(optimizers[1]), to_string(optimizers[2])});
  PassTable table;
  for (Optimizer o : optimizers) {
    const YNode by_impl = all.at(to_string(o));
    by_impl.allow_only({to_string(impls[0]), to_string(impls[1]), to_string(impls[2])});
    for (OptimizerImpl impl : impls) {
      const YNode n = by_impl.at(to_string(impl));
      n.allow_only({"state", "grad", "kernels"});
      table[{o, impl}] = {static_cast<double>(n.at("state").as_int(0, 1000)),
                          static_cast<double>(n.at("grad").as_int(0, 1000)),
                          static_cast<double>(n.at("kernels").as_int(1, 1000))};
    }
  }
  return table;
}

}  // namespace

std::filesystem::path optimizers_file() { return data_root() / "data" / "optimizers.yaml"; }

OptimizerPasses optimizer_passes(Optimizer optimizer, OptimizerImpl impl) {
  static const ReadOnce<PassTable> table(read_pass_table);  // read once; a bad file is an InputError naming its line
  return table.get().at({optimizer, impl});
}

}  // namespace dpsim
