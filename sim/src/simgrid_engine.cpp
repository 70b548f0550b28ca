// SimGrid's engine for the step's streams (the plugin libdpsim-simgrid.so: simgrid_plugin.hpp). The platform comes
// as plain data and is laid in one netzone whose routes are the platform's; each stream is an actor on its class's
// compute host, whose pstate 1 is its speed beside a collective; a call's flows are Comm::sendto_async.
#include <xbt/log.h>
// after xbt/log.h: simgrid/version.h uses its XBT_PUBLIC and SG_BEGIN_DECL
#include <simgrid/version.h>
#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/kernel/routing/NetZoneImpl.hpp>
#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Comm.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <simgrid/s4u/Semaphore.hpp>

#include <memory>

#include "simgrid_plugin.hpp"

namespace dpsim::sim {
namespace {

namespace sg4 = simgrid::s4u;
namespace sgr = simgrid::kernel::routing;
using LinkImpl = simgrid::kernel::resource::StandardLinkImpl;

// The netzone: every host lives in it; routes are the platform's, link indices turned into SimGrid's links.
class DpsimZone : public sgr::NetZoneImpl {
 public:
  explicit DpsimZone(const std::string& name) : NetZoneImpl(name) {}
  std::function<void(int, int, std::vector<int>&)> route;
  std::vector<LinkImpl*> links;  // [link index]
  std::vector<int> vertex_host;  // netpoint id -> host index (-1: not routable)

  void get_local_route(const sgr::NetPoint* src, const sgr::NetPoint* dst, sgr::Route* into, double* latency) override {
    (void)latency;  // links carry no latency (see platform.hpp)
    const int a = vertex_host.at(src->id());
    const int b = vertex_host.at(dst->id());
    if (a < 0 || b < 0) throw RuntimeError("simulator: route requested to a host outside the network");
    std::vector<int> indices;
    route(a, b, indices);
    for (int l : indices) into->link_list_.push_back(links.at(static_cast<size_t>(l)));
  }
};

class SimgridEngine final : public StepEngine {
 public:
  explicit SimgridEngine(const SimgridPlatformSpec& spec) : engine_(&argc_, argv_) {
    configure();
    lay(spec);
  }

  std::string name() const override {
    int major = 0, minor = 0, patch = 0;
    sg_version_get(&major, &minor, &patch);  // the library this process runs, not the headers
    return "SimGrid " + std::to_string(major) + "." + std::to_string(minor);
  }
  double now() const override { return sg4::Engine::get_clock(); }
  Blocking compute(int, double ops) override {  // the actor runs on its compute host
    if (ops > 0) sg4::this_actor::execute(ops);
    return {};
  }
  Blocking sleep(double seconds) override {
    sg4::this_actor::sleep_for(seconds);
    return {};
  }
  int semaphore() override {
    semaphores_.push_back(sg4::Semaphore::create(0));
    return static_cast<int>(semaphores_.size()) - 1;
  }
  Blocking acquire(int semaphore) override {
    semaphores_.at(static_cast<size_t>(semaphore))->acquire();
    return {};
  }
  Blocking release(int semaphore) override {
    semaphores_.at(static_cast<size_t>(semaphore))->release();
    return {};
  }
  Blocking set_pstate(int host, int pstate) override {
    compute_hosts_.at(static_cast<size_t>(host))->set_pstate(pstate);
    return {};
  }
  void send_all(const std::vector<FlowSend>& flows) override {
    std::vector<sg4::CommPtr> comms;
    comms.reserve(flows.size());
    for (const FlowSend& f : flows)
      comms.push_back(sg4::Comm::sendto_async(hosts_.at(static_cast<size_t>(f.src)),
                                              hosts_.at(static_cast<size_t>(f.dst)), f.bytes));
    sg4::Comm::wait_all(comms);
  }
  // The last stream drives: its actor creates the others' (which run once it yields), then runs its own stream.
  void run(std::vector<StreamStart>& streams) override {
    if (streams.empty()) return;
    const StreamStart& driver = streams.back();
    sg4::Actor::create(driver.name, compute_hosts_.at(static_cast<size_t>(driver.host)), [this, &streams] {
      for (size_t i = 0; i + 1 < streams.size(); ++i) {
        const StreamStart* s = &streams[i];
        sg4::Actor::create(s->name, compute_hosts_.at(static_cast<size_t>(s->host)),
                           [s] { finish_on_actor(s->start()); });
      }
      finish_on_actor(streams.back().start());
    });
    engine_.run();
  }

 private:
  // Exact alpha-beta sharing (see docs/simulator.md): CM02 without cross-traffic and without the TCP window cap. Set
  // before the platform exists.
  static void configure() {
    sg4::Engine::set_config("network/model:CM02");
    sg4::Engine::set_config("network/crosstraffic:0");
    sg4::Engine::set_config("network/TCP-gamma:0");
    sg4::Engine::set_config("contexts/stack-size:256");
    // Full, not the default Lazy: Lazy's selective update walks the linked constraints recursively
    // (lmm::System::update_modified_cnst_set_rec), and a ring across 65536 nodes chains them deep enough to overflow
    // the 8 MB stack (SIGSEGV at 2^19 GPUs). Every flow of a collective shares one such chain, so there was nothing
    // for Lazy to skip; results are identical.
    sg4::Engine::set_config("network/optim:Full");
  }

  // The hosts, then the links, in the platform's order (GPU hosts run no code: their speed plays no part).
  void lay(const SimgridPlatformSpec& spec) {
    zone_ = new DpsimZone("dpsim");  // the first zone becomes SimGrid's root, which owns it
    zone_->route = spec.route;
    for (const std::string& name : spec.hosts) hosts_.push_back(zone_->get_iface()->create_host(name, 1.0));
    for (const ComputeHost& h : spec.compute_hosts)
      compute_hosts_.push_back(
          zone_->get_iface()->create_host(h.name, std::vector<double>(h.speeds.begin(), h.speeds.end())));
    for (size_t k = 0; k < spec.duplex_links.size(); ++k) {
      auto* sd = zone_->get_iface()->create_split_duplex_link(spec.duplex_links[k], spec.duplex_bytes_per_s[k]);
      sd->seal();
      zone_->links.push_back(sd->get_link_up()->get_impl());
      zone_->links.push_back(sd->get_link_down()->get_impl());
    }
    auto map_host = [this](sg4::Host* h, int index) {
      const unsigned long id = h->get_netpoint()->id();
      if (zone_->vertex_host.size() <= id) zone_->vertex_host.resize(id + 1, -1);
      zone_->vertex_host[id] = index;
    };
    for (size_t i = 0; i < hosts_.size(); ++i) map_host(hosts_[i], static_cast<int>(i));
    for (sg4::Host* h : compute_hosts_) map_host(h, -1);  // off the network
    zone_->get_iface()->seal();
  }

  // The engine: logs silenced, raw contexts (threads are 12-16x slower).
  int argc_ = 3;
  char arg0_[6] = "dpsim";
  char arg1_[26] = "--log=root.thres:critical";
  char arg2_[27] = "--cfg=contexts/factory:raw";
  char* argv_[4] = {arg0_, arg1_, arg2_, nullptr};
  sg4::Engine engine_;
  DpsimZone* zone_ = nullptr;
  std::vector<sg4::Host*> hosts_, compute_hosts_;
  std::vector<sg4::SemaphorePtr> semaphores_;
};

}  // namespace
}  // namespace dpsim::sim

extern "C" __attribute__((visibility("default"))) dpsim::sim::StepEngine* dpsim_simgrid_engine(
    const dpsim::sim::SimgridPlatformSpec* spec) {
  return new dpsim::sim::SimgridEngine(*spec);
}
